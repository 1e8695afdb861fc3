"""Time, memory and synchronisation of one pipeline stage: the formulas shared by ``evaluate`` and the DP.

Everything here takes a stage as counts (has_embedding e, number of blocks nb, has_head h); ``nb`` may be
a numpy array so the DP gets a whole row of stage sizes in one call with exactly the formulas
``evaluate`` uses.

Per microbatch, stage i costs T_i = fwd + bwd (incl. recompute) + its sends (the activation to the next
stage, the gradient to the previous one, each a point-to-point transfer on the tier the two neighbouring
stages share). Memory = weights + grads + optimizer state + in-flight microbatches x stashed activations +
the transient recompute buffer of one layer, the static part sharded over the d data-parallel replicas by
the plan's ZeRO stage (``ZERO_STAGES``). After the last backward each stage synchronises its gradients over
its d replicas (ring all-reduce, or reduce-scatter + all-gather of the weights with ZeRO-1; optionally
overlapped with the last microbatch's backward) and runs the optimizer step, a memory-bound pass over its
parameters. ZeRO-2 and -3 move the gradient reduce-scatter (and ZeRO-3 the weight all-gathers) into every
microbatch (``microbatch_comm_s``).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from phaze.hardware.cluster import Cluster, NetworkTier
from phaze.placement.layer_costs import LayerCosts


@dataclass(frozen=True)
class StageSums:
    fwd_s: object
    bwd_s: object
    params: object
    weight_bytes: object
    grad_bytes: object
    optimizer_bytes: object
    activation_bytes: object
    working_bytes: object
    zero1_optimizer_bytes: object = None  # what ZeRO-1 divides over the d x cp ranks (None: optimizer_bytes)
    moe_a2a_s: object = 0.0  # of fwd_s + bwd_s: MoE dispatch/combine (exposed) and routing imbalance
    moe_imbalance_s: object = 0.0
    moe_host_s: object = 0.0  # of fwd_s + bwd_s: the host-bound stall of MoE blocks (phaze.cost.moe_host)
    largest_layer_weight_bytes: object = 0.0  # ZeRO-3 gathers one layer at a time

    def optimizer_shard_bytes(self, dp: int, zero: int):
        """Optimizer state on one device: all of it, or with ZeRO >= 1 its 1/d shard (an MoE block's experts
        sharded over their expert-data-parallel group: ``LayerCost.zero1_scale``)."""
        if not zero:
            return self.optimizer_bytes
        z = self.optimizer_bytes if self.zero1_optimizer_bytes is None else self.zero1_optimizer_bytes
        return z / dp

    def grad_shard_bytes(self, dp: int, zero: int):
        """Gradient bytes on one device: all of them, or with ZeRO >= 2 their 1/d shard plus the one bucket
        being reduce-scattered (``grad_bucket_bytes``)."""
        if zero < 2 or dp <= 1:
            return self.grad_bytes
        return self.grad_bytes / dp + grad_bucket_bytes(self.grad_bytes, self.params, dp)

    def weight_shard_bytes(self, dp: int, zero: int):
        """Weight bytes on one device: all of them, or with ZeRO-3 their 1/d shard plus two gathered layers
        (the one computing and the one prefetched: FSDP's default forward/backward prefetch of one unit,
        PyTorch FSDP docs, ``BackwardPrefetch.BACKWARD_PRE``; Megatron-FSDP's ``fsdp_double_buffer``)."""
        if zero < 3 or dp <= 1:
            return self.weight_bytes
        return self.weight_bytes / dp + 2.0 * np.minimum(self.largest_layer_weight_bytes, self.weight_bytes)


# ZeRO stages (Rajbhandari et al., SC 2020, sec. 5): 0 plain data parallelism; 1 optimizer state sharded over the
# d ranks (Megatron's distributed optimizer); 2 also the gradients, reduce-scattered after every microbatch's
# backward (nothing keeps the full gradient between microbatches; DeepSpeed stage 2 and Megatron-FSDP
# ``optim_grads`` reduce each micro-step); 3 also the weights, all-gathered before each microbatch's forward and
# again before its backward (FSDP / Megatron-FSDP ``optim_grads_params``, resharding after forward).
ZERO_STAGES = (0, 1, 2, 3)


def grad_bucket_bytes(grad_bytes, params, dp: int):
    """The unsharded gradient bytes of one reduce-scatter bucket that ZeRO-2/3 hold while it is reduced:
    ``DDP_BUCKET_PARAMS`` (Megatron's bucket size, at least 1M x d parameters) at the stage's gradient bytes
    per parameter, at most the stage's gradients."""
    bucket = max(DDP_BUCKET_PARAMS, DDP_BUCKET_PARAMS_PER_DP_RANK * dp)
    if isinstance(grad_bytes, (int, float)) and isinstance(params, (int, float)):  # scalars: no numpy
        per = float(grad_bytes) / float(params) if params > 0 else 0.0
        return float(min(float(grad_bytes), bucket * per))
    params = np.asarray(params, dtype=float)
    per = np.divide(grad_bytes, params, out=np.zeros_like(params), where=params > 0)
    out = np.minimum(grad_bytes, bucket * per)
    return float(out) if np.ndim(out) == 0 else out


def stage_sums(c: LayerCosts, e, nb, h) -> StageSums:
    """Sums over the layers of a range with e embeddings, nb blocks, h heads (scalars or arrays)."""
    E, B, H = c.embedding, c.block, c.head
    nbp = np.asarray(nb) > 0
    return StageSums(
        largest_layer_weight_bytes=np.maximum(np.maximum(e * E.weight_bytes, np.where(nbp, B.weight_bytes, 0.0)),
                                              h * H.weight_bytes),
        fwd_s=e * E.fwd_s + nb * B.fwd_s + h * H.fwd_s,
        bwd_s=e * E.bwd_s + nb * B.bwd_s + h * H.bwd_s,
        params=e * E.params + nb * B.params + h * H.params,
        weight_bytes=e * E.weight_bytes + nb * B.weight_bytes + h * H.weight_bytes,
        grad_bytes=e * E.grad_bytes + nb * B.grad_bytes + h * H.grad_bytes,
        optimizer_bytes=e * E.optimizer_bytes + nb * B.optimizer_bytes + h * H.optimizer_bytes,
        activation_bytes=e * E.activation_bytes + nb * B.activation_bytes + h * H.activation_bytes,
        working_bytes=np.maximum(np.maximum(e * E.working_bytes, np.where(nbp, B.working_bytes, 0.0)),
                                 h * H.working_bytes),
        moe_a2a_s=e * E.moe_a2a_s + nb * B.moe_a2a_s + h * H.moe_a2a_s,
        moe_imbalance_s=e * E.moe_imbalance_s + nb * B.moe_imbalance_s + h * H.moe_imbalance_s,
        moe_host_s=e * E.moe_host_s + nb * B.moe_host_s + h * H.moe_host_s,
        zero1_optimizer_bytes=(None if B.zero1_scale == 1.0 else
                               e * E.zero1_optimizer_bytes + nb * B.zero1_optimizer_bytes + h * H.zero1_optimizer_bytes),
    )


def boundary_out_bytes(c: LayerCosts, nb, h):
    """Activation the range sends forward: from its last layer (head never sends)."""
    return np.where(np.asarray(nb) > 0, c.block.boundary_fwd_bytes, c.embedding.boundary_fwd_bytes) * (1 - h)


def boundary_in_bytes(c: LayerCosts, e, nb):
    """Gradient the range sends backward: from its first layer (embedding never sends)."""
    return np.where(np.asarray(nb) > 0, c.block.boundary_bwd_bytes, c.head.boundary_bwd_bytes) * (1 - e)


def tied_static_bytes(c: LayerCosts, zero: int = 0, dp: int = 1) -> float:
    """Static bytes of the head's tied copy of the embedding (not stored twice on one device): its weights,
    gradients and optimizer state, each sharded over the d ranks as the plan's ZeRO stage shards the stage's
    (state from ZeRO-1, gradients from 2, weights at 3)."""
    H = c.head
    if not H.tied_params or not H.params:
        return 0.0
    w, g, o = (1.0 / dp if zero >= k else 1.0 for k in (3, 2, 1))
    return H.tied_params * (H.weight_bytes * w + H.grad_bytes * g + H.optimizer_bytes * o) / H.params


def tied_grad_bytes(c: LayerCosts) -> float:
    H = c.head
    if not H.tied_params or not H.params:
        return 0.0
    return H.tied_params * H.grad_bytes / H.params


@dataclass(frozen=True)
class Topology:
    """Where the groups of a (t, d, p) plan live on the cluster (device numbering: tp, dp, pp)."""

    tp: int
    dp: int
    pp: int
    tp_tier: NetworkTier
    dp_tier: NetworkTier
    pp_tier: NetworkTier  # neighbouring pipeline stages
    tied_tier: NetworkTier  # first and last pipeline stage (tied embedding gradient)

    @classmethod
    def of(cls, cluster: Cluster, tp: int, dp: int, pp: int) -> "Topology":
        return cls(tp, dp, pp, cluster.tier_for_group(tp, 1, "tp"), cluster.ring_tier(dp, tp, "dp"),
                   cluster.tier_for_group(2, tp * dp, "pp"),
                   cluster.tier_for_group(2, max(pp - 1, 1) * tp * dp, "dp"))


def _vec(f, x):
    """Apply a scalar cost function elementwise (cost functions take Python scalars), once per distinct
    value (a row of stage sizes often has only a few distinct boundary sizes)."""
    if isinstance(x, (int, float)) or np.ndim(x) == 0:
        return float(f(float(x)))
    arr = np.asarray(x, dtype=float)
    distinct, where = np.unique(arr, return_inverse=True)
    vals = np.array([float(f(float(v))) for v in distinct])
    return vals[where.reshape(-1)].reshape(arr.shape)


def p2p_s(nbytes, tier: NetworkTier):
    from phaze.cost import p2p_latency_s
    return _vec(lambda b: p2p_latency_s(b, tier), nbytes)


def scatter_gather(c: LayerCosts) -> int:
    """t when a stage boundary tensor is replicated over the t tensor-parallel ranks (t > 1, no sequence
    parallelism), else 1. Megatron then sends 1/t of it from each rank, each over its own link, and the
    receiving ranks all-gather it on the TP tier (the scatter/gather optimization, Narayanan et al. 2021,
    sec. 4.1, on by default in Megatron-LM); with SP the boundary is already a 1/t shard."""
    s = c.setting
    if s is None or s.tp <= 1 or s.sequence_parallel:
        return 1
    return int(s.tp)


def send_s(c: LayerCosts, nbytes, pp_tier: NetworkTier, tp_tier: NetworkTier):
    """One pipeline send of a boundary of ``nbytes`` (per TP rank), with the scatter/gather optimization."""
    g = scatter_gather(c)
    if g == 1:
        return p2p_s(nbytes, pp_tier)
    from phaze.cost import all_gather_latency_s
    nb = np.asarray(nbytes, dtype=float)
    return p2p_s(nb / g, pp_tier) + _vec(lambda b: all_gather_latency_s(b, g, tp_tier), nb)


def param_gather_s(weight_bytes, topo: Topology, zero: int):
    """The all-gather of the updated weights over the d replicas after the optimizer step with ZeRO-1 or -2
    (0 without ZeRO, with ZeRO-3, which gathers them before every use instead, or d = 1)."""
    from phaze.cost import all_gather_latency_s
    d, tier = topo.dp, topo.dp_tier
    if d <= 1 or zero not in (1, 2):
        return np.zeros(np.shape(weight_bytes)) if np.ndim(weight_bytes) else 0.0
    return _vec(lambda b: all_gather_latency_s(b, d, tier), weight_bytes)


def dp_sync_s(grad_bytes, weight_bytes, topo: Topology, zero: int):
    """The data-parallel synchronisation at the end of a step over the d replicas of a stage (0 when d = 1),
    on the DP group's ring tier (``Cluster.ring_tier``): a ring all-reduce of the gradients; with ZeRO-1 their
    reduce-scatter plus the all-gather of the updated weights (``param_gather_s``); with ZeRO-2 only that
    all-gather (the gradients were reduce-scattered microbatch by microbatch: ``microbatch_comm_s``); with
    ZeRO-3 nothing."""
    from phaze.cost import allreduce_latency_s, reduce_scatter_latency_s
    d, tier = topo.dp, topo.dp_tier
    if d <= 1 or zero >= 3:
        return np.zeros(np.shape(grad_bytes)) if np.ndim(grad_bytes) else 0.0
    if zero == 2:
        return param_gather_s(weight_bytes, topo, zero)
    if zero:
        return _vec(lambda b: reduce_scatter_latency_s(b, d, tier), grad_bytes) + param_gather_s(weight_bytes, topo, zero)
    return _vec(lambda b: allreduce_latency_s(b, d, tier), grad_bytes)


def microbatch_comm_s(grad_bytes, weight_bytes, topo: Topology, zero: int):
    """(forward, backward) data-parallel transfers of every microbatch with ZeRO-2/3 (zeros below, or d = 1):
    ZeRO-2 reduce-scatters the microbatch's gradients after its backward; ZeRO-3 also all-gathers the weights
    before its forward and again before its backward (resharded after forward)."""
    from phaze.cost import all_gather_latency_s, reduce_scatter_latency_s
    d, tier = topo.dp, topo.dp_tier
    zero_ = np.zeros(np.shape(grad_bytes)) if np.ndim(grad_bytes) else 0.0
    if d <= 1 or zero < 2:
        return zero_, zero_
    rs = _vec(lambda b: reduce_scatter_latency_s(b, d, tier), grad_bytes)
    if zero == 2:
        return zero_, rs
    ag = _vec(lambda b: all_gather_latency_s(b, d, tier), weight_bytes)
    return ag, ag + rs


def exposed_microbatch_comm_s(c: LayerCosts, s: StageSums, topo: Topology, zero: int, overlap: bool,
                              hbm_Bps: float):
    """The part of ``microbatch_comm_s`` a microbatch waits for, added to its stage time T: all of it without
    overlap; overlapped (prefetch / bucketed reduce, as the step-end sync is: ``exposed_sync_s``) at least one
    bucket of each, and what the forward or backward compute cannot cover, plus the compute the transfers
    take (``sync_interference``)."""
    fwd_c, bwd_c = microbatch_comm_s(s.grad_bytes, s.weight_bytes, topo, zero)
    if zero < 2 or topo.dp <= 1:
        return fwd_c
    return exposed_sync_s(fwd_c + bwd_c, s.bwd_s, overlap, s.params, topo.dp, fwd_c, s.fwd_s,
                          sync_interference(c, topo, hbm_Bps))


_SYNC_ROWS: dict = {}


def dp_sync_row(c: LayerCosts, e: int, h: int, s: StageSums, L: int, topo: Topology, zero: int):
    """``dp_sync_s`` of a stage with e embeddings, nb = 0..L blocks and h heads (``s``), memoized: it
    depends only on the stage's gradient and weight bytes and the DP group, not on p, the recompute mode or
    the layer times, so the partition solves of many combinations share it."""
    E, B, H = c.embedding, c.block, c.head
    key = (e, h, L, E.grad_bytes, B.grad_bytes, H.grad_bytes, E.weight_bytes, B.weight_bytes, H.weight_bytes,
           topo.dp, topo.dp_tier, zero)
    row = _SYNC_ROWS.get(key)
    if row is None:
        if len(_SYNC_ROWS) > 4096:
            _SYNC_ROWS.clear()
        row = _SYNC_ROWS[key] = np.asarray(dp_sync_s(s.grad_bytes, s.weight_bytes, topo, zero), float)
        row.setflags(write=False)
    return row


def tied_sync_s(c: LayerCosts, topo: Topology) -> float:
    """All-reduce of the tied embedding gradient between the first and last stage (p > 1)."""
    from phaze.cost import allreduce_latency_s
    g = tied_grad_bytes(c)
    if topo.pp <= 1 or g <= 0:
        return 0.0
    return float(allreduce_latency_s(g, 2, topo.tied_tier))


def optimizer_traffic_bytes(grad_bytes, optimizer_bytes, weight_bytes, params):
    """HBM bytes of one mixed-precision optimizer step (Megatron-LM's Float16 optimizer with apex fused
    multi-tensor kernels), per parameter for Adam (fp16 weight w=2, fp32 main grad g=4, fp32 master + m + v
    o=12): zero the main grads (write g) + unscale and inf/nan check (read and write g) + grad-norm for
    clipping (read g) + Adam (read g and o, write o) + copy the fp32 master into the fp16 weight (read 4,
    write w) = 4 + 8 + 4 + 28 + 6 = 50 B. Without optimizer state (SGD) the update reads the weight. With a
    smaller Adam state (``phaze.workload.memory.ADAM_STATE_BYTES``) the update reads and writes that state, and
    the copy into the weight keeps its 4-byte read: exact for the fp32 remainders (the 2-byte remainder and the
    bf16 weight), 2 B per parameter too much for the bf16 states (they read the 2-byte weight or copy)."""
    master = np.where(np.asarray(optimizer_bytes) > 0, 4.0 * np.asarray(params, dtype=float), weight_bytes)
    return 5.0 * grad_bytes + 2.0 * optimizer_bytes + weight_bytes + master


# Vector-lane operations per parameter of one optimizer step (the passes ``optimizer_traffic_bytes`` counts,
# a multiply and an add counted as two, as ``phaze.workload.vector_kinds`` does): zeroing the main grads 0;
# unscale 1 + inf/nan check 1; grad-norm square + accumulate 2 + the clip's scale 1; AdamW (Loshchilov & Hutter,
# ICLR 2019, Algorithm 2): m = b1 m + (1 - b1) g 3, v = b2 v + (1 - b2) g^2 4, bias corrections 2, sqrt 4
# (a transcendental, as vector_kinds prices rsqrt) + eps 1, divide 1, weight decay 2, the lr step 2 -> 19; the
# copy into the 16-bit weight 1. Adam 2 + 3 + 19 + 1 = 25; SGD (no state) 2 + 3 + the lr step 2 = 7.
OPTIMIZER_LANE_OPS_PER_PARAM = {"adam": 25, "sgd": 7}


def optimizer_lane_ops(optimizer_bytes, params):
    """Vector-lane operations of one optimizer step over ``params`` parameters (Adam where they keep
    optimizer state, else SGD: ``OPTIMIZER_LANE_OPS_PER_PARAM``)."""
    per = np.where(np.asarray(optimizer_bytes) > 0, OPTIMIZER_LANE_OPS_PER_PARAM["adam"],
                   OPTIMIZER_LANE_OPS_PER_PARAM["sgd"])
    return per * np.asarray(params, dtype=float)


def optimizer_step_s(s: StageSums, dp: int, zero: int, hbm_Bps: float, lane_ops_per_s: float = np.inf):
    """Optimizer step over the stage's parameters (/d with ZeRO >= 1): the slower of its HBM traffic
    (``optimizer_traffic_bytes``) at the achievable HBM bandwidth and its lane operations
    (``optimizer_lane_ops``) on the chip's vector lanes (``DeviceSpec.lane_ops_per_s``; the step runs alone,
    so it has all of both). A GPU's lanes outrun its HBM ~100x on this step; a designed chip with few lanes
    does not (the TPUv4-like chip's 256 lanes are 2x slower than its HBM here)."""
    traffic = optimizer_traffic_bytes(s.grad_bytes, s.optimizer_bytes, s.weight_bytes, s.params)
    lanes_s = optimizer_lane_ops(s.optimizer_bytes, s.params) / lane_ops_per_s
    out = np.maximum(traffic / hbm_Bps, lanes_s) / (dp if zero else 1)
    if zero and s.zero1_optimizer_bytes is not None:  # the experts' shard is larger (their group is smaller)
        out = out * np.divide(s.zero1_optimizer_bytes, s.optimizer_bytes,
                              out=np.ones_like(np.asarray(s.optimizer_bytes, float)),
                              where=np.asarray(s.optimizer_bytes) > 0)
    return float(out) if np.ndim(out) == 0 else out


def stage_memory(s: StageSums, in_flight, dp: int, zero: int, tied_bytes=0.0, activation_peak_bytes=None):
    """Peak bytes on one device of the stage: its weights, gradients and optimizer state as the ZeRO stage
    shards them over the d ranks, minus the tied copy ``tied_bytes``, plus ``in_flight`` x its activations, or
    ``activation_peak_bytes`` when given (the interleaved schedule's chunk-by-chunk peak)."""
    static = s.weight_shard_bytes(dp, zero) + s.grad_shard_bytes(dp, zero) + s.optimizer_shard_bytes(dp, zero)
    act = in_flight * s.activation_bytes if activation_peak_bytes is None else activation_peak_bytes
    return static - tied_bytes + act + s.working_bytes


# Megatron-LM's gradient buckets: DistributedDataParallelConfig.bucket_size defaults to
# max(40,000,000, 1,000,000 x data-parallel size) parameters (megatron/core/distributed/
# distributed_data_parallel_config.py).
DDP_BUCKET_PARAMS = 40_000_000
DDP_BUCKET_PARAMS_PER_DP_RANK = 1_000_000


def sync_interference(c: LayerCosts, topo: Topology, hbm_Bps: float) -> float:
    """Seconds of compute lost per second of overlapped gradient sync on a chip of achievable HBM bandwidth
    ``hbm_Bps``: the memory bandwidth its bytes take on the DP tier (``phaze.cost.overlap.
    transfer_interference``), and on a GPU (the sequential time model) also the SMs NCCL's kernels hold
    (``nccl_interference``); a designed chip's DMA engines hold no compute."""
    from phaze.cost.overlap import nccl_interference, transfer_interference
    if topo.dp <= 1:
        return 0.0
    link = topo.dp_tier.effective_bandwidth_Bps
    if c.time_model == "sequential":
        return nccl_interference(link, hbm_Bps)
    return transfer_interference(link, hbm_Bps)


def exposed_sync_s(sync_s, bwd_s, overlap: bool, params=0, dp: int = 1, gather_s=0.0, fwd_s=0.0,
                   interference: float = 0.0):
    """Part of the gradient synchronisation ``sync_s`` left exposed. Overlapped, the gradient reduce runs
    bucket by bucket as the last microbatch's backward produces them, so at least the last bucket (the
    stage's first layers, whose gradients come last) is exposed: max(reduce x bucket share, reduce - bwd).
    ``gather_s`` (ZeRO-1's all-gather of the updated weights, part of ``sync_s``) is then overlapped with
    the next step's first forward, bucket by bucket as Megatron-Core's ``overlap_param_gather`` does (it
    requires the distributed optimizer and ``overlap_grad_reduce``; NeMo's distributed optimizer sets both;
    "exposes only one DP communication chunk", NeMo / Megatron-Bridge docs, "Communication Overlap"):
    + max(gather x bucket share, gather - fwd). ``params``: the stage's parameters per device (0: no bucket
    floor). The compute the sync runs beside loses ``interference`` s per second of it (``sync_interference``).
    Scalars or numpy arrays."""
    if not overlap:
        return sync_s
    bucket = max(DDP_BUCKET_PARAMS, DDP_BUCKET_PARAMS_PER_DP_RANK * dp)
    if all(isinstance(x, (int, float)) or np.ndim(x) == 0
           for x in (sync_s, bwd_s, params, gather_s, fwd_s)):  # the scalar path, no numpy
        share = min(1.0, bucket / params) if params > 0 else 0.0
        g = float(gather_s)
        r = float(sync_s) - g
        out = max(0.0, share * r, r - float(bwd_s))
        if g > 0:
            out += max(0.0, share * g, g - float(fwd_s))
        return out + interference * (float(sync_s) - out)
    p = np.asarray(params, dtype=float)
    share = np.where(p > 0, np.minimum(1.0, bucket / np.maximum(p, 1.0)), 0.0)
    g = np.asarray(gather_s, dtype=float)
    r = np.asarray(sync_s, dtype=float) - g
    out = np.maximum(0.0, np.maximum(share * r, r - bwd_s)) + np.maximum(0.0, np.maximum(share * g, g - fwd_s))
    out = out + interference * (np.asarray(sync_s, dtype=float) - out)
    return float(out) if np.ndim(out) == 0 else out


def interleaved_warmup_forwards(stage: int, pp: int, m: int, v: int) -> int:
    """Forwards (of model chunks) stage ``stage`` runs before its first backward in Megatron's interleaved
    schedule: (p - i - 1) * 2 + (v - 1) * p, all m * v of them when that many or more (Megatron-Core r0.10 and
    later, megatron/core/pipeline_parallel/schedules.py ``get_pp_rank_microbatches``, microbatch groups of p).
    r0.8-r0.9 also ran every forward first on every stage when m == p; not modelled (no validation run has
    m == p with interleaving; the Megatron-LM CI runs of held-out set 3, r0.10+ code, do)."""
    return min((pp - stage - 1) * 2 + (v - 1) * pp, m * v)


def in_flight_microbatches(stage: int, pp: int, m: int, v: int) -> float:
    """Microbatches whose activations stage ``stage`` stashes at its peak.
    1F1B: min(p - i, m). Interleaved (Megatron): the warmup forwards (``interleaved_warmup_forwards``) + 1
    virtual-stage forwards in flight, capped by m*v, each holding 1/v of the device's layers when its chunks
    are alike; for stage 0 that is p * (1 + (p-1)/(p*v)) microbatches (Korthikanti et al. 2022, sec. 4.2.3).
    Chunks that differ (the embedding's, the head's) are stashed per chunk:
    ``interleaved_peak_activation_bytes``."""
    if v <= 1:
        return float(min(pp - stage, m))
    return min(interleaved_warmup_forwards(stage, pp, m, v) + 1, m * v) / v


def interleaved_peak_activation_bytes(stage: int, pp: int, m: int, chunk_bytes) -> float:
    """Peak stashed activation bytes of stage ``stage`` under Megatron's interleaved schedule, chunk by chunk
    (``chunk_bytes[j]``: one microbatch's activations of the stage's model chunk j, v = len(chunk_bytes)).

    The schedule runs the stage's m * v chunk forwards in groups of p microbatches per chunk, chunk 0 to v-1
    (forward k is chunk (k mod p*v) // p), and its backwards in the same groups from chunk v-1 down; after
    the warmup forwards it alternates one forward, one backward. A forward stashes its chunk's activations,
    the backward of that chunk and microbatch frees them. So the last stage's last chunk (the LM head's
    logits) holds one microbatch while its first chunks hold p each, and the peak is the largest running
    sum after a forward. For alike chunks it equals ``in_flight_microbatches`` x the stage's activations.
    Memoized: memory depends on the model and setting only, so a co-search asks for the same stages on every
    chip (8% of its plan searches' time before)."""
    return _interleaved_peak(stage, pp, m, tuple(float(x) for x in chunk_bytes))


@functools.lru_cache(maxsize=1 << 16)
def _interleaved_peak(stage: int, pp: int, m: int, chunk_bytes: tuple[float, ...]) -> float:
    a = np.asarray(chunk_bytes, dtype=float)
    v = len(a)
    n = m * v
    w = interleaved_warmup_forwards(stage, pp, m, v)
    chunk = (np.arange(n) % (pp * v)) // pp
    fwd = np.concatenate(([0.0], np.cumsum(a[chunk])))  # stashed by the first k forwards
    bwd = np.concatenate(([0.0], np.cumsum(a[v - 1 - chunk])))  # freed by the first k backwards
    steady = fwd[w + 1:] - bwd[:n - w]  # after the forward of each 1F1B step, before its backward
    return float(max(fwd[w], steady.max())) if steady.size else float(fwd[w])


def bottleneck_weight(m: int, v: int = 1) -> float:
    """How many times the slowest stage's T counts beyond sum T / v: m - 1/v (see ``iteration_s``)."""
    return m - 1.0 / v


def iteration_s(sum_T, max_T, max_R, m: int, v: int = 1):
    """THE iteration-time formula every placement solver and ``evaluate`` use:
    sum_i T_i / v + (m - 1/v) * max_i T_i + max_i R_i (T_i: stage i's fwd + bwd + sends per microbatch,
    R_i: its exposed gradient sync + optimizer step). v = 1: 1F1B with heterogeneous stages (the first
    microbatch through every stage, then m-1 more at the bottleneck's pace); v > 1: the interleaved bubble
    (p-1)/v * T for equal stages (Narayanan et al. 2021, sec. 2.2). Scalars or numpy arrays."""
    return sum_T / v + bottleneck_weight(m, v) * max_T + max_R


def pipeline_time_s(T, m: int, v: int):
    """The pipeline part of ``iteration_s`` (no R) for per-stage times T."""
    T = np.asarray(T, dtype=float)
    return float(iteration_s(T.sum(), T.max(), 0.0, m, v))


@dataclass(frozen=True)
class ModelTotals:
    """Whole-model sums over embedding, L blocks and head (per device of a TP group): what plan-level
    bounds need, shared by the optimizer and the co-search."""

    weight_bytes: float
    grad_bytes: float
    optimizer_bytes: float
    activation_bytes: float  # per microbatch
    optimizer_traffic_bytes: float  # HBM bytes of one optimizer step over every parameter
    sync_grad_bytes: float  # gradients to synchronise (the tied head copy counted once)
    sync_weight_bytes: float  # weights to all-gather with ZeRO-1 (the tied head copy counted once)
    zero1_optimizer_bytes: float = 0.0  # what ZeRO-1 divides over the d x cp ranks (``LayerCost.zero1_scale``)

    def static_bytes(self, optimizer_scale: float = 1.0) -> float:
        """Weights + grads + optimizer state; ``optimizer_scale`` < 1 is ZeRO-1's 1/d: the sharded state."""
        if optimizer_scale == 1.0:
            return self.weight_bytes + self.grad_bytes + self.optimizer_bytes
        return self.weight_bytes + self.grad_bytes + self.zero1_optimizer_bytes * optimizer_scale

    def sharded_static_bytes(self, zero: int, dp: int) -> float:
        """A floor on the weights + grads + optimizer state per device under ZeRO stage ``zero`` over ``dp``
        ranks: the shards only (the gathered layers and the reduce bucket that ZeRO-2/3 add are left out)."""
        if not zero or dp <= 1:
            return self.static_bytes()
        w = self.weight_bytes / dp if zero >= 3 else self.weight_bytes
        g = self.grad_bytes / dp if zero >= 2 else self.grad_bytes
        return w + g + self.zero1_optimizer_bytes / dp


def model_totals(c: LayerCosts, L: int) -> ModelTotals:
    E, Bk, H = c.embedding, c.block, c.head
    parts = ((1, E), (L, Bk), (1, H))
    return ModelTotals(
        weight_bytes=sum(n * X.weight_bytes for n, X in parts),
        grad_bytes=sum(n * X.grad_bytes for n, X in parts),
        optimizer_bytes=sum(n * X.optimizer_bytes for n, X in parts),
        activation_bytes=sum(n * X.activation_bytes for n, X in parts),
        optimizer_traffic_bytes=float(sum(n * optimizer_traffic_bytes(X.grad_bytes, X.optimizer_bytes,
                                                                      X.weight_bytes, X.params) for n, X in parts)),
        sync_grad_bytes=sum(n * X.grad_bytes for n, X in parts) - tied_grad_bytes(c),
        sync_weight_bytes=sum(n * X.weight_bytes for n, X in parts) - tied_static_bytes(c) * (
            H.weight_bytes / H.static_bytes if H.static_bytes else 0.0),
        zero1_optimizer_bytes=sum(n * X.zero1_optimizer_bytes for n, X in parts))


def least_sends_s(c: LayerCosts, cluster: Cluster, t: int, d: int) -> tuple[float, float]:
    """The cheapest forward and backward pipeline send any stage boundary of a (t, d) plan can have."""
    E, Bk, H = c.embedding, c.block, c.head
    tier, tt = cluster.tier_for_group(2, t * d, "pp"), cluster.tier_for_group(t, 1, "tp")
    pf = min(float(send_s(c, Bk.boundary_fwd_bytes, tier, tt)), float(send_s(c, E.boundary_fwd_bytes, tier, tt)))
    pb = min(float(send_s(c, Bk.boundary_bwd_bytes, tier, tt)), float(send_s(c, H.boundary_bwd_bytes, tier, tt)))
    return pf, pb
