"""The workload model against PyTorch's own counts for every zoo model and every shipped Hugging Face config
(the README's cross-check table), with the time each check takes. Needs the [torch] extra.

Run:  .venv/bin/python benchmarks/bench_torch_check.py [--seq 256]
Columns: parameters (ours == PyTorch's), and ours / PyTorch - 1 for GEMM FLOPs per block and for embedding
+ head, forward and backward (microbatch 1). PyTorch counts mm/addmm/bmm; we count our GEMMs.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from phaze.workload import get_model, list_models
from phaze.workload.torch_check import check_against_torch

CONFIGS = Path(__file__).resolve().parent.parent / "tests" / "workload" / "hf_configs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=256, help="sequence length of the check (default: 256)")
    args = ap.parse_args()
    names = [m.name for m in list_models()] + [f"hf:{p}" for p in sorted(CONFIGS.glob("*.json"))]
    print("| model | transformers family | parameters (both) | fwd/block | bwd/block | fwd emb+head | bwd emb+head | time |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    worst = 0.0
    for name in names:
        m = get_model(name)
        t0 = time.perf_counter()
        chk = check_against_torch(m, 1, min(args.seq, m.seq_len))
        dt = time.perf_counter() - t0
        p = chk.row("parameters (total)")
        errs = [chk.row(q).rel_error for q in ("fwd GEMM FLOPs per block", "bwd GEMM FLOPs per block",
                                                "fwd GEMM FLOPs embedding + head", "bwd GEMM FLOPs embedding + head")]
        worst = max([worst, abs(p.rel_error)] + [abs(e) for e in errs])
        src = "zoo" if not name.startswith("hf:") else "config"
        params = f"{p.ours:,.0f}" if p.ours == p.torch else f"{p.ours:,.0f} vs {p.torch:,.0f}"
        print(f"| {m.name} ({src}) | {chk.hf_family} | {params} | " + " | ".join(f"{e:+.2%}" for e in errs)
              + f" | {dt:.1f} s |")
    print(f"\nlargest |difference|: {worst:.2e}")


if __name__ == "__main__":
    main()
