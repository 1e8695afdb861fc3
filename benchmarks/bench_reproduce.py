"""Benchmark: `phaze reproduce` (the paper's comparison) with 2 workers, timed per model: the co-search
over the full default space in the paper's setting, the Spotlight-style search (100 samples) and the
best/paper plans of its chip. Prints, per model, the wall time and the CPU time (this process and its pool
workers: the machine may be shared, so wall time alone does not say what a run cost), the candidates the
co-search evaluated exactly, bounded out (its exact plan was needed to rule it out, or a chip with the same
lower bounds was) and pruned by the vectorized bound alone, the chips sent for evaluation, and the layer
schedules solved (of them reused from the workers' content-hashed caches, and not proven optimal), then
the totals.
Goal (issue 12): all 8 models within 20 minutes on 2 cores, every layer schedule proven optimal.

Run: .venv/bin/python benchmarks/bench_reproduce.py [--models gpt2-xl,bert-large] [--workers 2]
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

from phaze import api
from phaze.search.reproduce import PAPER_MODELS


def _cpu_s() -> float:
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                  resource.getrusage(resource.RUSAGE_CHILDREN)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=",".join(PAPER_MODELS))
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="phaze-bench-reproduce-")
    t0, c0 = time.perf_counter(), _cpu_s()
    res, _ = api.reproduce(args.models.split(","), store=os.path.join(d, "r.db"), workers=args.workers,
                           out=os.path.join(d, "r"), quiet=True)
    wall, cpu = time.perf_counter() - t0, _cpu_s() - c0  # the pool has ended: its workers are in CHILDREN
    unproven = 0
    for m, w in res.model_wall_s.items():
        mine = {(r.role, r.plan_kind): r for r in res.rows if r.model == m}
        ph, sp = mine.get(("phaze", "best")), mine[("spotlight", "best")]
        co = ph.search_wall_s if ph else 0.0
        n = res.model_counts.get(m, {})
        unproven += n.get("schedules_not_optimal", 0) + sp.schedules_not_optimal
        print(f"{m}: {w:.1f} s wall, {res.model_cpu_s.get(m, float('nan')):.1f} s CPU; co-search {co:.1f} s wall "
              f"({n.get('exact', 0)} candidates exact, {n.get('bounded', 0)} bounded, {n.get('pruned', 0)} pruned "
              f"by the vectorized bound; {n.get('chips_evaluated_this_run', 0)} chips sent for evaluation; "
              f"{n.get('schedules_solved', 0)} layer schedules solved, {n.get('schedules_reused', 0)} of them "
              f"reused, {n.get('schedules_not_optimal', 0)} not proven optimal); Spotlight-style "
              f"{sp.search_wall_s:.1f} s ({sp.evaluated} samples, {sp.schedules_solved} schedules, "
              f"{sp.schedules_not_optimal} unproven); its plans {w - co - sp.search_wall_s:.1f} s")
    print(f"total: {wall:.1f} s wall ({wall / 60:.1f} min), {cpu:.1f} s CPU ({cpu / 60:.1f} min, this process and "
          f"its workers) for {len(res.model_wall_s)} models with {args.workers} workers; layer schedules not proven "
          f"optimal: {unproven}; load average at the end {os.getloadavg()[0]:.1f}; outputs in {d}")


if __name__ == "__main__":
    main()
