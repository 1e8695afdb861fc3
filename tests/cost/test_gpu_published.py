"""The GPU GEMM and layer model against published Hopper measurements.

1. Transformer Engine's GEMM profiling tutorial (github NVIDIA/TransformerEngine
docs/examples/gemm_profiling/gemm_profiling.rst, commit 1609c89, "Worked Example: 5B Model on H200"): the 12
linear GEMMs of one layer (hidden 4096, FFN 16384, 32 heads, M = 31 x 512 = 15,872 tokens) on an H200 NVL, BF16
31.968 ms and raw FP8 (pre-quantized CurrentScaling) 16.785 ms per layer. The H200 NVL has the H100's GH100 SMs
and tensor cores (132 SMs) at a lower datasheet clock: 835.5 TFLOP/s dense BF16 (1,671 with sparsity); HBM3e
4.8 TB/s. Our H100 preset re-clocked to that peak reproduces both times with the wave model at an in-wave
efficiency of 0.746 and an FP8 rate of 31.968 / 16.785 = 1.905x (the H200 NVL's own figures).
2. Transformer Engine's getting-started tutorial (docs/getting_started/getting_started_pytorch.py / .out, commit
a97674070, "on an NVIDIA H100 GPU"): one GPT layer forward + backward on one H100, the measurement
H100_MATRIX_EFFICIENCY (its BF16 run) and H100_FP8_MATRIX_FACTOR (its unfused FP8 run) are set from; its fused FP8
run and the tutorial's JAX twin are checks neither was set from."""
import dataclasses

import pytest

from phaze.cost.gpu import gpu_gemm_latency_s
from phaze.hardware.presets import H100_80G
from phaze.workload.ops import Gemm
from phaze.workload.runtime import PAPER_RUNTIME

M, H, F = 15_872, 4096, 16_384
SHAPES = {"qkv": (H, 3 * H), "proj": (H, H), "up": (H, F), "down": (F, H)}  # (in, out) features
H200_NVL_MATRIX_EFFICIENCY = 0.746  # the H200 NVL's in-wave efficiency: reproduces the benchmark below
H200_NVL_FP8_MATRIX_FACTOR = 31.968 / 16.785  # its raw FP8 GEMMs against BF16, the same 12 GEMMs
H200_NVL = dataclasses.replace(H100_80G, name="h200-nvl", freq_hz=835.5e12 / (132 * 4 * 512 * 2),
                               hbm_bandwidth_Bps=4.8e12, op_overhead_s=0.0,
                               matrix_efficiency=H200_NVL_MATRIX_EFFICIENCY,
                               fp8_matrix_factor=H200_NVL_FP8_MATRIX_FACTOR)


def layer_gemms(e: int) -> list[Gemm]:
    out = []
    for name, (k, n) in SHAPES.items():
        out += [Gemm(name, 1, M, n, k, e), Gemm(f"{name}.dgrad", 1, M, k, n, e), Gemm(f"{name}.wgrad", 1, n, k, M, e)]
    return out


def layer_ms(e: int) -> float:
    arch = H200_NVL.as_arrays()
    return 1e3 * sum(float(gpu_gemm_latency_s(g, arch)[0]) for g in layer_gemms(e))


def test_bf16_layer_time_matches_the_published_h200_benchmark():
    assert sum(g.flops for g in layer_gemms(2)) == 3 * 2 * M * H * (3 * H + H + F + F)
    assert layer_ms(2) == pytest.approx(31.968, rel=0.01)


def test_fp8_layer_time_matches_the_published_h200_benchmark():
    assert layer_ms(1) == pytest.approx(16.785, rel=0.01)
    assert layer_ms(2) / layer_ms(1) == pytest.approx(31.968 / 16.785, rel=1e-9)


