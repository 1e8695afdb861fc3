"""A layer graph's time on a GPU as Megatron-LM / NeMo run it: the sequential time model.

Every op runs as one kernel on the whole GPU, one after another on one CUDA stream, and TP collectives block
(Megatron-LM's NCCL calls in the tensor-parallel region), so a layer's time is the sum of its kernels:

  layer = sum(op kernels) + framework kernels (FP8 casts, deterministic fills) + exposed CP ring

- GEMMs: output tiles in waves over the SMs (``phaze.cost.gpu``);
- vector ops and collectives: the roofline of ``phaze.cost.op_latency_s`` on all cores of their kind, with
  Megatron's unfused loss kernels and the framework's measured kernel bandwidths where published
  (``phaze.cost.gpu_framework``);
- the kernels the framework adds: Transformer Engine's FP8 cast/transposes (``gpu_framework.fp8_cast_s``) and,
  in deterministic mode, PyTorch's fill of every allocation (``phaze.cost.gpu_determinism``) and, on an A100,
  FlashAttention-2's deterministic backward (``phaze.cost.gpu_attention_determinism``);
- context parallelism: the K/V ring beside the flash-attention GEMMs, in ``cp`` pipelined steps
  (``cp_ring_extra_s``);
- with ``tp_overlap``, each TP all-gather / reduce-scatter hides behind the GEMM next to it as the userbuffers
  configuration says (``tp_overlapped_s``, ``phaze.cost.overlap``).
Plus, once per microbatch and layer, the weight-gradient accumulation into the persistent gradient buffer
(``grad_accumulate_s``; fused into the wgrad GEMM, or without gradient-accumulation fusion a fresh gradient
written and added in). A designed chip is timed by its operator schedule instead (``phaze.schedule``).
"""
from __future__ import annotations

import numpy as np

from phaze.cost.gpu_determinism import ACTIVATION_OUTPUT_BYTES
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import NetworkTier
from phaze.workload.config import DEFAULT_TP_OVERLAP_CONFIG
from phaze.workload.ops import Collective, Gemm, LayerGraph, VectorOp, op_resource


def gpu_op_latencies_s(graph: LayerGraph, accelerator: Accelerator, tier: NetworkTier | None,
                       moe_net=None) -> list[float]:
    """Seconds of each op of ``graph`` as one kernel on the whole GPU (collectives on ``tier``; a collective
    over one device costs nothing; an MoE block's dispatch and combine on ``moe_net``, a ``MoeNetwork``)."""
    from phaze.cost import op_latency_s
    from phaze.cost.gpu import gpu_gemm_latency_s
    from phaze.cost.gpu_framework import kernel_bandwidth_fraction, megatron_vector_op

    arch = accelerator.as_arrays()
    lat = []
    for op in graph.ops:
        if isinstance(op, Collective) and op.group_size <= 1:
            lat.append(0.0)
            continue
        if isinstance(op, Collective) and op.group != "tp":
            lat.append(moe_net.latency_s(op) + accelerator.op_overhead_s)
            continue
        if isinstance(op, Gemm):  # output tiles in waves over the SMs (phaze.cost.gpu)
            lat.append(float(np.asarray(gpu_gemm_latency_s(op, arch)).reshape(-1)[0]))
            continue
        if isinstance(op, VectorOp):  # Megatron's unfused loss kernels (phaze.cost.gpu_framework)
            op = megatron_vector_op(op)
        kind = op_resource(op)
        cores = accelerator.num_tc if kind == "tc" else accelerator.num_vc if kind == "vc" else 1
        x = float(np.asarray(op_latency_s(op, arch, cores, tier)).reshape(-1)[0])
        frac = kernel_bandwidth_fraction(accelerator.name, op.kind) if isinstance(op, VectorOp) else None
        if frac is not None:  # the framework's kernel at its measured bandwidth (phaze.cost.gpu_framework)
            x = max(x, op.bytes_moved / (accelerator.hbm_bandwidth_Bps * frac) + accelerator.op_overhead_s)
        lat.append(x)
    return lat


def cp_ring_extra_s(graph: LayerGraph, lat: list[float], cp: int, cp_bytes: float, cp_tier: NetworkTier,
                    memory_Bps: float) -> float:
    """What context parallelism's K/V ring (``cp_bytes`` over ``cp_tier``, in ``cp`` steps) adds beyond the
    flash-attention GEMMs it runs beside: the attention runs slower beside NCCL's send/receive kernels
    (``nccl_interference``) and each step waits for the longer of its attention share and its transfer."""
    from phaze.cost import p2p_latency_s
    from phaze.cost.gpu import is_flash
    from phaze.cost.overlap import interfered_s, nccl_interference, pipelined_overlap_s

    attn = sum(x for op, x in zip(graph.ops, lat) if isinstance(op, Gemm) and is_flash(op))
    ring = (cp - 1) * p2p_latency_s(cp_bytes / (cp - 1), cp_tier)
    per_s = nccl_interference(cp_tier.effective_bandwidth_Bps, memory_Bps)
    return pipelined_overlap_s(interfered_s(attn, ring, per_s), ring, cp) - attn


