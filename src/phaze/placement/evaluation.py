"""Evaluate one plan: iteration time with its breakdown, throughput, MFU and memory per stage.

``evaluate_costs`` works on plain per-layer numbers (``LayerCosts`` per recompute mode) and is what the
optimizer's result is checked against; ``evaluate`` builds those numbers for a model and chip first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster
from phaze.placement import stage as st
from phaze.placement.layer_costs import LayerCosts, compute_layer_costs, model_forward_flops_per_sequence, \
    setting_for
from phaze.placement.plan import Evaluation, Plan, StageBreakdown
from phaze.units import GiB
from phaze.workload.config import ModelConfig

# Memory a plan may not use, by default (``phaze plan`` / ``evaluate``): the CUDA context and kernel images
# (~0.5 GiB per process), NCCL's communicator buffers (NCCL_BUFFSIZE 4 MiB per channel and peer, several
# communicators: ~1 GiB), cuBLAS / cuDNN workspaces and the PyTorch caching allocator's fragmentation
# (PyTorch docs, "CUDA semantics: memory management"). An assumption of a few GiB, not a measurement:
# 3 GiB, about 4% of an 80 GB GPU; set it per run with --memory-reserve-gib.
from phaze.workload.runtime import DEFAULT_MEMORY_RESERVE_BYTES  # noqa: E402,F401 (re-exported)


@dataclass(frozen=True)
class DeviceSpec:
    """What placement needs to know about the chip beyond per-layer costs. ``hbm_bytes`` is the capacity a
    plan may use: the chip's HBM minus ``memory_reserve_bytes``."""

    hbm_bytes: float
    hbm_Bps: float  # achievable HBM bandwidth (optimizer step)
    peak_matrix_flops: float  # for MFU
    memory_reserve_bytes: float = 0.0
    lane_ops_per_s: float = float("inf")  # vector-lane operations per second (optimizer step; inf: not bound)

    @classmethod
    def of(cls, acc: Accelerator, memory_reserve_bytes: float = 0.0) -> "DeviceSpec":
        if not 0 <= memory_reserve_bytes < acc.hbm_bytes:
            raise ConfigError(f"memory reserve {memory_reserve_bytes / GiB:g} GiB must be >= 0 and below the "
                              f"{acc.hbm_bytes / GiB:.1f} GiB of {acc.name}")
        return cls(float(acc.hbm_bytes - memory_reserve_bytes), float(acc.hbm_bandwidth_Bps * acc.memory_efficiency),
                   float(acc.peak_matrix_flops), float(memory_reserve_bytes), lane_ops_per_s(acc))


def lane_ops_per_s(acc: Accelerator) -> float:
    """The chip's vector-lane operations per second: every lane of every vector core, one op per cycle at
    the vector efficiency (``phaze.cost.vector``'s rate)."""
    return float(acc.num_vc * acc.vc_width * acc.freq_hz * acc.vector_efficiency)


def check_batch(plan: Plan, global_batch: int) -> None:
    if plan.microbatch_size * plan.num_microbatches * plan.dp != global_batch:
        raise ConfigError(
            f"global batch {global_batch} != microbatch_size {plan.microbatch_size} x num_microbatches "
            f"{plan.num_microbatches} x dp {plan.dp} = "
            f"{plan.microbatch_size * plan.num_microbatches * plan.dp}; make them match")


def _layer_counts(r: tuple[int, int], n_layers: int) -> tuple[int, int, int]:
    a, b = r
    e = int(a == 0)
    h = int(b == n_layers)
    return e, b - a - e - h, h


_SUM_FIELDS = ("fwd_s", "bwd_s", "params", "weight_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes",
               "zero1_optimizer_bytes", "moe_a2a_s", "moe_imbalance_s", "moe_host_s")


