"""The framework's extra GPU kernels: Transformer Engine's FP8 casts/transposes and Megatron's unfused
vocab-parallel cross-entropy (phaze.cost.gpu_framework), hand-counted on a small GPT block."""
import pytest

from phaze.cost.gpu_framework import (FP8_CAST_TRANSPOSE_BYTES, FP8_FUSED_INPUT_BYTES, fp8_cast_bytes, fp8_cast_s,
                                      megatron_vector_op)
from phaze.hardware.presets import H100_80G
from phaze.placement.layer_costs import setting_for
from phaze.workload.config import ModelConfig
from phaze.workload.graphs import layer_graph
from phaze.workload.vector_kinds import vector_op
from phaze.workload.runtime import PAPER_RUNTIME

GPT = ModelConfig("tiny-gpt", num_layers=2, hidden=256, heads=4, ffn=1024, vocab=1000, seq_len=128)
LLAMA = ModelConfig("tiny-llama", num_layers=2, hidden=256, heads=4, kv_heads=2, ffn=512, vocab=1000, seq_len=128,
                    norm="rmsnorm", mlp="swiglu", position="rotary", bias=False, dropout=False,
                    tied_embeddings=False)


def _setting(model, precision, tp=1, recompute="none"):
    return setting_for(model, 2, tp, tp > 1, recompute, runtime=PAPER_RUNTIME.with_(attention="flash", precision=precision))


def test_no_fp8_gemm_no_cast():
    for d in ("fwd", "bwd"):
        assert fp8_cast_bytes(layer_graph(GPT, _setting(GPT, "bf16"), "block", d)) == (0.0, 0)
        # the head's LM-head GEMM stays 16-bit in FP8 training
        assert fp8_cast_bytes(layer_graph(GPT, _setting(GPT, "fp8"), "head", d)) == (0.0, 0)


@pytest.mark.parametrize("model", [GPT, LLAMA])
def test_forward_casts_hand_counted(model):
    """qkv reads norm1's output, fc1 norm2's: TE's LayerNormLinear writes FP8 from the norm, so only the
    transpose remains (1 B net per element); out_proj and fc2 read the attention output and the activation
    (16-bit, computed outside TE): a full cast + transpose (4 B)."""
    b, s, h = 2, 128, 256
    a_d = model.heads * model.head_dim
    nbytes, kernels = fp8_cast_bytes(layer_graph(model, _setting(model, "fp8"), "block", "fwd"))
    want = FP8_FUSED_INPUT_BYTES * b * s * (h + h) + FP8_CAST_TRANSPOSE_BYTES * b * s * (a_d + model.ffn)
    assert kernels == 4 and nbytes == pytest.approx(want)


@pytest.mark.parametrize("model", [GPT, LLAMA])
def test_backward_casts_are_the_incoming_gradients(model):
    """Every FP8 data-gradient GEMM casts and transposes its incoming gradient dY (4 B per element): the
    outputs of qkv, out_proj, fc1 (gate + up for SwiGLU) and fc2."""
    b, s, h = 2, 128, 256
    qkv_out = (model.heads + 2 * model.num_kv_heads) * model.head_dim
    fc1_out = model.ffn * (2 if model.gated_mlp else 1)
    nbytes, kernels = fp8_cast_bytes(layer_graph(model, _setting(model, "fp8"), "block", "bwd"))
    assert kernels == 4
    assert nbytes == pytest.approx(FP8_CAST_TRANSPOSE_BYTES * b * s * (qkv_out + h + fc1_out + h))


def test_full_recompute_casts_the_recomputed_inputs_again():
    fwd, _ = fp8_cast_bytes(layer_graph(GPT, _setting(GPT, "fp8"), "block", "fwd"))
    bwd, _ = fp8_cast_bytes(layer_graph(GPT, _setting(GPT, "fp8"), "block", "bwd"))
    bwd_full, k = fp8_cast_bytes(layer_graph(GPT, _setting(GPT, "fp8", recompute="full"), "block", "bwd"))
    assert k == 8 and bwd_full == pytest.approx(bwd + fwd)


