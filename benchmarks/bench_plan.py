"""Benchmark: the exact best plan for GPT-3 175B on 1024 A100-80G (DGX A100 cluster), global batch 1536,
over the full plan space (t, p, d, microbatch 1..16, recompute modes, sequence parallelism, interleaving;
v = 1 plans may also pick one recompute mode per pipeline stage).
Prints the wall time (cold: including building the per-layer costs; warm: costs cached) and the number of
plans considered. Goal: < 2 s.  Run: .venv/bin/python benchmarks/bench_plan.py
"""
from __future__ import annotations

import time

from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import optimize
from phaze.workload.runtime import PAPER_RUNTIME, PlanSpace
from phaze.workload.zoo import get_model


def main() -> None:
    model = get_model("gpt3-175b")
    acc = get_accelerator("a100-80g")
    cluster = get_cluster("dgx-a100", 1024)
    space = PlanSpace(microbatch_sizes=(1, 2, 4, 8, 16), recompute_modes=("none", "selective", "full"),
                      interleave_values=(1, 2, 4), sequence_parallel=(False, True))
    for label in ("cold", "warm"):
        t0 = time.perf_counter()
        res = optimize(model, acc, cluster, 1536, PAPER_RUNTIME, space, top_k=5)
        wall = time.perf_counter() - t0
        s = res.stats
        print(f"{label}: wall {wall:.3f} s (search {s.wall_time_s:.3f} s); combinations considered "
              f"{s.plans_considered:,}, solved exactly {s.plans_solved:,}; per-stage recompute combinations "
              f"considered {s.mixed_considered:,}, solved exactly {s.mixed_solved:,}; stage partitions x "
              f"per-stage modes covered {s.partitions_covered:.3g}")
    b = res.best
    print(f"best: {b.plan.describe()}  iteration {b.iteration_time_s:.3f} s, {b.throughput_seq_per_s:.1f} seq/s, "
          f"MFU {b.mfu:.3f}, memory {b.memory_bytes_per_device / 2**30:.1f} GiB")
    print("layers per virtual stage:", [r[1] - r[0] for r in b.plan.stages])
    for a in res.alternatives:
        print(f"  alt: {a.plan.describe()}  {a.iteration_time_s:.3f} s")
    for base in res.baselines:
        it = f"{base.evaluation.iteration_time_s:.3f} s" if base.evaluation else "-"
        print(f"  baseline {base.name}: fits={base.fits} {base.plan.describe() if base.plan else ''} {it} "
              f"{base.reason}")


if __name__ == "__main__":
    main()