def _chunk(c: LayerCosts, e: int, nb: int, h: int, topo) -> tuple:
    """One chunk's figures for ``evaluate_costs``: its sums of ``_SUM_FIELDS`` (floats; a missing expert-sharded
    optimizer figure is the plain one), activation, working and largest-layer bytes, and the time of its
    forward send out and backward send in (whether it sends depends on its place, decided by the caller)."""
    s = st.stage_sums(c, e, nb, h)
    sums_of = {}
    for f in _SUM_FIELDS:
        x = getattr(s, f)
        sums_of[f] = float(s.optimizer_bytes if x is None else x)  # (None: no expert sharding)
    out_s = float(st.send_s(c, st.boundary_out_bytes(c, nb, h), topo.pp_tier, topo.tp_tier))
    in_s = float(st.send_s(c, st.boundary_in_bytes(c, e, nb), topo.pp_tier, topo.tp_tier))
    return (sums_of, float(s.activation_bytes), float(s.working_bytes), float(s.largest_layer_weight_bytes),
            out_s, in_s)


def _stage_figures(c: LayerCosts, places: list, chunks: dict, mode, topo, z: int, d: int, overlap_dp: bool,
                   device: DeviceSpec) -> tuple:
    """What ``evaluate_costs`` needs of one pipeline device that does not depend on its place in the pipeline:
    (sums, sends, each chunk's activation bytes, tied static bytes, gradient sync, its exposed part, optimizer
    step, exposed per-microbatch ZeRO traffic) from its chunks' ``places`` (e, nb, h, sends forward, sends
    backward)."""
    acc = dict.fromkeys(_SUM_FIELDS, 0.0)
    acc["params"] = 0
    working, largest, sends, has_e, has_h = 0.0, 0.0, 0.0, False, False
    chunk_act = []
    for e, nb, h, out, back in places:
        has_e, has_h = has_e or bool(e), has_h or bool(h)
        key = (id(c), e, nb, h, topo.pp_tier, topo.tp_tier)  # what a chunk's figures depend on
        x = chunks.get(key)
        if x is None:  # the chunks of a balanced plan repeat a few layer counts: each is summed once
            x = chunks[key] = _chunk(c, e, nb, h, topo)
        sums_of, act, work, big, out_s, in_s = x
        chunk_act.append(act)
        for f, val in sums_of.items():
            acc[f] += val
        working, largest = max(working, work), max(largest, big)
        if out:
            sends += out_s
        if back:
            sends += in_s
    sums = st.StageSums(working_bytes=working, largest_layer_weight_bytes=largest, **acc)
    tied = st.tied_static_bytes(c, z, d) if has_e and has_h else 0.0
    sync = float(st.dp_sync_s(sums.grad_bytes, sums.weight_bytes, topo, z))
    if has_e != has_h:
        sync += st.tied_sync_s(c, topo)
    gather = float(st.param_gather_s(sums.weight_bytes, topo, z))
    exposed = float(st.exposed_sync_s(sync, sums.bwd_s, overlap_dp, sums.params, d, gather, sums.fwd_s,
                                       st.sync_interference(c, topo, device.hbm_Bps)))
    opt = float(st.optimizer_step_s(sums, d, z, device.hbm_Bps, device.lane_ops_per_s))
    mb_comm = float(st.exposed_microbatch_comm_s(c, sums, topo, z, overlap_dp, device.hbm_Bps))
    return sums, sends, tuple(chunk_act), tied, sync, exposed, opt, mb_comm


