"""The host (CPU) time of an MoE block under Megatron-Core on GPUs, and the block time it bounds.

Megatron-Core runs PyTorch eagerly: the host issues every kernel of a layer one after another, and an MoE layer
issues many (router, permute, dispatcher bookkeeping, the expert GEMMs and their casts one expert at a time,
unpermute), so a small or fine-grained MoE layer is *host-bound*: its GPU kernels finish faster than the CPU can
launch them. The Megatron-Core MoE report names this the "compute wall" ("small per-expert GEMMs underutilize
Tensor Cores; many kernel launches: host-boundedness", NVIDIA, "Scalable Training of Mixture-of-Experts Models
with Megatron Core", arXiv 2603.07685, 2026, sec. 1), and NVIDIA's own perf recipes turn full-iteration CUDA
graphs on for the small MoE models on GB200/GB300/B200 (Megatron-Bridge
scripts/performance/configs/{qwen3,gpt_oss}/workload_base_configs.py @0fa501a: Qwen3-30B-A3B and GPT-OSS-120B
``cuda_graph_impl="local"``, ``cuda_graph_scope="full_iteration"``), but not in the H100 recipes of the dev set.

The host cannot run ahead of the GPU by more than one MoE layer: the dropless dispatcher reads the tokens per
expert back to the host every layer (Transformer Engine's GroupedLinear takes the per-expert row counts as a
host list, ``m_splits``), a device-to-host synchronisation that drains the stream. So each MoE block takes the
longer of its GPU time and its host time (``host_bound_block_s``), per microbatch, forward + backward.

The host time of a block (``moe_block_host_s``):
- ``MOE_BLOCK_HOST_S``: the block's fixed host time (its attention and MoE modules, the dispatcher, the autograd
  of both directions), one fitted parameter (below);
- plus ``HOST_OPS_PER_LOCAL_EXPERT`` host tensor operations per local expert at ``HOST_TENSOR_OP_S`` each:
  Transformer Engine's GroupedLinear splits its input per expert and allocates each expert's cast outputs
  (``torch.split`` and 2 x num_gemms ``torch.empty`` in ``fused_multi_cast_transpose``, TE maintainers in
  NVIDIA/TransformerEngine issue #1499), and calls one GEMM per expert (``nvte_multi_stream_cublas_gemm``).
"""
from __future__ import annotations

# Host seconds to create one PyTorch tensor (allocation, metadata) in Transformer Engine's extensions on an H100
# node: "It takes a ~5 us on CPU to create each PyTorch tensor" (TE maintainer, NVIDIA/TransformerEngine PR #865,
# 2024-05, profiling te.Linear's CPU time).
HOST_TENSOR_OP_S = 5e-6
# Host tensor operations per local expert in one MoE block, forward + backward: two GroupedLinears (fc1, fc2);
# per expert and GEMM a split view of the input and two cast-output allocations (issue #1499) plus the GEMM call:
# 4 in the forward, and in the backward 4 for the data gradient (split, two allocations, GEMM) and 2 for the
# weight gradient (its GEMM and the output view); 2 x (4 + 4 + 2) = 20. A count from the module's structure.
HOST_OPS_PER_LOCAL_EXPERT = 20
# The block's fixed host time per microbatch, forward + backward (s). The one fitted parameter of this
# mechanism, fitted on the MoE dev set only (phaze/validation/data/moe_runs.json): the three runs whose GPU
# time per MoE block is below it are host-bound (Qwen3-235B-A22B 9.7 ms of GPU time per block, Qwen3-30B-A3B
# 4.1 ms, GPT-OSS-120B 8.9 ms); DeepSeek-V3's 19.7 ms and Mixtral's 19.3 ms are not, and do not move. With the
# per-expert term their errors cross zero at 12.3 ms (Qwen3-235B, 4 local experts), 13.2 ms (Qwen3-30B, 16) and
# 12.8 ms (GPT-OSS, 16); 12.7 ms minimises the largest of the three (+2.9% / -3.1% / -0.4%; docs/validation.md,
# "MoE"). That the three, of different widths (2,048 to 4,096), precisions and expert counts, agree within
# +-0.5 ms is the check that one host time per block describes them. It stands for Megatron-Core (NeMo
# 25.09-25.11) on a DGX-H100 host (Xeon 8480C) without CUDA graphs; a faster host, CUDA graphs or fused MoE
# kernels lower it.
MOE_BLOCK_HOST_S = 12.7e-3


def moe_block_host_s(local_experts: int) -> float:
    """Host seconds to issue one MoE block's kernels for one microbatch, forward + backward (module doc)."""
    return MOE_BLOCK_HOST_S + HOST_OPS_PER_LOCAL_EXPERT * HOST_TENSOR_OP_S * max(1, local_experts)


def host_bound_block_s(fwd_s: float, bwd_s: float, host_s: float) -> tuple[float, float, float]:
    """(forward s, backward s, host-bound stall s) of a block whose GPU kernels take ``fwd_s`` + ``bwd_s`` and
    whose host takes ``host_s`` to issue them: the longer of the two, the stall shared between the directions
    in proportion to their GPU time (each direction's host work is about its share of the kernels)."""
    gpu_s = fwd_s + bwd_s
    if host_s <= gpu_s or gpu_s <= 0:
        return fwd_s, bwd_s, 0.0
    scale = host_s / gpu_s
    return fwd_s * scale, bwd_s * scale, host_s - gpu_s