def test_fp8_autocast_layer_time_matches_the_published_h200_benchmark():
    """The same tutorial's autocast mode (its "Per-Layer GEMM Time" on the H200 NVL) times each GEMM shape as a
    te.Linear forward with its quantization: FP8 DelayedScaling 18.978 ms per layer, FP8 CurrentScaling
    20.285 ms. Each call casts its input and its weight to FP8 with the transpose (the weight requires grad, so
    TE keeps both layouts): our FP8 kernels (above) plus phaze.cost.gpu_framework's cast/transpose model
    (FP8_CAST_TRANSPOSE_BYTES per element at the achievable HBM bandwidth, one launch per cast) must give the
    delayed-scaling time; current scaling also reads each tensor once more (2 B per element) for its amax
    first. An independent check of the cast model, which was written from TE's kernels, not from this table."""
    from phaze.cost.gpu_framework import FP8_CAST_TRANSPOSE_BYTES, fp8_cast_s
    from phaze.workload.ops import LayerGraph
    # every shape is timed as a forward call (te.Linear), so each is named as a forward GEMM here
    gemms = [Gemm(f"call{i}", 1, g.m, g.n, g.k, 1) for i, g in enumerate(layer_gemms(1))]
    graph = LayerGraph("block", "fwd", tuple(gemms), ())  # each GEMM's input has no producer: a cast of its own
    hbm_Bps = H200_NVL.hbm_bandwidth_Bps * H200_NVL.memory_efficiency
    weights = sum(g.k * g.n for g in gemms)  # the B operand of each call, cast + transposed every call
    cast_s = fp8_cast_s(graph, hbm_Bps, H100_80G.op_overhead_s) \
        + (FP8_CAST_TRANSPOSE_BYTES * weights / hbm_Bps + len(gemms) * H100_80G.op_overhead_s)
    inputs = sum(g.m * g.k for g in gemms)
    assert fp8_cast_s(graph, hbm_Bps, 0.0) == pytest.approx(FP8_CAST_TRANSPOSE_BYTES * inputs / hbm_Bps)
    assert layer_ms(1) + 1e3 * cast_s == pytest.approx(18.978, rel=0.01)
    amax_s = 2.0 * (inputs + weights) / hbm_Bps
    assert layer_ms(1) + 1e3 * (cast_s + amax_s) == pytest.approx(20.285, rel=0.01)


def _te_getting_started_layer_ms(precision: str) -> float:
    """Our model of the tutorial's layer: hidden 4096, FFN 16384, 32 heads, sequence 2048 x batch 8, GELU,
    LayerNorm, biases, dropout 0.1, causal fused attention, one GPU; its gradients accumulate in the 16-bit
    .grad (plain autograd), hence grad_dtype bf16. Forward + backward of the block on the h100-80g preset."""
    from phaze.placement.layer_costs import compute_layer_costs, setting_for
    from phaze.workload.config import ModelConfig
    model = ModelConfig(name="te-getting-started", num_layers=1, hidden=4096, heads=32, ffn=16_384, vocab=50_304,
                        seq_len=2048)
    s = setting_for(model, 8, 1, False, "none", runtime=PAPER_RUNTIME.with_(attention="flash", precision=precision, grad_dtype="bf16"))
    c = compute_layer_costs(model, H100_80G, s, None, "sequential")
    return 1e3 * (c.block.fwd_s + c.block.bwd_s)


TE_TOKENS, TE_HIDDEN, TE_FFN = 8 * 2048, 4096, 16_384  # the tutorial's layer: sequence 2048 x batch 8


def _te_hbm_Bps() -> float:
    return H100_80G.hbm_bandwidth_Bps * H100_80G.memory_efficiency


def _te_unfused_norm_cast_ms() -> float:
    """The tutorial's unfused te.LayerNorm writes a 16-bit output, so the QKV and FC1 inputs are cast + transposed
    in full (4 B per element) where TE's LayerNormLinear writes FP8 from the norm (1 B)."""
    from phaze.cost.gpu_framework import FP8_CAST_TRANSPOSE_BYTES, FP8_FUSED_INPUT_BYTES
    return 1e3 * (FP8_CAST_TRANSPOSE_BYTES - FP8_FUSED_INPUT_BYTES) * TE_TOKENS * TE_HIDDEN * 2 / _te_hbm_Bps()


def _te_weight_recast_ms() -> float:
    """No is_first_microbatch is passed, so every step re-casts each FP8 weight with its transpose (4 B per
    weight, one kernel per linear layer)."""
    from phaze.cost.gpu_framework import FP8_CAST_TRANSPOSE_BYTES
    h, f = TE_HIDDEN, TE_FFN
    weights = h * 3 * h + h * h + 2 * h * f
    return 1e3 * (FP8_CAST_TRANSPOSE_BYTES * weights / _te_hbm_Bps() + 4 * H100_80G.op_overhead_s)


def _te_tutorial_fp8_extra_ms() -> float:
    """What the tutorial's unfused FP8 run does that Megatron-Core training (our FP8 model) does not, at the
    preset's achievable HBM bandwidth: the unfused norm's full input casts and the per-step weight re-casts."""
    return _te_unfused_norm_cast_ms() + _te_weight_recast_ms()


def test_h100_layer_time_matches_the_published_te_tutorial():
    """H100_MATRIX_EFFICIENCY (0.670) is the value at which this layer takes the tutorial's "TE Unfused + TE
    Attention" 35.709 ms (BF16; TE LayerNorm and Linear, TE DotProductAttention); H100_FP8_MATRIX_FACTOR (1.845)
    the value at which it takes the "TE Unfused + TE Attention + FP8" run's 23.406 ms, with the casts that
    benchmark runs and training does not (``_te_tutorial_fp8_extra_ms``, 0.41 ms). The H200 NVL's 0.746 would give
    32.4 ms in BF16: 9% fast; its FP8 ratio, 1.905x, would give 22.9 ms in FP8: 2% fast."""
    from phaze.hardware.presets import H100_FP8_MATRIX_FACTOR, H100_MATRIX_EFFICIENCY
    assert H100_80G.matrix_efficiency == H100_MATRIX_EFFICIENCY == 0.670
    assert H100_80G.fp8_matrix_factor == H100_FP8_MATRIX_FACTOR == 1.845
    assert _te_tutorial_fp8_extra_ms() == pytest.approx(0.413, rel=0.01)
    assert _te_getting_started_layer_ms("bf16") == pytest.approx(35.709, rel=0.005)
    assert _te_getting_started_layer_ms("fp8") + _te_tutorial_fp8_extra_ms() == pytest.approx(23.406, rel=0.005)