def _stage_rows(plan: Plan, costs, topo, n_layers: int, chunks: dict, overlap_dp: bool, device: DeviceSpec):
    """Per pipeline device of ``plan``, what ``evaluate_costs`` and ``device_rows`` take from it: (device, its
    recompute mode, its ``_stage_figures``, in-flight microbatches, activation peak, memory, time per
    microbatch)."""
    p, v, m, d, z = plan.pp, plan.interleave, plan.num_microbatches, plan.grad_sync_ranks, plan.zero
    n_chunks = len(plan.stages)
    figures: dict = {}  # (mode, its chunks' places) -> _stage_figures
    for i in range(p):
        mode = plan.recompute_of(i)
        if isinstance(costs, LayerCosts):
            c = costs
        else:
            if mode not in costs:
                raise ConfigError(f"no layer costs given for recompute mode {mode!r}")
            c = costs[mode]
        places = []
        for j, r in enumerate(plan.chunks_of(i)):
            k = i + j * p
            places.append((*_layer_counts(r, n_layers), k < n_chunks - 1, k > 0))
        key = (mode, tuple(places))
        f = figures.get(key)
        if f is None:  # the stages of a balanced plan repeat a few compositions: each is costed once
            f = figures[key] = _stage_figures(c, places, chunks, mode, topo, z, d, overlap_dp, device)
        sums, sends, chunk_act, tied, sync, exposed, opt, mb_comm = f
        inflight = st.in_flight_microbatches(i, p, m, v)
        act_peak = (st.interleaved_peak_activation_bytes(i, p, m, chunk_act) if v > 1
                    else inflight * float(sums.activation_bytes))
        mem = float(st.stage_memory(sums, inflight, d, z, tied, act_peak))
        yield i, mode, f, inflight, act_peak, mem, sums.fwd_s + sums.bwd_s + sends + mb_comm


def device_rows(plan: Plan, costs, cluster: Cluster, device: DeviceSpec, *, num_blocks: int, overlap_dp: bool,
                chunk_cache: dict | None = None) -> tuple[list[float], list[float], list[float]]:
    """Per pipeline device of ``plan``: its time per microbatch, exposed sync + optimizer step, and memory, the
    ``time_per_microbatch_s``, ``dp_exposed_s + optimizer_step_s`` and ``memory_bytes`` of ``evaluate_costs``'s
    stages (the same computation, ``_stage_rows``) without building the evaluation."""
    d = plan.grad_sync_ranks
    topo = st.Topology.of(cluster, plan.tp, d, plan.pp)
    T, R, M = [], [], []
    for _, _, f, _, _, mem, t_i in _stage_rows(plan, costs, topo, num_blocks + 2,
                                                {} if chunk_cache is None else chunk_cache, overlap_dp, device):
        T.append(t_i)
        R.append(f[5] + f[6])
        M.append(mem)
    return T, R, M


