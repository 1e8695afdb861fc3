"""The real-time branch and bound (phaze.schedule.bnb) on every case of bench_schedule.py, against CP-SAT.

Cases: ``bench_schedule.cases(N)`` (default 20 candidates: 2394 cases). As in ``solve``, a case whose
list-scheduling makespan already meets the lower bound (after ``isolated_fastest``) needs no search and is
skipped; every other case is solved by ``solve_bnb`` (no cache: duplicates are solved again) and its
schedule validated. Prints the slow (> --slow s) or unproven cases, the totals (fraction proven, mean and
max time), then runs ``solve`` (CP-SAT) with a 1 s limit on each distinct non-trivial problem and compares
on the cases CP-SAT does not prove. Goal: every case proven, each under 1 s.

    .venv/bin/python benchmarks/bench_bnb.py [--candidates N] [--time-limit S] [--slow S] [--no-cpsat]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_schedule import cases

from phaze.schedule import build_problem, problem_key, solve, validate
from phaze.schedule.bnb import solve_bnb
from phaze.schedule.bounds import lower_bound_s
from phaze.schedule.heuristic import assign_cores, heuristic_timing, to_scheduled_ops
from phaze.schedule.problem import Schedule
from phaze.schedule.reduce import isolated_fastest

RTOL = 1e-9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--candidates", type=int, default=20)
    ap.add_argument("--time-limit", type=float, default=1.0, help="B&B limit per case (s)")
    ap.add_argument("--cpsat-limit", type=float, default=1.0)
    ap.add_argument("--slow", type=float, default=0.25, help="print cases slower than this (s)")
    ap.add_argument("--no-cpsat", action="store_true")
    args = ap.parse_args()
    t_start = time.perf_counter()
    all_cases = list(cases(args.candidates))
    rows = []  # (label, chip, key, problem, result)
    trivial = 0
    for label, chip, graph, tier in all_cases:
        # what the solvers optimize: every op at full bandwidth (``solve`` re-times its schedule afterwards)
        problem = build_problem(graph, chip, tier).relaxed()
        reduced = isolated_fastest(problem)
        if heuristic_timing(reduced).makespan <= lower_bound_s(reduced) * (1 + RTOL):
            trivial += 1
            continue
        res = solve_bnb(problem, time_limit_s=args.time_limit)
        t = res.timing
        validate(problem, Schedule(t.makespan, res.lower_bound_s, "optimal" if res.proven else "feasible",
                                   0.0, res.solve_time_s, to_scheduled_ops(problem, t, assign_cores(problem, t))))
        rows.append((label, chip.name, problem_key(problem), problem, res))
        if not res.proven or res.solve_time_s > args.slow:
            print(f"{label:36s} {chip.name:10s} ops={len(problem.ops):2d} tc={chip.num_tc:4d} "
                  f"{'proven' if res.proven else 'OPEN':6s} {res.solve_time_s * 1e3:7.1f} ms "
                  f"nodes={res.nodes:6d} makespan={t.makespan:.6e} lb={res.lower_bound_s:.6e}", flush=True)
    times = np.array([r[4].solve_time_s for r in rows])
    proven = sum(r[4].proven for r in rows)
    nodes = np.array([r[4].nodes for r in rows])
    print(f"\ncases: {len(all_cases)}  trivial (heuristic meets the bound): {trivial}  searched: {len(rows)} "
          f"({len({r[2] for r in rows})} distinct)  wall {time.perf_counter() - t_start:.1f} s")
    if rows:
        print(f"B&B proven: {proven}/{len(rows)} = {proven / len(rows):.1%}  time: mean {times.mean() * 1e3:.1f} ms  "
              f"p99 {np.quantile(times, 0.99) * 1e3:.1f} ms  max {times.max() * 1e3:.1f} ms  "
              f"sum {times.sum():.2f} s  over 1 s: {int((times > 1.0).sum())}  nodes: mean {nodes.mean():.0f} "
              f"max {nodes.max()}")
    if args.no_cpsat or not rows:
        return
    print(f"\nCP-SAT (solve, {args.cpsat_limit} s) on each distinct searched problem:")
    cp: dict[str, tuple] = {}
    for label, chip, key, problem, res in rows:
        if key in cp:
            continue
        t = time.perf_counter()
        sched = solve(problem, time_limit_s=args.cpsat_limit)
        cp[key] = (label, chip, sched, time.perf_counter() - t, res)
    failed = [v for v in cp.values() if v[2].status != "optimal"]
    cp_times = np.array([v[3] for v in cp.values()])
    print(f"CP-SAT proven: {len(cp) - len(failed)}/{len(cp)}  time: mean {cp_times.mean() * 1e3:.1f} ms  "
          f"max {cp_times.max() * 1e3:.1f} ms  sum {cp_times.sum():.1f} s")
    better = 0
    for label, chip, sched, dt, res in failed:
        rel = (sched.makespan_s - res.timing.makespan) / res.timing.makespan
        better += rel > RTOL
        print(f"  {label:36s} {chip:10s} CP-SAT {sched.status:8s} {sched.makespan_s:.6e} gap={sched.gap:.1e} "
              f"{dt * 1e3:6.0f} ms | B&B {'proven' if res.proven else 'OPEN'} {res.timing.makespan:.6e} "
              f"{res.solve_time_s * 1e3:6.1f} ms  CP-SAT worse by {rel:.2e}")
    worse = [v for v in cp.values() if v[4].timing.makespan > v[2].makespan_s * (1 + RTOL)]
    print(f"on the {len(failed)} problems CP-SAT leaves unproven: B&B proves "
          f"{sum(v[4].proven for v in failed)}, finds a strictly better schedule on {better}; "
          f"problems where B&B is worse than CP-SAT: {len(worse)}")
    for label, chip, sched, dt, res in worse:
        print(f"  WORSE {label} {chip}: B&B {res.timing.makespan:.6e} CP-SAT {sched.makespan_s:.6e}")


if __name__ == "__main__":
    main()