def test_tensor_parallel_shards_the_casts():
    """With t = 2 and SP the column-parallel inputs are the gathered full tensors, the row-parallel ones and
    all outputs the 1/t shards."""
    b, s, h, t = 2, 128, 256, 2
    nbytes, _ = fp8_cast_bytes(layer_graph(GPT, _setting(GPT, "fp8", tp=t), "block", "fwd"))
    want = FP8_FUSED_INPUT_BYTES * b * s * (h + h) + FP8_CAST_TRANSPOSE_BYTES * b * s * (h + GPT.ffn) // t
    assert nbytes == pytest.approx(want)


def test_cast_seconds_are_bytes_over_bandwidth_plus_launches():
    g = layer_graph(GPT, _setting(GPT, "fp8"), "block", "bwd")
    nbytes, kernels = fp8_cast_bytes(g)
    assert fp8_cast_s(g, 3e12, 3e-6) == pytest.approx(nbytes / 3e12 + kernels * 3e-6)
    assert fp8_cast_s(layer_graph(GPT, _setting(GPT, "bf16"), "block", "bwd"), 3e12, 3e-6) == 0.0


def test_fp8_block_time_includes_the_casts(monkeypatch):
    """The sequential GPU model adds exactly the cast kernels to an FP8 block's time."""
    import phaze.cost.gpu_framework as fw
    from phaze.cost.gpu_layer import gpu_layer_time_s
    bw = H100_80G.hbm_bandwidth_Bps * H100_80G.memory_efficiency
    for d in ("fwd", "bwd"):
        g = layer_graph(GPT, _setting(GPT, "fp8"), "block", d)
        with_casts = gpu_layer_time_s(g, H100_80G, None)
        casts = fp8_cast_s(g, bw, H100_80G.op_overhead_s)
        monkeypatch.setattr(fw, "fp8_cast_s", lambda *a: 0.0)
        assert casts > 0 and with_casts == pytest.approx(gpu_layer_time_s(g, H100_80G, None) + casts, rel=1e-12)
        monkeypatch.undo()


def test_megatron_cross_entropy_traffic():
    """Megatron's unfused loss: 10 + 28 B per logit forward, 14 B backward (fp32 copy, in-place passes)."""
    n = 1000
    assert megatron_vector_op(vector_op("ce_max", "cross_entropy_max", n)).bytes_moved == 10 * n
    assert megatron_vector_op(vector_op("cross_entropy", "cross_entropy", n)).bytes_moved == 28 * n
    assert megatron_vector_op(vector_op("cross_entropy.bwd", "cross_entropy_bwd", n)).bytes_moved == 14 * n
    ln = vector_op("norm1", "layernorm", n)
    assert megatron_vector_op(ln) is ln


def test_gpu_head_time_uses_megatron_loss_traffic():
    """The GPU model times the forward loss kernels at Megatron's 10 + 28 B per logit (not the fused 2 + 6)
    at the achievable HBM bandwidth (memory-bound), one launch each."""
    from phaze.cost.gpu_layer import gpu_layer_time_s
    from phaze.workload.ops import LayerGraph
    s = _setting(GPT, "bf16")
    g = layer_graph(GPT, s, "head", "fwd")
    logits = 2 * 128 * GPT.padded_vocab(1)
    loss = sum(gpu_layer_time_s(LayerGraph(g.layer, g.direction, (op,), ()), H100_80G, None)
                for op in g.ops if getattr(op, "kind", "").startswith("cross_entropy") and op.kind != "cross_entropy_loss")
    bw = H100_80G.hbm_bandwidth_Bps * H100_80G.memory_efficiency
    want = 2 * H100_80G.op_overhead_s + (10 + 28) * logits / bw
    assert loss == pytest.approx(want, rel=1e-9)