def evaluate_costs(plan: Plan, costs: Mapping[str, LayerCosts] | LayerCosts, cluster: Cluster,
                   global_batch: int, device: DeviceSpec, *, num_blocks: int,
                   model_flops_per_sequence: float = 0.0, seq_len: int = 0, overlap_dp: bool | None = None,
                   time_model: str = "given", chunk_cache: dict | None = None) -> Evaluation:
    """Evaluate ``plan`` from per-layer costs: ``costs`` maps each recompute mode the plan uses to its
    LayerCosts (or is one LayerCosts used for every stage). ``overlap_dp`` overrides ``plan.dp_overlap``
    (None: the plan's). ``chunk_cache``: a dict shared by the evaluations of one search (keyed by the id of
    the costs: the caller keeps them alive while it lives), so plans differing only in ZeRO stage or
    microbatch count sum their chunks' layers once."""
    if overlap_dp is None:
        overlap_dp = plan.dp_overlap
    check_batch(plan, global_batch)
    n_layers = num_blocks + 2
    if plan.num_layers != n_layers:
        raise ConfigError(f"plan covers {plan.num_layers} layers but the model has {n_layers} "
                          f"(embedding, {num_blocks} blocks, head); fix the stage ranges")
    if plan.devices > cluster.num_devices:
        cp = f" x cp={plan.cp}" if plan.cp > 1 else ""
        raise InfeasibleError(f"plan needs {plan.devices} devices (p={plan.pp} x t={plan.tp}{cp} x d={plan.dp}) "
                              f"but the cluster has {cluster.num_devices}")
    # d: the ranks that hold the same weights (data- and context-parallel): gradient sync and ZeRO-1 shards
    p, v, m, d = plan.pp, plan.interleave, plan.num_microbatches, plan.grad_sync_ranks
    topo = st.Topology.of(cluster, plan.tp, d, p)
    stages: list[StageBreakdown] = []
    T, R = [], []
    chunks: dict = {} if chunk_cache is None else chunk_cache  # _chunk's figures
    for i, mode, f, inflight, act_peak, mem, t_i in _stage_rows(plan, costs, topo, n_layers, chunks, overlap_dp,
                                                                device):
        sums, sends, chunk_act, tied, sync, exposed, opt, mb_comm = f
        z = plan.zero
        T.append(t_i)
        R.append(exposed + opt)
        stages.append(StageBreakdown(
            stage=i, layers=plan.chunks_of(i), recompute=mode, fwd_s=sums.fwd_s, bwd_s=sums.bwd_s, p2p_s=sends,
            time_per_microbatch_s=t_i, params=int(sums.params), weight_bytes=float(sums.weight_shard_bytes(d, z)),
            grad_bytes=float(sums.grad_shard_bytes(d, z)),
            optimizer_bytes=sums.optimizer_shard_bytes(d, z),
            activation_bytes=act_peak, working_bytes=sums.working_bytes,
            in_flight_microbatches=inflight, memory_bytes=mem, dp_allreduce_s=sync, dp_exposed_s=exposed,
            optimizer_step_s=opt, moe_a2a_s=sums.moe_a2a_s, moe_imbalance_s=sums.moe_imbalance_s,
            moe_host_s=sums.moe_host_s,
            zero_comm_s=mb_comm))
    pipeline = st.pipeline_time_s(T, m, v)
    tmax = max(T)
    tail_i = int(np.argmax(R))
    iteration = float(st.iteration_s(float(np.sum(T)), tmax, R[tail_i], m, v))
    mems = np.array([s.memory_bytes for s in stages])
    excess = mems - device.hbm_bytes
    worst = int(np.argmax(excess))
    fits = bool(excess[worst] <= 0)
    flops = 3.0 * model_flops_per_sequence * global_batch
    return Evaluation(
        plan=plan, stages=tuple(stages), time_model=time_model, pipeline_s=pipeline, steady_s=m * tmax,
        bubble_s=pipeline - m * tmax, p2p_s=float(sum(s.p2p_s for s in stages)),
        dp_allreduce_s=stages[tail_i].dp_exposed_s, optimizer_step_s=stages[tail_i].optimizer_step_s,
        iteration_time_s=iteration, throughput_seq_per_s=global_batch / iteration,
        throughput_tokens_per_s=global_batch * seq_len / iteration, model_flops_per_iteration=flops,
        mfu=flops / (iteration * plan.devices * device.peak_matrix_flops) if device.peak_matrix_flops else 0.0,
        memory_bytes_per_device=float(mems.max()), memory_capacity_bytes=device.hbm_bytes, fits=fits,
        oom_stage=None if fits else worst, memory_excess_bytes=0.0 if fits else float(excess[worst]),
        bottleneck_stage=int(np.argmax(T)), devices_given=cluster.num_devices,
        memory_reserve_bytes=device.memory_reserve_bytes)


_CHUNKS = object()  # the key of an ``evaluate_costs_memo`` memo's chunk cache (its other keys are tuples)


def evaluate_costs_memo(memo: dict | None, plan: Plan, costs, cluster: Cluster, global_batch: int,
                       device: DeviceSpec, *, num_blocks: int, overlap_dp: bool) -> Evaluation:
    """``evaluate_costs`` through ``memo`` (None: no memo), keyed by the plan and the identity of its costs: a
    plan search evaluates some plans twice (a uniform interleaved plan as its own combination and as one
    mode of a per-device recompute search). The caller keeps the costs alive while the memo lives, and gives
    one cluster, batch and device per memo. The memo also holds the evaluations' chunk cache."""
    if memo is None:
        return evaluate_costs(plan, costs, cluster, global_batch, device, num_blocks=num_blocks,
                              overlap_dp=overlap_dp)
    key = (plan, id(costs), overlap_dp)
    ev = memo.get(key)
    if ev is None:
        ev = memo[key] = evaluate_costs(plan, costs, cluster, global_batch, device, num_blocks=num_blocks,
                                        overlap_dp=overlap_dp, chunk_cache=memo.setdefault(_CHUNKS, {}))
    return ev


