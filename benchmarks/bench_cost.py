"""Cost every op of one GPT-3 175B transformer block (fwd + bwd; t=8, microbatch 1, seq 2048) on every
candidate of the default design space (the chip template: 60,524 chips; the paper's 29,360 with --space paper),
for "one core" and "all cores", and print the time.

Goal (issue 2): under 2 s.  Run:  .venv/bin/python benchmarks/bench_cost.py
Uses phaze.workload.graphs.layer_graph when available; otherwise builds the block's ops directly.
"""
from __future__ import annotations

import time

import numpy as np

from phaze.cost import op_latency_s
from phaze.hardware.presets import get_cluster
from phaze.hardware.space import enumerate_space
from phaze.workload.ops import Collective, Gemm, VectorOp

H, HEADS, FFN, SEQ, MB, TP = 12288, 96, 49152, 2048, 1, 8  # GPT-3 175B (Brown et al. 2020, Table 2.1)


def _fallback_block_ops() -> list:
    """Megatron-sharded GPT-3 block: forward GEMMs, their dgrad and wgrad, vector ops and all-reduces."""
    t, m, e = TP, SEQ * MB, 2
    hd, nh = H // HEADS, HEADS // TP
    fwd_gemms = [Gemm("qkv", 1, m, 3 * H // t, H), Gemm("scores", nh, m, SEQ, hd), Gemm("attn_v", nh, m, hd, SEQ),
                 Gemm("proj", 1, m, H, H // t), Gemm("fc1", 1, m, FFN // t, H), Gemm("fc2", 1, m, H, FFN // t)]
    bwd_gemms = [g2 for g in fwd_gemms for g2 in (Gemm(g.name + ".dgrad", g.batch, g.m, g.k, g.n),
                                                   Gemm(g.name + ".wgrad", g.batch, g.k, g.n, g.m))]
    act, probs, ffn = m * H, nh * m * SEQ, m * FFN // t
    vec = [VectorOp("ln1", "layernorm", act, 8, 2 * e * act), VectorOp("softmax", "softmax", probs, 7, 2 * e * probs),
           VectorOp("add1", "add", act, 2, 3 * e * act), VectorOp("ln2", "layernorm", act, 8, 2 * e * act),
           VectorOp("gelu", "gelu", ffn, 14, 2 * e * ffn), VectorOp("add2", "add", act, 2, 3 * e * act)]
    vec_bwd = [VectorOp(v.name + ".bwd", v.kind + "_bwd", v.elements, 2 * v.flops_per_element, 3 * v.bytes_moved // 2)
               for v in vec]
    ar = [Collective(f"ar{i}", "all_reduce", e * act, t) for i in range(4)]
    return fwd_gemms + bwd_gemms + vec + vec_bwd + ar


def block_ops() -> tuple[list, str]:
    try:
        from phaze.workload.runtime import TrainSetting
        from phaze.workload.graphs import layer_graph
        from phaze.workload.zoo import get_model
        model, setting = get_model("gpt3-175b"), TrainSetting(microbatch_size=MB, seq_len=SEQ, tp=TP)
        ops = [op for d in ("fwd", "bwd") for op in layer_graph(model, setting, "block", d).ops]
        return ops, "phaze.workload.graphs.layer_graph"
    except ImportError:
        return _fallback_block_ops(), "built-in fallback (phaze.workload.graphs not importable)"


def main() -> None:
    import sys
    from phaze.hardware.space import resolve_space
    space = "paper" if "--space" in sys.argv and sys.argv[sys.argv.index("--space") + 1] == "paper" else "default"
    ops, source = block_ops()
    tier = get_cluster("dgx-a100").tier_for_group(TP)
    t0 = time.perf_counter()
    cands = enumerate_space(resolve_space(space))
    t1 = time.perf_counter()
    arch = cands.arch
    total = {"one core": np.zeros(len(arch)), "all cores": np.zeros(len(arch))}
    for op in ops:
        all_cores = arch.num_tc if isinstance(op, Gemm) else arch.num_vc
        total["one core"] += op_latency_s(op, arch, 1, tier)
        total["all cores"] += op_latency_s(op, arch, all_cores, tier)
    t2 = time.perf_counter()
    print(f"ops: {len(ops)} of a GPT-3 175B block (fwd+bwd, t={TP}, mb={MB}, seq={SEQ}) from {source}")
    print(f"candidates: {len(arch)} (enumerated in {t1 - t0:.3f} s)")
    print(f"cost of {2 * len(ops)} op-modes x {len(arch)} chips: {t2 - t1:.3f} s (goal < 2 s)")
    for mode, tot in total.items():
        i = int(np.argmin(tot))
        a = arch.accelerator(i)
        print(f"  {mode:9s}: block fwd+bwd serial time {tot.min() * 1e3:.2f} .. {tot.max() * 1e3:.1f} ms; best chip "
              f"{a.num_tc} TC x {a.tc_rows}x{a.tc_cols}, {a.num_vc} VC x {a.vc_width}, GLB {a.glb_bytes >> 20} MiB")
    one_chip()


def one_chip(seconds: float = 3.0) -> None:
    """The other end: one GEMM on one chip at a time, as a fixed chip's layer schedules ask for it (GPT-2 XL's
    qkv, scores and fc1 at microbatch 4, on the TPUv4-like chip at 1, 2, 4 and 8 cores), in a loop."""
    from phaze.cost.gemm import gemm_terms
    from phaze.hardware.presets import get_accelerator
    a = get_accelerator("tpuv4-like").as_arrays()
    gemms = [Gemm("qkv", 1, 4 * 1024, 4800, 1600), Gemm("scores", 4 * 25, 1024, 1024, 64),
             Gemm("fc1", 1, 4 * 1024, 6400, 1600)]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for g in gemms:
            for c in (1, 2, 4, 8):
                gemm_terms(g, a, c)
                n += 1
    print(f"one chip: {(time.perf_counter() - t0) / n * 1e6:.0f} us per GEMM cost ({n} costed)")


if __name__ == "__main__":
    main()
