"""What deterministic mode does to the flash-attention backward on a GPU (``deterministic``).

Which kernel runs: Megatron-LM's ``--deterministic-mode`` sets ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0``, and
Transformer Engine's backend choice then drops its cuDNN fused attention for training below compute capability
9.0 ("Disabling FusedAttention for determinism reasons", ``get_attention_backend`` in
``transformer_engine/pytorch/attention/dot_product_attention/utils.py``, github NVIDIA/TransformerEngine at
d0067d0; the same filter at b0d562d, 2025-09), so an A100 (sm80) runs FlashAttention-2 with
``deterministic=True`` (flash-attn >= 2.4.1; were it absent, TE would fall back to its unfused attention, whose
stored score matrices, 4.3 GB per layer at the 7B CI runs' shapes, their measured peaks rule out); an H100
(sm90) keeps cuDNN's attention with its deterministic backward option.

**FlashAttention-2's deterministic backward** (github Dao-AILab/flash-attention at 0251105a). The usual
backward parallelises each head over its key blocks ("seqk parallel"): a grid of
``ceil(seqlen_k / 128) x batch x heads`` CTAs, each adding its share of dQ with atomics
(``run_flash_bwd_seqk_parallel``, ``csrc/flash_attn/src/flash_bwd_launch_template.h``). Deterministic, the
grid shrinks to ``nsplits x batch x heads`` with ``nsplits = ceil(SMs / (batch x heads))`` (same function;
``mha_bwd`` in ``csrc/flash_attn/flash_api.cpp``), each CTA looping over every ``nsplits``-th key block
(``flash_bwd_kernel.h``: ``n_block += gridDim.x``) into its own fp32 slice of ``dq_accum``, which
``torch::zeros`` allocates and a final kernel sums. The head-dimension-128 kernel the A100 gets asks for 144 KB
of shared memory (``run_mha_bwd_hdim128``: ``max_smem_per_block >= 144 * 1024``) of the 164 KB an SM has,
so one CTA per SM: the work runs in ``ceil(CTAs / SMs)`` waves of equal CTAs instead of spreading evenly. At
the Megatron-LM CI 7B runs' shapes (32 heads x micro-batch 1 on 108 SMs: 4 splits, 128 CTAs, 2 waves) that
is 2 x 108 / 128 = 1.69x the time of an evenly spread grid, 1.68x the usual backward's (2048 CTAs in 19 waves). Charged here: the flash backward GEMM halves' time
(``attention_efficiency``, the non-deterministic rate) scaled by the ratio of the two grids' wave
quantisation, plus ``dq_accum``'s extra traffic (the zero fill of every split and the reads of the extra
splits, fp32) at the achievable HBM bandwidth. No constant is fitted: the factor is the launch code's grid
at the layer's shapes (``fa2_deterministic_factor``).

**cuDNN's deterministic backward on Hopper** is not charged: below cuDNN 9.25 it is a "dP-workspace
decomposition" (github NVIDIA/cudnn-frontend pull request #398: a workspace of ``b x h x s_q x s_kv x 2``
bytes), so dP is written out and read back; but Transformer Engine introduced that path as a "workspace
optimization" (TE pull request #396), taken in the default mode too whenever its workspace fits in 256 MB (a
limit on memory: its traffic per computed score is the same at any size), so it is read as no slower than the
default backward. (#398's "the (faster) dP-workspace path" compares it with #398's own ordered-dQ deterministic
engine, not with the default.) README "Validation" gives the bound were its traffic all exposed.
"""
from __future__ import annotations

from phaze.cost.common import ceil_div
from phaze.workload.ops import Gemm, LayerGraph

# GPUs whose Transformer Engine attention falls back to FlashAttention-2's deterministic backward (compute
# capability < 9.0; module doc), by accelerator-name prefix.
FA2_DETERMINISTIC_GPUS = ("a100",)
# FlashAttention-2's backward key-block size (kBlockN of the head-dim-128 sm80 kernel traits, module doc) and
# CTAs per SM (144 KB of shared memory per CTA).
FA2_BWD_BLOCK_N = 128
FA2_BWD_CTAS_PER_SM = 1
# dq_accum is fp32.
DQ_ACCUM_BYTES = 4
# The GEMM halves of the flash backward kernel (phaze.workload.graphs names): S recomputed inside it, dP, dV, dQ, dK.
# Not ``recompute.flash_pv``: under full recompute that is the forward kernel run again, which is deterministic.
FLASH_BACKWARD_HALVES = ("recompute.flash_scores", "flash_pv.dprobs", "flash_pv.dv", "flash_scores.dq",
                         "flash_scores.dk")


def _wave_factor(ctas: int, sms: int) -> float:
    """Time of ``ctas`` equal CTAs in whole waves over ``sms`` SMs, over the time if they spread evenly."""
    slots = sms * FA2_BWD_CTAS_PER_SM
    return int(ceil_div(ctas, slots)) * slots / ctas


def fa2_deterministic_factor(batch_heads: int, seq_k: int, sms: int) -> tuple[float, int]:
    """(deterministic / non-deterministic backward time, nsplits) of FlashAttention-2 for ``batch_heads``
    (batch x query heads) heads of ``seq_k`` keys on ``sms`` SMs (module doc)."""
    nsplits = int(ceil_div(sms, batch_heads))
    seqk_parallel = _wave_factor(int(ceil_div(seq_k, FA2_BWD_BLOCK_N)) * batch_heads, sms)
    return _wave_factor(nsplits * batch_heads, sms) / seqk_parallel, nsplits


def _flash_backward(graph: LayerGraph, lat: list[float]) -> tuple[Gemm | None, float]:
    """The backward's dQ half of the flash kernel (its shapes) and the seconds of all its GEMM halves."""
    dq, total = None, 0.0
    for op, x in zip(graph.ops, lat):
        if isinstance(op, Gemm) and op.name.endswith(FLASH_BACKWARD_HALVES):
            total += x
            if op.name.endswith("flash_scores.dq"):
                dq = op
    return dq, total


def deterministic_attention_extra_s(graph: LayerGraph, lat: list[float], accelerator_name: str, sms: int,
                                    memory_Bps: float) -> float:
    """Seconds deterministic mode adds to ``graph``'s flash-attention backward (op latencies ``lat``) on a GPU
    named ``accelerator_name`` with ``sms`` SMs (module doc); 0 where the backward is not FlashAttention-2's."""
    if not accelerator_name.lower().startswith(FA2_DETERMINISTIC_GPUS):
        return 0.0
    dq, attention_s = _flash_backward(graph, lat)
    if dq is None:
        return 0.0
    # flash_scores.dq is dS (b*a x s x keys) times K (keys x d): m = queries, k = keys, n = head dim
    factor, nsplits = fa2_deterministic_factor(dq.batch, dq.m, sms)
    dq_elements = dq.batch * dq.m * dq.n
    accum_bytes = DQ_ACCUM_BYTES * dq_elements * (2 * nsplits - 1)  # zero every split, read the extra ones
    return attention_s * (factor - 1.0) + accum_bytes / memory_Bps