def tp_overlapped_s(graph: LayerGraph, lat: list[float], accelerator: Accelerator, tp: int,
                    tp_overlap_config: str, memory_Bps: float) -> float:
    """Seconds of ``graph``'s ops (latencies ``lat``) with each TP all-gather / reduce-scatter hidden behind the
    GEMM it feeds or drains, as the userbuffers configuration ``tp_overlap_config`` runs it
    (``phaze.cost.overlap.tp_overlap_pair_s``); every other op as it is."""
    from phaze.cost.gpu import TENSOR_CORES_PER_SM
    from phaze.cost.overlap import overlap_pairs, tp_overlap_pair_s
    from phaze.cost.userbuffers import get_ub_config

    pairs = overlap_pairs(graph)
    hidden = {c for cs in pairs.values() for c in cs}
    total = sum(x for i, x in enumerate(lat) if i not in hidden and i not in pairs)
    sms = max(1, accelerator.num_tc // TENSOR_CORES_PER_SM)
    cfg = get_ub_config(tp_overlap_config)
    for g, cs in pairs.items():
        ops = [graph.ops[c] for c in cs]
        total += tp_overlap_pair_s(lat[g], sum(lat[c] for c in cs), [o.name for o in ops], cfg, tp, sms,
                                   ops[0].kind == "reduce_scatter", sum(o.bytes for o in ops), memory_Bps,
                                   accelerator.op_overhead_s)
    return float(total)


def gpu_layer_time_s(graph: LayerGraph, accelerator: Accelerator, tier: NetworkTier | None,
                     tp_overlap: bool = False, tp: int = 1, cp: int = 1, cp_bytes: float = 0.0,
                     cp_tier: NetworkTier | None = None, tp_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG,
                     deterministic: bool = False, moe_net=None) -> float:
    """Seconds of ``graph`` on one GPU of ``accelerator`` (module doc): its kernels one after another, the
    framework's extra kernels, the exposed part of the CP ring (``cp_bytes`` on ``cp_tier``), and with
    ``tp_overlap`` (tp > 1) the TP collectives overlapped as ``tp_overlap_config`` says; an MoE block's
    dispatch and combine on ``moe_net`` (``phaze.cost.moe.MoeNetwork``: hidden behind compute with its
    ``overlap``, ``phaze.cost.moe.a2a_exposed_s``)."""
    from phaze.cost.gpu_framework import fp8_cast_s

    memory_Bps = accelerator.hbm_bandwidth_Bps * accelerator.memory_efficiency  # achievable HBM bandwidth
    lat = gpu_op_latencies_s(graph, accelerator, tier, moe_net)
    if moe_net is not None and moe_net.overlap:
        from phaze.cost.moe import a2a_exposed_s
        lat = a2a_exposed_s(graph, lat)
    extra = fp8_cast_s(graph, memory_Bps, accelerator.op_overhead_s)  # TE's casts around the FP8 GEMMs
    if deterministic:  # PyTorch's fills; the deterministic attention backward
        from phaze.cost.gpu_determinism import deterministic_fill_s
        extra += deterministic_fill_s(graph, memory_Bps, accelerator.op_overhead_s)
        from phaze.cost.gpu import TENSOR_CORES_PER_SM
        from phaze.cost.gpu_attention_determinism import deterministic_attention_extra_s
        extra += deterministic_attention_extra_s(graph, lat, accelerator.name,
                                                 max(1, accelerator.num_tc // TENSOR_CORES_PER_SM), memory_Bps)
    if cp > 1 and cp_bytes > 0:
        extra += cp_ring_extra_s(graph, lat, cp, cp_bytes, cp_tier, memory_Bps)
    if not tp_overlap or tp <= 1:
        return float(sum(lat)) + extra
    return tp_overlapped_s(graph, lat, accelerator, tp, tp_overlap_config, memory_Bps) + extra


# Without gradient-accumulation fusion (Megatron-LM ``--no-gradient-accumulation-fusion``; Transformer Engine's
# ``fuse_wgrad_accumulation`` = ``config.gradient_accumulation_fusion``, megatron/core/extensions/
# transformer_engine.py at d98e8a6) the wgrad GEMM writes a fresh 16-bit weight gradient (``param.grad``, the
# weights' bf16 / fp16 format) and DDP's backward hook adds it into the gradient buffer
# (``param.main_grad.add_(param.grad.data)``, megatron/core/distributed/distributed_data_parallel.py): per
# parameter 2 B written by the GEMM and 2 B read back by the add, besides the buffer's read + write.
UNFUSED_WGRAD_BYTES_PER_PARAM = 4
# In deterministic mode that fresh 16-bit gradient is also filled when allocated (phaze.cost.gpu_determinism).
UNFUSED_WGRAD_FILL_BYTES_PER_PARAM = ACTIVATION_OUTPUT_BYTES


def grad_accumulate_s(grad_bytes: float, accelerator: Accelerator, *, params: float = 0.0, fused: bool = True,
                      deterministic: bool = False, tensors: int = 1) -> float:
    """Every microbatch's weight gradients are added into the persistent gradient buffer (Megatron-LM's
    fp32 ``main_grad``, fused into the wgrad GEMM epilogue as an fp32 C read + write with
    gradient-accumulation fusion; a bf16 buffer with ``grad_dtype`` "bf16", so half the bytes): a read and
    a write of the layer's gradient bytes at the achievable HBM bandwidth, not overlapped (a wave's
    epilogues all stream at once). Unfused (``fused`` False), each of the layer's ``params`` also costs
    ``UNFUSED_WGRAD_BYTES_PER_PARAM`` (plus the fill in ``deterministic`` mode) and each of its ``tensors``
    weight gradients an add kernel (and a fill kernel) launch."""
    if grad_bytes <= 0:
        return 0.0
    hbm_Bps = accelerator.hbm_bandwidth_Bps * accelerator.memory_efficiency
    fused_s = 2.0 * grad_bytes / hbm_Bps
    if fused:
        return fused_s
    per_param = UNFUSED_WGRAD_BYTES_PER_PARAM + (UNFUSED_WGRAD_FILL_BYTES_PER_PARAM if deterministic else 0)
    launches = max(1, tensors) * (2 if deterministic else 1)
    return fused_s + per_param * params / hbm_Bps + launches * accelerator.op_overhead_s
