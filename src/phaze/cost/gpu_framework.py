"""Kernels the GPU training framework runs beyond (or less fused than) the layer graph's ops.

The layer graph (``phaze.workload.graphs``) prices each op as one ideally fused kernel. On a GPU the
published runs use Megatron-LM / NeMo with Transformer Engine, which differ in two places that matter:

**FP8 casts and transposes** (Transformer Engine 1.x, ``transformer_engine/pytorch/module/linear.py`` and
``base.py:grad_output_preprocess``, github NVIDIA/TransformerEngine at fb74961, Sep 2024). Only the GEMMs of
the linear layers run in FP8 (``Linear``, ``LayerNormLinear``, ``LayerNormMLP``; attention, norms, the
loss and the LM head stay in 16 bit: TE's "Using FP8 with Transformer Engine" guide). Hopper's FP8 GEMMs
take only the TN layout, so every FP8 operand is needed both as is and transposed:

- forward, the GEMM input: ``fp8_cast_transpose_fused`` reads the 16-bit input (2 B) and writes the FP8
  copy and its transpose (1 + 1 B): ``FP8_CAST_TRANSPOSE_BYTES`` = 4 B per element. Where the producer is
  the norm of a ``LayerNormLinear`` (Megatron-Core's TE layer spec builds the QKV and FC1 projections as
  ``TELayerNormColumnParallelLinear``: ``megatron/core/models/gpt/gpt_layer_specs.py`` at 54f1f78), the
  norm kernel writes FP8 itself, so the cast costs no pass of its own and the norm writes 1 B less; the
  transpose for the weight gradient still reads and writes the FP8 copy: 2 - 1 = ``FP8_FUSED_INPUT_BYTES``
  = 1 B per element. The attention projection and FC2 (``TERowParallelLinear``) read the attention output
  and the MLP activation, which Megatron-Core computes outside TE (``megatron/core/transformer/mlp.py``):
  4 B.
- backward, the incoming gradient dY of every FP8 GEMM: ``grad_output_preprocess`` casts it and transposes
  it (``fp8_cast_transpose_fused``): 4 B per element.
- the FP8 weights and their transposes are kept across microbatches (``is_first_microbatch`` caching;
  NeMo's ``fp8_params``) and rewritten by the optimizer step, which ``weight_bytes`` already counts.

Each cast is one memory-bound kernel at the achievable HBM bandwidth plus the kernel launch. The amax
reductions and scale updates of delayed scaling (a few small kernels and one all-reduce of a few KB per
step) are not modelled.

**Megatron's vocab-parallel cross-entropy** (``megatron/core/tensor_parallel/cross_entropy.py``,
``_VocabParallelCrossEntropy``, github NVIDIA/Megatron-LM at 703cc88, Aug 2024; the 2021 code runs the same
ops: ``megatron/mpu/cross_entropy.py`` on ``output.float()`` from ``megatron/model/gpt_model.py``): unfused PyTorch ops over the fp32 logits of the device's vocabulary shard, per logit

- forward: ``.float()`` (read 2, write 4) and ``max`` (read 4): 10 B -- our ``cross_entropy_max``;
  subtract the max in place (4 + 4), ``exp`` in place (4 + 4), ``sum`` (4), divide by the sum in place to
  keep the softmax for the backward (4 + 4): 28 B -- our ``cross_entropy``;
- backward: subtract the one-hot (a gather, negligible), multiply by the loss gradient in place (4 + 4) and
  the autograd cast of the fp32 gradient back to 16 bit for the LM-head GEMMs (read 4, write 2): 14 B --
  our ``cross_entropy_bwd``.

``vector_kinds`` prices these as one fused pass each (2, 6 and 6 B); with a 128k-256k vocabulary the
difference is 1-3% of a step. Applied to the sequential (GPU) time model only: a designed chip runs its own
fused loss.

**Megatron-LM's LayerNorm kernels on A100** (the published A100 runs: Megatron-LM 2021-22 and
Megatron-DeepSpeed, ``MixedFusedLayerNorm``, the kernels of apex's ``FusedLayerNorm``: ``cuApplyLayerNorm``
forward; ``cuComputeGradInput`` plus ``cuComputePartGradGammaBeta`` / ``cuComputeGradGammaBeta`` backward,
the latter re-reading dY and X for the weight gradients). These run well below the STREAM-like fraction
of ``memory_efficiency``: NVIDIA measured them on a GA100 (A100 40 GB, 1555 GB/s) at 895.8 GB/s forward and
572.2 GB/s backward for B=32, S=512, h=1024 fp16 (github NVIDIA/apex pull request #1037, "fast layer norm",
Jan 2021: "[APEX FWD] Time: 0.0751ms Throughput: 895.7822 GB/sec", "[APEX BWD] Time: 0.1762ms Throughput:
572.1678 GB/sec"; the throughputs count 4 and 6 B per element, our ``layernorm`` / ``layernorm_bwd`` bytes).
We charge our bytes at those fractions of the peak, 0.576 and 0.368 (the kernels' own traffic pattern, so
the fraction carries over to the 80 GB part). The H100 runs use Transformer Engine's norm kernels (the
"NEW" kernels of that pull request: 81% / 75% of the peak there, within 10-17% of ``memory_efficiency``);
no published H100 figure, so H100 keeps ``memory_efficiency``.

**Megatron-LM's standard-attention kernels on A100** (the score path of the A100 runs: Megatron's fused
scale-mask softmax and PyTorch's dropout on the b x a x s x s scores, between the two batched GEMMs). Dao et
al. measured Megatron's attention on an A100 40 GB (1555 GB/s), fp16, batch 16, 8 heads of dimension 64
(FlashAttention, arXiv 2205.14135, Appendix E.6, "Megatron" rows at sequence 2048; no masking): 4.28 ms
forward and 8.86 ms backward without dropout (Table 18 / 19), 6.56 and 10.80 ms with dropout 0.1 (Table
15 / 16). Our tile/wave model gives that shape's batched GEMMs 1.636 ms forward (scores, context) and 3.273
ms backward (four GEMMs) on that part, so the rest is the kernels': the softmax moves our 4 B per score in
4.28 - 1.636 ms (less one launch): 0.523 of the peak; its backward 6 B in 8.86 - 3.273 ms: 0.371; the
dropout 5 B per score in 6.56 - 4.28 ms: 0.758; its backward 5 B in 10.80 - 8.86 ms: 0.891. These
fractions carry over to the 80 GB part (the kernels' own access pattern), as the LayerNorm ones do. The
causal softmax of the GPT runs (``scaled_upper_triang_masked_softmax``) is charged like the unmasked one
measured. H100 has no such figure (its runs use flash attention): its score path runs at the preset's
achievable HBM bandwidth, which Transformer Engine's getting-started "TE Unfused" layer on one H100 (PyTorch's
own softmax and dropout over the full scores) checks to -2.5% (tests/cost/test_gpu_published.py).
"""
from __future__ import annotations

