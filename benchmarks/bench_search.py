"""Benchmark: the co-search over the full default space (the chip template with the on-chip hierarchy, x HBM
32/64/80 GiB; ``--space paper`` for the paper's 29,360 chips) in the paper's
setting (1024 devices on the flat 4 GiB/s network, global batch 4096, microbatch 1/2/4/8, recompute
none/full, every valid t <= 8), for GPT-3 175B and BERT-Large, with 2 workers. Prints the wall time and
how many candidates were evaluated exactly, bounded and pruned. Goal: each under 10 minutes.

Run: .venv/bin/python benchmarks/bench_search.py [--models gpt3-175b,bert-large] [--workers 2]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from phaze.search import SearchSpec, run_search
from phaze.workload.zoo import get_model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt3-175b,bert-large")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--space", default="default", help="default or paper")
    args = ap.parse_args()
    from phaze.hardware.space import resolve_space
    for name in args.models.split(","):
        spec = SearchSpec(models=(get_model(name),), space=resolve_space(args.space), space_name=args.space)
        store = os.path.join(tempfile.mkdtemp(prefix="phaze-bench-"), "search.db")
        t0 = time.perf_counter()
        res = run_search(spec, store, workers=args.workers, quiet=False)
        wall = time.perf_counter() - t0
        c = res.counts
        print(f"{name}: wall {wall:.1f} s with {args.workers} workers; candidates {c['candidates']:,}: "
              f"exact {c['exact']:,}, bounded {c['bounded']:,}, pruned {c['pruned']:,}, infeasible "
              f"{c['infeasible']:,}; layer schedules solved {c['schedules_solved']:,} "
              f"(not proven optimal {c['schedules_not_optimal']:,})")
        if res.best:
            b, ref = res.best, res.references[0]
            o = b["outcomes"][0]
            print(f"  best chip #{b['chip']}: {b['num_tc']} TC {b['tc_rows']}x{b['tc_cols']}, {b['num_vc']} VC x "
                  f"{b['vc_width']}, GLB {b['glb_bytes'] >> 20} MiB ({b.get('glb_banks')} banks x "
                  f"{b.get('glb_bank_width_bytes')} B, {b.get('noc')}), HBM {b['hbm_gib']} GiB, {b['area_mm2']:.1f} mm^2: "
                  f"{o['throughput_seq_per_s']:.2f} seq/s with {o['plan']}; power {o.get('power_w')} W (peak "
                  f"{b.get('peak_power_w')} W), bound by {o.get('bound_by')}")
            print(f"  TPUv4-like: best plan {ref['best_seq_per_s']:.2f} seq/s ({ref['best_plan']}); paper plan "
                  f"{ref['paper_seq_per_s']:.2f} seq/s; speedup of the winner {b['score']:.3f}x")


if __name__ == "__main__":
    main()
