"""What deterministic mode adds to a GPU layer: PyTorch fills every fresh allocation (``deterministic``).

Megatron-LM's ``--deterministic-mode`` ends in ``torch.use_deterministic_algorithms(True)``
(``megatron/training/determinism.py``, ``apply_determinism_to_args``, github NVIDIA/Megatron-LM at d98e8a6).
With that flag set, PyTorch's ``torch.utils.deterministic.fill_uninitialized_memory`` (default True) makes
every ``empty`` allocation write a known value before it is returned: "Floating point and complex values are
set to NaN, and integer values are set to the maximum value ... Filling uninitialized memory is detrimental
to performance" (PyTorch docs, ``torch.use_deterministic_algorithms``). The fill is in the allocation
itself (ATen's ``empty`` factories call ``fill_empty_deterministic_``, one ``fill_`` kernel), so it reaches
the outputs Transformer Engine's and Megatron's kernels allocate from C++ as well as from Python.

Charged here: one write-only pass over each tensor a layer allocates per microbatch, at the achievable HBM
bandwidth, plus one kernel launch per allocation. Which tensors (``fill_bytes``):

- a GEMM's output (16 bit, also behind FP8 inputs), except the weight gradient, which Megatron's default
  gradient-accumulation fusion adds into the gradient buffer in place, and the score / probability halves
  of a fused attention kernel, which stay on chip; of the attention kernel, the output O (forward) and
  dQ, dK, dV (backward) are allocated (at the graph's shapes: dK and dV over the query heads and the
  causal-average key count, so a few MB off either way);
- a vector op's 16-bit output, plus the one-byte mask of a dropout;
- Megatron's vocab-parallel cross-entropy: the fp32 copy of the logits (``cross_entropy_max``: ``.float()``)
  and the 16-bit gradient for the LM-head GEMMs (``cross_entropy_bwd``); the subtract / exp / divide run
  in place (``cross_entropy``), the per-token loss is negligible;
- an all-gather's output and a reduce-scatter's (1 / group of the buffer); an all-reduce runs in place.

The deterministic attention backward kernels (``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0``; Megatron-LM's
determinism notes name attention backward among the hotspots of a mode that costs "roughly 15% of step time",
``docs/developer/determinism/op-catalog.md``) are ``phaze.cost.gpu_attention_determinism``'s. Not charged: the
small per-token outputs (softmax statistics, the loss). GPU (sequential) time model only.
"""
from __future__ import annotations

from phaze.workload.ops import Collective, Gemm, LayerGraph, VectorOp

# Bytes per element of a GEMM's or vector op's output: 16-bit activations (FP8 GEMMs write 16 bit too).
ACTIVATION_OUTPUT_BYTES = 2
# The dropout mask PyTorch's native dropout allocates beside its output: one bool per element.
DROPOUT_MASK_BYTES = 1
# Fused-attention GEMM halves whose result stays on chip (phaze.workload.graphs FLASH_OPS names): the scores
# and, in the backward, the recomputed scores and dP.
_ON_CHIP_FLASH_SUFFIXES = ("flash_scores", "flash_pv.dprobs")
# Per-logit bytes the vocab-parallel cross-entropy allocates, by vector-op kind (module doc).
CROSS_ENTROPY_FILL_BYTES = {"cross_entropy_max": 4, "cross_entropy": 0, "cross_entropy_bwd": 2,
                            "cross_entropy_loss": 0}


def _gemm_fill_bytes(op: Gemm) -> int:
    if op.name.endswith(".wgrad") or op.name.endswith(_ON_CHIP_FLASH_SUFFIXES):
        return 0
    return op.batch * op.m * op.n * max(ACTIVATION_OUTPUT_BYTES, op.bytes_per_element)


def _vector_fill_bytes(op: VectorOp) -> int:
    per = CROSS_ENTROPY_FILL_BYTES.get(op.kind)
    if per is not None:
        return per * op.elements
    mask = DROPOUT_MASK_BYTES if op.kind.startswith("dropout") and not op.kind.endswith("_bwd") else 0
    return (ACTIVATION_OUTPUT_BYTES + mask) * op.elements


def _collective_fill_bytes(op: Collective) -> int:
    if op.group_size <= 1:
        return 0
    if op.kind == "all_gather":
        return op.bytes
    if op.kind == "reduce_scatter":
        return op.bytes // op.group_size
    return 0


def fill_bytes(graph: LayerGraph) -> tuple[int, int]:
    """(bytes, allocations) deterministic mode fills in one pass of ``graph`` (module doc)."""
    total, allocations = 0, 0
    for op in graph.ops:
        if isinstance(op, Gemm):
            b = _gemm_fill_bytes(op)
        elif isinstance(op, VectorOp):
            b = _vector_fill_bytes(op)
        else:
            b = _collective_fill_bytes(op)
        if b > 0:
            total += b
            allocations += 1
    return total, allocations


def deterministic_fill_s(graph: LayerGraph, hbm_Bps: float, op_overhead_s: float) -> float:
    """Seconds of the fills: ``fill_bytes`` at ``hbm_Bps`` (achievable HBM bandwidth), one launch each."""
    nbytes, allocations = fill_bytes(graph)
    return nbytes / hbm_Bps + allocations * op_overhead_s