from dataclasses import replace

from phaze.workload.ops import Collective, Gemm, LayerGraph, VectorOp

# Transformer Engine fp8_cast_transpose_fused: read the 16-bit tensor, write FP8 + FP8 transpose (module doc).
FP8_CAST_TRANSPOSE_BYTES = 4.0
# Input produced by a TE-fused norm / activation that writes FP8 itself: transpose (1 + 1) - the byte the
# producer no longer writes (module doc).
FP8_FUSED_INPUT_BYTES = 1.0
# Producers TE fuses the FP8 cast into: the norm of TELayerNormColumnParallelLinear (QKV, FC1).
FP8_FUSED_PRODUCERS = frozenset({"layernorm", "rmsnorm"})

# Megatron-LM's unfused vocab-parallel cross-entropy, bytes per logit of each of our loss ops (module doc).
MEGATRON_CROSS_ENTROPY_BYTES = {"cross_entropy_max": 10.0, "cross_entropy": 28.0, "cross_entropy_bwd": 14.0}


# apex FusedLayerNorm (Megatron-LM's MixedFusedLayerNorm) on GA100, fraction of the 1555 GB/s peak (module doc)
APEX_LAYERNORM_FWD_FRACTION = 895.8 / 1555.0
APEX_LAYERNORM_BWD_FRACTION = 572.2 / 1555.0
# Megatron's attention score path on GA100, fraction of the 1555 GB/s peak (module doc; FlashAttention
# Tables 15, 16, 18, 19, through our GEMM model: tests/cost/test_gpu_framework.py re-derives them).
MEGATRON_SOFTMAX_FWD_FRACTION = 0.523
MEGATRON_SOFTMAX_BWD_FRACTION = 0.371
TORCH_DROPOUT_FWD_FRACTION = 0.758
TORCH_DROPOUT_BWD_FRACTION = 0.891
# {GPU name prefix: {vector-op kind: measured fraction of the HBM peak of the framework's kernel}}
KERNEL_BANDWIDTH_FRACTIONS = {"a100": {"layernorm": APEX_LAYERNORM_FWD_FRACTION,
                                       "layernorm_bwd": APEX_LAYERNORM_BWD_FRACTION,
                                       "softmax": MEGATRON_SOFTMAX_FWD_FRACTION,
                                       "softmax_bwd": MEGATRON_SOFTMAX_BWD_FRACTION,
                                       "dropout": TORCH_DROPOUT_FWD_FRACTION,
                                       "dropout_bwd": TORCH_DROPOUT_BWD_FRACTION}}


