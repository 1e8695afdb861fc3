"""Benchmark: `phaze plan` on the MoE dev set's two largest cases (issue 33: "Plan DeepSeek-V3 on 1,024 H100 and
Qwen3-235B on 256 H100 in seconds, not minutes"): the full plan space (every width, microbatch, interleaving,
recompute mode, ZeRO-1, sequence parallelism, and every expert-parallel size), the runs' runtime. Prints the
wall and CPU time, the settings costed and the plans solved, and the best plan beside the published one.

Run: .venv/bin/python benchmarks/bench_moe_plan.py
"""
from __future__ import annotations

import time

from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import evaluate, optimize
from phaze.validation.moe import load_runs, run_model, run_plan, run_runtime
from phaze.workload.runtime import PlanSpace

CASES = ("MB 25.09 DeepSeek-V3 671B H100 (1024 GPUs)", "MB 25.11 Qwen3-235B-A22B H100 FP8-CS (256 GPUs)")


def main() -> None:
    runs = {r["case"]: r for r in load_runs()["runs"]}
    for case in CASES:
        run = runs[case]
        model = run_model(run)
        acc, cluster = get_accelerator(run["accelerator"]), get_cluster(run["cluster"], run["devices"])
        published = evaluate(run_plan(run, model), model, acc, cluster, run["global_batch"])
        space = PlanSpace(microbatch_sizes=(1, 2, 4), interleave_values=(1, 2, 4, 8))
        t0, c0 = time.perf_counter(), time.process_time()
        res = optimize(model, acc, cluster, run["global_batch"], run_runtime(run), space, top_k=0, baselines=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        st = res.stats
        print(f"{case}: {wall:.1f} s wall, {cpu:.1f} s CPU; {st.plans_considered:,} plans considered, "
              f"{st.plans_solved:,} solved; best {res.best.plan.describe()} {res.best.iteration_time_s:.2f} s "
              f"(published plan {published.iteration_time_s:.2f} s, {'fits' if published.fits else 'does not fit'};"
              f" best / published {res.best.iteration_time_s / published.iteration_time_s:.3f})")


if __name__ == "__main__":
    main()