def test_a100_layernorm_kernels_at_apex_measured_bandwidth():
    """On A100 Megatron's LayerNorm kernels (apex FusedLayerNorm) run at the throughput NVIDIA measured on
    GA100 (895.8 GB/s forward, 572.2 GB/s backward of 1555 GB/s, apex PR #1037): our 4 / 6 B per element at
    those fractions of the 80 GB part's 2039 GB/s, one launch each. H100 (Transformer Engine's norms) and
    every other vector op keep the chip's memory_efficiency."""
    from phaze.cost.gpu_framework import kernel_bandwidth_fraction
    from phaze.hardware.presets import A100_80G
    from phaze.cost.gpu_layer import gpu_layer_time_s
    from phaze.workload.ops import LayerGraph

    n = 2 * 128 * 256  # b x s x h of GPT's norm1
    assert kernel_bandwidth_fraction("a100-80g", "layernorm") == pytest.approx(0.57607, abs=1e-5)
    assert kernel_bandwidth_fraction("a100-80g", "layernorm_bwd") == pytest.approx(0.36797, abs=1e-5)
    assert kernel_bandwidth_fraction("h100-80g", "layernorm") is None
    assert kernel_bandwidth_fraction("a100-80g", "gelu") is None

    def t(chip, d, name):
        g = layer_graph(GPT, _setting(GPT, "bf16"), "block", d)
        op = next(o for o in g.ops if o.name == name)
        return gpu_layer_time_s(LayerGraph(g.layer, g.direction, (op,), ()), chip, None)

    peak = 2.039e12
    assert t(A100_80G, "fwd", "norm1") == pytest.approx(4 * n / (peak * 895.8 / 1555) + 3e-6, rel=1e-9)
    assert t(A100_80G, "bwd", "norm1.bwd") == pytest.approx(6 * n / (peak * 572.2 / 1555) + 3e-6, rel=1e-9)
    h100 = H100_80G.hbm_bandwidth_Bps * H100_80G.memory_efficiency
    assert t(H100_80G, "fwd", "norm1") == pytest.approx(4 * n / h100 + 3e-6, rel=1e-9)
    # the residual add beside it is unchanged on A100 (7 B per element with dropout, at 0.90 of the peak)
    assert t(A100_80G, "fwd", "attn_residual") == pytest.approx(7 * n / (peak * 0.9) + 3e-6, rel=1e-9)


def test_a100_attention_kernels_reproduce_the_flashattention_benchmark():
    """Megatron's attention core on an A100 40 GB (1555 GB/s), fp16, batch 16, 8 heads of 64, sequence 2048,
    no masking, as Dao et al. measured it (FlashAttention, arXiv 2205.14135, Appendix E.6, "Megatron" rows):
    4.28 / 8.86 ms forward / backward without dropout (Tables 18, 19), 6.56 / 10.80 ms with dropout 0.1
    (Tables 15, 16). Our score path (batched GEMMs, softmax, dropout: the ops of our own layer graph, timed by
    the GPU model) must give those four times on that part, with the kernel fractions the module states."""
    from dataclasses import replace

    from phaze.hardware.presets import A100_80G
    from phaze.cost.gpu_layer import gpu_layer_time_s
    from phaze.validation.cases import megatron_gpt
    from phaze.workload.ops import LayerGraph

    model = megatron_gpt("flashattention-bench", 1, 512, 8, 2048, 2048, 51200)  # h = 8 heads x 64
    a100_40g = replace(A100_80G, hbm_bandwidth_Bps=1.555e12)
    setting = setting_for(model, 16, 1, False, "none")

    def core_ms(direction, names):
        g = layer_graph(model, setting, "block", direction)
        ops = tuple(o for o in g.ops if o.name in names)
        assert len(ops) == len(names)
        return gpu_layer_time_s(LayerGraph(g.layer, g.direction, ops, ()), a100_40g, None) * 1e3

    fwd = {"attn_scores", "softmax", "attn_v"}
    bwd = {"attn_v.dprobs", "attn_v.dv", "softmax.bwd", "attn_scores.dq", "attn_scores.dk"}
    assert core_ms("fwd", fwd) == pytest.approx(4.28, abs=0.01)
    assert core_ms("bwd", bwd) == pytest.approx(8.86, abs=0.01)
    assert core_ms("fwd", fwd | {"attn_dropout"}) == pytest.approx(6.56, abs=0.01)
    assert core_ms("bwd", bwd | {"attn_dropout.bwd"}) == pytest.approx(10.80, abs=0.01)