def device_rows_memo(memo: dict | None, plan: Plan, costs, cluster: Cluster, device: DeviceSpec, *, num_blocks: int,
                     overlap_dp: bool) -> tuple[list, list, list]:
    """``device_rows`` of ``plan``: from ``memo``'s evaluation of it when ``evaluate_costs_memo`` made one, else
    computed with the memo's chunk cache (and not kept as an evaluation)."""
    ev = None if memo is None else memo.get((plan, id(costs), overlap_dp))
    if ev is not None:
        return ([s.time_per_microbatch_s for s in ev.stages], [s.dp_exposed_s + s.optimizer_step_s for s in ev.stages],
                [s.memory_bytes for s in ev.stages])
    return device_rows(plan, costs, cluster, device, num_blocks=num_blocks, overlap_dp=overlap_dp,
                       chunk_cache=None if memo is None else memo.setdefault(_CHUNKS, {}))


def moe_net_for(model, cluster: Cluster, setting):
    """The network of an MoE model's expert groups under ``setting`` (None for a dense model)."""
    if not getattr(model, "is_moe", False):
        return None
    from phaze.placement.moe_costs import moe_network
    return moe_network(cluster, setting)


def plan_costs(plan: Plan, model: ModelConfig, accelerator: Accelerator, cluster: Cluster, *,
               time_model: str = "auto", seq_len: int | None = None, **kw) -> dict[str, LayerCosts]:
    """LayerCosts for every recompute mode ``plan`` uses, under the plan's runtime."""
    if not model.valid_tp(plan.tp):
        raise ConfigError(f"tensor-parallel width {plan.tp} is not valid for {model.name}: {model.tp_rule}")
    tier = cluster.tier_for_group(plan.tp, 1, "tp")
    out = {}
    cp_tier = cluster.tier_for_group(plan.cp, plan.tp, "cp") if plan.cp > 1 else None
    for mode in set(plan.recompute_modes):
        s = setting_for(model, plan.microbatch_size, plan.tp, plan.sequence_parallel, mode, seq_len,
                        runtime=plan.runtime, cp=plan.cp, ep=plan.ep, etp=plan.etp)
        out[mode] = compute_layer_costs(model, accelerator, s, tier, time_model, cp_tier=cp_tier,
                                        moe_net=moe_net_for(model, cluster, s), **kw)
    return out


def evaluate(plan: Plan, model: ModelConfig, accelerator: Accelerator, cluster: Cluster, global_batch: int,
             *, time_model: str = "auto", seq_len: int | None = None, **cost_kw) -> Evaluation:
    """Iteration time, throughput, MFU and per-stage memory of ``plan`` (under its runtime: kernels, formats,
    overlaps, optimizer, memory reserve) for ``model`` on ``cluster`` of ``accelerator``s. ``time_model``:
    "auto" (sequential for GPU presets, scheduled otherwise), "scheduled" or "sequential" (see
    ``phaze.placement.layer_costs``)."""
    check_batch(plan, global_batch)
    costs = plan_costs(plan, model, accelerator, cluster, time_model=time_model, seq_len=seq_len, **cost_kw)
    tm = next(iter(costs.values())).time_model
    s = seq_len or model.seq_len
    return evaluate_costs(plan, costs, cluster, global_batch, DeviceSpec.of(accelerator, plan.runtime.memory_reserve_bytes),
                          num_blocks=model.num_layers, model_flops_per_sequence=model_forward_flops_per_sequence(model, s),
                          seq_len=s, time_model=tm)