def kernel_bandwidth_fraction(accelerator_name: str, kind: str) -> float | None:
    """The measured fraction of the HBM peak at which the framework's kernel for vector-op ``kind`` runs
    on this GPU (``KERNEL_BANDWIDTH_FRACTIONS``, by the chip name's prefix), or None: the chip's
    ``memory_efficiency`` applies."""
    name = accelerator_name.lower()
    for prefix, kinds in KERNEL_BANDWIDTH_FRACTIONS.items():
        if name.startswith(prefix):
            return kinds.get(kind)
    return None


def megatron_vector_op(op: VectorOp) -> VectorOp:
    """``op`` re-priced at Megatron-LM's unfused traffic where the framework runs it unfused (the
    vocab-parallel cross-entropy); every other op unchanged."""
    per = MEGATRON_CROSS_ENTROPY_BYTES.get(op.kind)
    if per is None:
        return op
    return replace(op, bytes_moved=int(round(per * op.elements)))


def _producer(graph: LayerGraph, i: int, preds: list[list[int]]):
    """The op that produced GEMM ``i``'s activation input, looking through TP collectives (an all-gather
    moves the FP8 tensor TE cast before it)."""
    seen = list(preds[i])
    while seen:
        j = seen.pop(0)
        op = graph.ops[j]
        if isinstance(op, Collective):
            seen.extend(preds[j])
            continue
        return op
    return None


def fp8_cast_bytes(graph: LayerGraph) -> tuple[float, int]:
    """(HBM bytes, kernels) of Transformer Engine's FP8 casts and transposes in ``graph`` (module doc): for
    each forward FP8 GEMM (incl. recomputed ones) its input, for each FP8 data-gradient GEMM its incoming
    gradient. 0 when the graph has no FP8 GEMM."""
    ops = graph.ops
    if not any(isinstance(op, Gemm) and op.bytes_per_element == 1 for op in ops):
        return 0.0, 0
    preds: list[list[int]] = [[] for _ in ops]
    for a, b in graph.edges:
        preds[b].append(a)
    total, kernels = 0.0, 0
    for i, op in enumerate(ops):
        if not isinstance(op, Gemm) or op.bytes_per_element != 1 or op.name.endswith(".wgrad"):
            continue
        elements = op.batch * op.m * op.k  # the activation operand: M tokens x K (in- or out-features)
        if op.name.endswith(".dgrad"):
            total += FP8_CAST_TRANSPOSE_BYTES * elements  # dY: cast + transpose
            kernels += 1
            continue
        src = _producer(graph, i, preds)
        if isinstance(src, VectorOp) and src.kind in FP8_FUSED_PRODUCERS:
            total += FP8_FUSED_INPUT_BYTES * elements  # the transpose of the FP8 copy the producer wrote
        else:
            total += FP8_CAST_TRANSPOSE_BYTES * elements
        kernels += 1
    return total, kernels


def fp8_cast_s(graph: LayerGraph, hbm_Bps: float, op_overhead_s: float) -> float:
    """Seconds of the FP8 cast/transpose kernels of ``graph`` at ``hbm_Bps`` (achievable HBM bandwidth),
    one launch each."""
    nbytes, kernels = fp8_cast_bytes(graph)
    return nbytes / hbm_Bps + kernels * op_overhead_s if kernels else 0.0
