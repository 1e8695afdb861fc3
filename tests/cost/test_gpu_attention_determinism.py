"""Deterministic mode's flash-attention backward (phaze.cost.gpu_attention_determinism): on an A100 Transformer
Engine falls back to FlashAttention-2's deterministic backward, whose grid of ceil(SMs / (b x h)) x b x h CTAs
runs in whole waves. The wave factors hand-computed; the layer's extra time hand-computed from its own flash
GEMM halves; an H100 and a non-deterministic run unchanged; enough heads to fill the GPU cost only the zero
fill of dq_accum."""
import pytest

from phaze.cost.gpu import TENSOR_CORES_PER_SM, gpu_gemm_latency_s, is_flash
from phaze.cost.gpu_attention_determinism import (DQ_ACCUM_BYTES, deterministic_attention_extra_s,
                                                  fa2_deterministic_factor)
from phaze.cost.gpu_determinism import deterministic_fill_s
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement.layer_costs import compute_layer_costs, setting_for
from phaze.workload.config import ModelConfig
from phaze.workload.graphs import layer_graph
from phaze.workload.ops import Gemm
from phaze.workload.runtime import PAPER_RUNTIME

A100 = get_accelerator("a100-80g")
H100 = get_accelerator("h100-80g")
# the Megatron-LM CI 7B layer (held-out 3): 32 query heads of 128, 8 KV groups, sequence 8192
GPT7B = ModelConfig("ci-7b", num_layers=2, hidden=4096, heads=32, ffn=16384, vocab=1024, seq_len=8192, kv_heads=8)


def test_wave_factor_hand_computed():
    # 32 heads x micro-batch 1 on 108 SMs: 4 splits, 128 CTAs in 2 waves -> 2 x 108 / 128; the usual grid,
    # 64 key blocks x 32 = 2048 CTAs, is 19 waves of 108 -> 19 x 108 / 2048
    factor, nsplits = fa2_deterministic_factor(32, 8192, 108)
    assert nsplits == 4
    assert factor == pytest.approx((2 * 108 / 128) / (19 * 108 / 2048), rel=1e-12)
    assert factor == pytest.approx(1.6842, abs=1e-4)
    # 8 heads x micro-batch 2 (the TP 4 run): 7 splits, 112 CTAs in 2 waves; usual grid 1024 CTAs, 10 waves
    factor, nsplits = fa2_deterministic_factor(16, 8192, 108)
    assert nsplits == 7 and factor == pytest.approx((2 * 108 / 112) / (10 * 108 / 1024), rel=1e-12)
    # as many heads as SMs: one split, one full wave, as evenly spread as the usual grid
    assert fa2_deterministic_factor(108, 8192, 108) == (pytest.approx(1.0), 1)
    # H100's 132 SMs, 32 heads: 5 splits, 160 CTAs, 2 waves
    factor, nsplits = fa2_deterministic_factor(32, 8192, 132)
    assert nsplits == 5 and factor == pytest.approx((2 * 132 / 160) / (16 * 132 / 2048), rel=1e-12)


def _bwd(model, mbs, tp):
    s = setting_for(model, mbs, tp, False, "none", runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16", deterministic=True))
    return s, layer_graph(model, s, "block", "bwd")


def test_extra_time_hand_computed_on_a100():
    _, g = _bwd(GPT7B, 1, 1)
    arch = A100.as_arrays()
    lat = [float(gpu_gemm_latency_s(op, arch).reshape(-1)[0]) if isinstance(op, Gemm) else 0.0 for op in g.ops]
    halves = [(op, x) for op, x in zip(g.ops, lat) if isinstance(op, Gemm) and is_flash(op)]
    assert sorted(op.name for op, _ in halves) == ["flash_pv.dprobs", "flash_pv.dv", "flash_scores.dk",
                                                   "flash_scores.dq", "recompute.flash_scores"]
    attention_s = sum(x for _, x in halves)
    memory_Bps = A100.hbm_bandwidth_Bps * A100.memory_efficiency
    sms = A100.num_tc // TENSOR_CORES_PER_SM
    factor, nsplits = fa2_deterministic_factor(32, 8192, sms)
    accum = DQ_ACCUM_BYTES * 32 * 8192 * 128 * (2 * nsplits - 1)  # zero 4 slices, read 3 more
    want = attention_s * (factor - 1) + accum / memory_Bps
    assert deterministic_attention_extra_s(g, lat, A100.name, sms, memory_Bps) == pytest.approx(want, rel=1e-12)
    assert want > 0.5 * attention_s  # the backward kernel takes ~1.7x as long
    # H100 keeps cuDNN's attention (not charged); a graph without flash attention has nothing to charge
    assert deterministic_attention_extra_s(g, lat, H100.name, 132, memory_Bps) == 0.0
    std = setting_for(GPT7B, 1, 1, False, "none", runtime=PAPER_RUNTIME.with_(attention="standard", precision="bf16", deterministic=True))
    gs = layer_graph(GPT7B, std, "block", "bwd")
    assert deterministic_attention_extra_s(gs, [1.0] * len(gs.ops), A100.name, sms, memory_Bps) == 0.0


@pytest.mark.parametrize("gpu,charged", [("a100-80g", True), ("h100-80g", False)])
def test_block_backward_grows_by_fills_and_attention(gpu, charged):
    """A block's backward in deterministic mode is the plain one plus the fills plus (A100 only) the
    deterministic attention backward; the forward gets only the fills."""
    acc = get_accelerator(gpu)
    det, g = _bwd(GPT7B, 1, 1)
    base = setting_for(GPT7B, 1, 1, False, "none", runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16"))
    tier = get_cluster("dgx-" + gpu.split("-")[0], 8).tier_for_group(1, 1, "tp")
    a, b = compute_layer_costs(GPT7B, acc, det, tier)["block"], compute_layer_costs(GPT7B, acc, base, tier)["block"]
    memory_Bps = acc.hbm_bandwidth_Bps * acc.memory_efficiency
    fill = deterministic_fill_s(g, memory_Bps, acc.op_overhead_s)
    got = a.bwd_s - b.bwd_s
    if charged:
        assert got > fill * 1.5
    else:
        assert got == pytest.approx(fill, rel=1e-9)
    fwd_fill = deterministic_fill_s(layer_graph(GPT7B, det, "block", "fwd"), memory_Bps, acc.op_overhead_s)
    assert a.fwd_s - b.fwd_s == pytest.approx(fwd_fill, rel=1e-9)


def test_full_recompute_charges_the_same_backward_kernel():
    """Full recompute re-runs the forward attention kernel (deterministic already): the extra time is that of the
    same backward kernel as without recompute."""
    sms = A100.num_tc // TENSOR_CORES_PER_SM
    memory_Bps = A100.hbm_bandwidth_Bps * A100.memory_efficiency
    arch = A100.as_arrays()
    extra = {}
    for rc in ("none", "full"):
        s = setting_for(GPT7B, 1, 1, False, rc, runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16", deterministic=True))
        g = layer_graph(GPT7B, s, "block", "bwd")
        lat = [float(gpu_gemm_latency_s(op, arch).reshape(-1)[0]) if isinstance(op, Gemm) else 0.0 for op in g.ops]
        extra[rc] = deterministic_attention_extra_s(g, lat, A100.name, sms, memory_Bps)
    assert "recompute.flash_pv" in [op.name for op in g.ops]
    assert extra["full"] == pytest.approx(extra["none"], rel=1e-12) and extra["none"] > 0
