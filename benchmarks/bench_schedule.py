"""Per-layer scheduling benchmark: every layer kind of every zoo model, fwd and bwd, t in {1, 8} where
valid, microbatch 1, on `tpuv4-like` and on 20 candidates drawn with a fixed seed from the default space.
Prints per-case solve time and status, totals, the fraction proven optimal, the maximum solve time and the
cache hit rate of a second pass. Goal: every case optimal, each under 1 s.

    .venv/bin/python benchmarks/bench_schedule.py [--time-limit S] [--candidates N] [--quiet]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.hardware.space import enumerate_space
from phaze.schedule import ScheduleCache, build_problem, solve_cached, validate
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.zoo import list_models


def cases(num_candidates: int, seed: int = 0):
    cands = enumerate_space()
    rng = np.random.default_rng(seed)
    idx = sorted(rng.choice(len(cands), size=num_candidates, replace=False).tolist())
    chips = [get_accelerator("tpuv4-like")] + [cands.arch.accelerator(int(i), name=f"cand{i}") for i in idx]
    tier = get_cluster("dgx-a100").tier_for_group(8)
    for model in list_models():
        for tp in (1, 8):
            if not model.valid_tp(tp):
                continue
            setting = TrainSetting(microbatch_size=1, seq_len=model.seq_len, tp=tp)
            for layer in ("embedding", "block", "head"):
                for direction in ("fwd", "bwd"):
                    graph = layer_graph(model, setting, layer, direction)
                    for chip in chips:
                        yield f"{model.name}/t{tp}/{layer}/{direction}", chip, graph, tier if tp > 1 else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--subsolvers", type=int, default=None, help="CP-SAT subsolvers (default: solve()'s)")
    args = ap.parse_args()
    all_cases = list(cases(args.candidates))
    cache = ScheduleCache()
    kw = {} if args.subsolvers is None else {"num_workers": args.subsolvers}
    times, statuses, gaps = [], [], []
    t0 = time.perf_counter()
    for label, chip, graph, tier in all_cases:
        problem = build_problem(graph, chip, tier)
        t = time.perf_counter()
        sched = solve_cached(problem, cache, args.time_limit, **kw)
        dt = time.perf_counter() - t
        validate(problem, sched)
        times.append(dt)
        statuses.append(sched.status)
        gaps.append(sched.gap)
        if not args.quiet or sched.status != "optimal" or dt > 1.0:
            print(f"{label:48s} {chip.name:12s} ops={len(problem.ops):3d} tc={chip.num_tc:4d} vc={chip.num_vc:4d} "
                  f"{sched.status:9s} gap={sched.gap:.1e} {dt * 1e3:8.1f} ms  makespan={sched.makespan_s:.4e} s")
    total = time.perf_counter() - t0
    n = len(all_cases)
    n_opt = statuses.count("optimal")
    print(f"\ncases: {n}  unique problems solved: {len(cache)}  total {total:.1f} s (incl. building)")
    print(f"optimal: {n_opt}/{n} = {n_opt / n:.1%}  feasible: {statuses.count('feasible')}  "
          f"heuristic: {statuses.count('heuristic')}  max gap {max(gaps):.2e}")
    print(f"solve time: sum {sum(times):.2f} s  mean {np.mean(times) * 1e3:.1f} ms  "
          f"max {max(times) * 1e3:.1f} ms  over 1 s: {sum(t > 1.0 for t in times)}")
    cache.hits = cache.misses = 0
    t = time.perf_counter()
    for label, chip, graph, tier in all_cases:
        solve_cached(build_problem(graph, chip, tier), cache, args.time_limit)
    print(f"second pass: cache hit rate {cache.hit_rate:.1%} in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