def test_h100_fp8_fused_layer_of_the_same_tutorial():
    """The tutorial's "TE Fused + TE Attention + FP8" run (22.964 ms, getting_started_pytorch.out at a97674070), not
    fitted: te.LayerNormLinear and te.LayerNormMLP write FP8 from the norm, as Megatron-Core's QKV and FC1 layers do
    (our FP8 model), and LayerNormMLP's GELU writes FC2's FP8 input too (1 B, where Megatron-Core's own activation
    leaves a 4 B cast); the weights are re-cast every step as in the unfused run. Ours: 23.01 ms, +0.2%."""
    from phaze.cost.gpu_framework import FP8_CAST_TRANSPOSE_BYTES, FP8_FUSED_INPUT_BYTES
    fused_gelu_ms = 1e3 * (FP8_CAST_TRANSPOSE_BYTES - FP8_FUSED_INPUT_BYTES) * TE_TOKENS * TE_FFN / _te_hbm_Bps()
    fused_ms = _te_getting_started_layer_ms("fp8") - fused_gelu_ms + _te_weight_recast_ms()
    assert fused_ms == pytest.approx(22.964, rel=0.01)


def test_h100_standard_attention_layer_of_the_same_tutorial():
    """The tutorial's "TE Unfused" run (49.342 ms; te.Linear / te.LayerNorm with the tutorial's own PyTorch attention:
    bmm, scale, softmax, dropout, bmm over the full, unmasked 2048 x 2048 scores) checks the standard-attention path
    on the H100, whose softmax and dropout run at the preset's achievable HBM bandwidth (no H100 figure of those
    kernels; A100's are measured, phaze.cost.gpu_framework). Not fitted. That code runs three things our
    Megatron-style graph fuses or does not have: the scaling as a pass of its own (``bmm1 / norm_factor``: read + write
    2 B per score, and again for its gradient), the context's ``permute(...).contiguous()`` copy (4 B per element, and
    again backward), and each residual's dropout and add as two kernels (5 + 6 B per element instead of our fused
    7 B, forward). Ours with those: 48.1 ms, -2.5%."""
    from phaze.hardware.presets import H100_80G as h100
    hbm_Bps = h100.hbm_bandwidth_Bps * h100.memory_efficiency
    batch, seq, h, heads = 8, 2048, 4096, 32
    scores, tokens_x_hidden = batch * heads * seq * seq, batch * seq * h
    extra_bytes = 2 * 4 * scores + 2 * 4 * tokens_x_hidden + 2 * (5 + 6 - 7) * tokens_x_hidden
    from phaze.placement.layer_costs import compute_layer_costs, setting_for
    from phaze.workload.config import ModelConfig
    model = ModelConfig(name="te-getting-started", num_layers=1, hidden=h, heads=heads, ffn=16_384, vocab=50_304,
                        seq_len=seq)
    s = setting_for(model, batch, 1, False, "none", runtime=PAPER_RUNTIME.with_(attention="standard", precision="bf16", grad_dtype="bf16"))
    c = compute_layer_costs(model, h100, s, None, "sequential")
    ours_ms = 1e3 * (c.block.fwd_s + c.block.bwd_s + extra_bytes / hbm_Bps)
    assert ours_ms == pytest.approx(49.342, rel=0.04) and ours_ms < 49.342


def test_h100_layer_matches_the_jax_run_of_the_same_tutorial():
    """The tutorial's JAX twin (docs/getting_started/getting_started_jax.py / .out, same commit: the same layer,
    hidden 4096, FFN 16384, 32 heads, sequence 2048 x batch 8, BF16, on the H100) is a second measurement the
    constants were not set from: "TE Unfused + TE Attention" 35.054 ms (ours 35.71, +1.9%), its FP8 run 22.638 ms
    (ours, with the same benchmark casts, 23.41: +3.4%). JAX runs both precisions 2-3% faster than PyTorch."""
    assert _te_getting_started_layer_ms("bf16") == pytest.approx(35.054, rel=0.025)
    fp8_ms = _te_getting_started_layer_ms("fp8") + _te_tutorial_fp8_extra_ms()
    assert fp8_ms == pytest.approx(22.638, rel=0.04) and fp8_ms > 22.638
