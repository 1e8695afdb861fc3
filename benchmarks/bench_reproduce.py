"""Benchmark: `phaze reproduce` (the paper's comparison) with 2 workers, timed per model: the co-search
over the full default space in the paper's setting, the Spotlight-style search (100 samples) and the
best/paper plans of its chip. Prints, per model, the wall time of each part, the candidates the co-search
evaluated exactly and the layer schedules solved and left unproven, then the total.
Goal (issue 12): all 8 models within 20 minutes on 2 cores, every layer schedule proven optimal.

Run: .venv/bin/python benchmarks/bench_reproduce.py [--models gpt2-xl,bert-large] [--workers 2]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from phaze import api
from phaze.search.reproduce import PAPER_MODELS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(PAPER_MODELS))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="phaze-bench-reproduce-")
    t0 = time.perf_counter()
    res, _ = api.reproduce(args.models.split(","), store=os.path.join(d, "r.db"), workers=args.workers,
                           out=os.path.join(d, "r"))
    wall = time.perf_counter() - t0
    unproven = 0
    for m, w in res.model_wall_s.items():
        mine = {(r.role, r.plan_kind): r for r in res.rows if r.model == m}
        ph, sp = mine.get(("phaze", "best")), mine[("spotlight", "best")]
        co = ph.search_wall_s if ph else 0.0
        unproven += (ph.schedules_not_optimal if ph else 0) + sp.schedules_not_optimal
        print(f"{m}: {w:.1f} s in all; co-search {co:.1f} s ({ph.evaluated if ph else 0} candidates exact, "
              f"{ph.schedules_solved if ph else 0} layer schedules solved, {ph.schedules_not_optimal if ph else 0} "
              f"not proven optimal); Spotlight-style {sp.search_wall_s:.1f} s ({sp.evaluated} samples, "
              f"{sp.schedules_not_optimal} unproven); its plans {w - co - sp.search_wall_s:.1f} s")
    print(f"total: {wall:.1f} s ({wall / 60:.1f} min) for {len(res.model_wall_s)} models with {args.workers} workers; "
          f"layer schedules not proven optimal: {unproven}; outputs in {d}")


if __name__ == "__main__":
    main()
