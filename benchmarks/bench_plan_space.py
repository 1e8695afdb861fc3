"""Benchmark: the co-search in the full plan space against the paper's (issue 34 item 4), on the default space
(60,482 chips x HBM 32/64/80 GiB) in the paper's setting (1024 devices on the flat 4 GiB/s network, global batch
4096, microbatch 1/2/4/8), with 2 workers and the default power cap, exactly as `phaze search` runs it (winner
explained, wins_because, TCO). For each model: the wall time of each plan space, their ratio, and the winner each
finds. Goals: GPT-3 175B full-space <= 10 min; GPT-2 XL (`phaze demo`) full-space <= 30 s.

Run: PYTHONPATH=src .venv/bin/python benchmarks/bench_plan_space.py [--models gpt2-xl,gpt3-175b] [--workers 2]
     [--plan-spaces paper,full]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from phaze import api

GOAL_S = {"gpt2-xl": 30.0, "gpt3-175b": 600.0}


def run(model: str, plan_space: str, workers: int) -> tuple[float, object]:
    store = os.path.join(tempfile.mkdtemp(prefix="phaze-bench-"), "search.db")
    t0 = time.perf_counter()
    res = api.search([model], store=store, workers=workers, quiet=True, plan_space=plan_space)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2-xl,gpt3-175b")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--plan-spaces", default="paper,full")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    for model in args.models.split(","):
        walls = {}
        for ps in args.plan_spaces.split(","):
            wall, res = run(model, ps, args.workers)
            walls[ps] = wall
            c, b = res.counts, res.best
            line = (f"{model} --plan-space {ps}: wall {wall:.1f} s; exact {c['exact']:,}, bounded {c['bounded']:,}, "
                    f"pruned {c['pruned']:,}; load average now {os.getloadavg()[0]:.2f}")
            if b is not None:
                o, ref = b.outcomes[0], res.references[0]
                line += (f"\n  winner chip {b.chip}: {b.num_tc}x TC {b.tc_rows}x{b.tc_cols}, {b.num_vc}x VC {b.vc_width}, "
                         f"GLB {b.glb_bytes >> 20} MiB, {b.area_mm2:.1f} mm^2, HBM {b.hbm_gib} GiB: "
                         f"{o.throughput_seq_per_s:,.2f} seq/s ({o.plan}); TPUv4-like best {ref.best_seq_per_s:,.2f} "
                         f"seq/s ({ref.best_plan}); score {b.score:.3f}x")
            goal = GOAL_S.get(model)
            if ps == "full" and goal:
                line += f"\n  goal <= {goal:.0f} s: {'met' if wall <= goal else 'NOT met'}"
            print(line, flush=True)
        if "paper" in walls and "full" in walls:
            print(f"{model}: full / paper wall time = {walls['full'] / walls['paper']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
