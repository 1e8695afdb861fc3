"""Per-layer costs as plain data: forward/backward seconds and memory of embedding, block and head.

``LayerCosts`` is everything the placement stage needs to know about one (model, chip, TrainSetting,
TP network tier) -- a handful of floats per layer kind -- so the partition DP and the plan evaluation run
on plain numbers (and the co-search can build ``LayerCosts`` from vectorized bounds instead).

Two layer-time models:
- ``"scheduled"``: the layer's optimal operator schedule over tensor cores, vector cores and the network
  port (``phaze.schedule``): independent ops overlap, TP collectives overlap with compute where the DAG
  allows. This is the paper's model and the right one for a designed chip with several cores.
- ``"sequential"``: every op runs on all cores of its kind, one after another, collectives not overlapped
  (sum of op latencies, plus the framework's own kernels: ``phaze.cost.gpu_layer``). This is how Megatron-LM
  executes on a GPU (one CUDA stream of kernels, blocking NCCL calls in the TP region), so it is the default
  for GPU presets.
``time_model="auto"`` picks "sequential" for accelerators in ``GPU_ACCELERATORS`` (the GPU presets, or any
chip whose name starts with one of their prefixes) and "scheduled" otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from phaze.cost.gpu_layer import gpu_layer_time_s, grad_accumulate_s
from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import NetworkTier
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PAPER_RUNTIME, Runtime, TrainSetting

TimeModel = Literal["auto", "scheduled", "sequential"]
LAYER_KINDS = ("embedding", "block", "head")
# Chips that run layers as a sequence of kernels (GPUs): "auto" costs them with the sequential model.
GPU_ACCELERATORS = ("a100", "h100", "v100", "gpu")


@dataclass(frozen=True)
class LayerCost:
    """One layer kind on one device, per microbatch. ``bwd_s`` includes the recomputed forward ops."""

    fwd_s: float
    bwd_s: float
    params: int = 0
    weight_bytes: float = 0.0
    grad_bytes: float = 0.0
    optimizer_bytes: float = 0.0
    activation_bytes: float = 0.0  # kept for the backward, per microbatch
    boundary_fwd_bytes: float = 0.0  # activation sent to the next layer
    boundary_bwd_bytes: float = 0.0  # gradient sent to the previous layer
    working_bytes: float = 0.0  # re-materialised transiently during this layer's backward
    tied_params: int = 0  # params that are a copy of another layer's (tied LM head)
    # ZeRO-1 shards optimizer_bytes x zero1_scale over the d x cp ranks (an MoE block's experts are sharded over
    # their expert-data-parallel group: ``phaze.workload.memory.LayerMemory.zero1_scale``)
    zero1_scale: float = 1.0
    # of fwd_s + bwd_s, an MoE block's exposed dispatch/combine and the busiest EP rank's extra time (reported in
    # "where the iteration time goes"; 0 for dense layers)
    moe_a2a_s: float = 0.0
    moe_imbalance_s: float = 0.0
    # of fwd_s + bwd_s, an MoE block's host-bound stall: the time the GPU waits for the host to issue the block's
    # kernels beyond its own (``phaze.cost.moe_host``; 0 for dense layers and GPU-bound blocks)
    moe_host_s: float = 0.0

    @property
    def zero1_optimizer_bytes(self) -> float:
        return self.optimizer_bytes * self.zero1_scale

    @property
    def time_s(self) -> float:
        return self.fwd_s + self.bwd_s

    @property
    def static_bytes(self) -> float:
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes


@dataclass(frozen=True)
class LayerCosts:
    """Costs of the three layer kinds for one training setting (per device, per microbatch)."""

    embedding: LayerCost
    block: LayerCost
    head: LayerCost
    setting: TrainSetting | None = None
    time_model: str = "given"

    def __getitem__(self, kind: str) -> LayerCost:
        if kind not in LAYER_KINDS:
            raise ConfigError(f"unknown layer kind {kind!r}; use one of {', '.join(LAYER_KINDS)}")
        return getattr(self, kind)


def default_time_model(accelerator: Accelerator) -> str:
    """"sequential" for GPU presets (name starts with a GPU prefix), "scheduled" for designed chips."""
    name = accelerator.name.lower()
    return "sequential" if any(name.startswith(p) for p in GPU_ACCELERATORS) else "scheduled"


def resolve_time_model(time_model: str, accelerator: Accelerator) -> str:
    if time_model == "auto":
        return default_time_model(accelerator)
    if time_model not in ("scheduled", "sequential"):
        raise ConfigError(f"time_model must be 'auto', 'scheduled' or 'sequential', got {time_model!r}")
    return time_model


def _scheduled_time_s(graph, accelerator: Accelerator, tier: NetworkTier | None,
                      time_limit_s: float, schedule_cache, bound_only: bool = False) -> float:
    """The layer's optimal makespan (``bound_only``: the solver's lower bound of it, from the bounds and the
    list schedule alone, no branch and bound or CP-SAT: never above the makespan)."""
    from phaze.schedule import build_problem, solve_cached

    sched = solve_cached(build_problem(graph, accelerator, tier), schedule_cache, time_limit_s, exact=not bound_only)
    return float(sched.lower_bound_s if bound_only else sched.makespan_s)


_CACHE: dict[tuple, LayerCosts] = {}


def compute_layer_costs(model: ModelConfig, accelerator: Accelerator, setting: TrainSetting,
                        tp_tier: NetworkTier | None, time_model: TimeModel = "auto", optimizer: str | None = None,
                        *, schedule_time_limit_s: float = 5.0, schedule_cache=None,
                        cp_tier: NetworkTier | None = None, moe_net=None, bound_only: bool = False) -> LayerCosts:
    """Build the six layer graphs of ``setting``, time them with ``time_model`` and read the memory of each
    layer kind. Cached by content: (model, accelerator, setting, tiers, time model, optimizer, schedule budget). ``optimizer``:
    None takes the setting's runtime's. An MoE model's collectives outside the TP group run on ``moe_net``
    (``phaze.cost.moe.MoeNetwork``; ``moe_network`` builds it), and its block is the mean of its MoE and dense
    blocks (``phaze.placement.moe_costs``). ``bound_only``: each scheduled layer's time is a lower bound of its
    optimal makespan (no exact solve; the same memory): costs no plan can be slower under
    (``phaze.placement.best_first``); the sequential model is exact and cheap, so it ignores the flag."""
    tm = resolve_time_model(time_model, accelerator)
    optimizer = optimizer or setting.runtime.optimizer
    tier = tp_tier if setting.tp > 1 else None
    if setting.cp > 1 and cp_tier is None:
        raise ConfigError("context parallelism needs the network tier of the CP group (cp_tier)")
    cp_tier = cp_tier if setting.cp > 1 else None
    if setting.deterministic and tm != "sequential":
        raise ConfigError(f"deterministic mode is PyTorch's on a GPU (the sequential time model); {accelerator.name} "
                          f"is costed with the {tm} model, which has no framework allocations to fill")
    moe = getattr(model, "is_moe", False)
    expert_groups = moe and (setting.ep > 1 or setting.etp > 1)
    if expert_groups and tm != "sequential":
        raise ConfigError(f"{model.name}: expert parallelism is costed on GPUs only so far (the sequential time "
                          f"model); on {accelerator.name} (scheduled per-layer) use --ep 1 --etp 1")
    if expert_groups and moe_net is None:
        raise ConfigError("an MoE model with expert parallelism needs the network of its expert groups (moe_net)")
    # the schedule budget is part of what a scheduled cost is (a short budget may leave a layer unproven)
    bound_only = bound_only and tm == "scheduled"
    key = (model, accelerator, setting, tier, tm, optimizer, cp_tier, moe_net,
           schedule_time_limit_s if tm == "scheduled" else None, bound_only)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    from phaze.workload.graphs import cp_ring_bytes, layer_graph

    times, weight_grads = {}, {}
    kinds = LAYER_KINDS + (("dense_block",) if moe and model.num_moe_layers < model.num_layers else ())
    for kind in kinds:
        for direction in ("fwd", "bwd"):
            g = layer_graph(model, setting, kind, direction)
            if direction == "bwd":  # the weight gradients the backward adds into the buffer (graphs marks them)
                weight_grads[kind] = sum(1 for op in g.gemms if op.accumulate_bytes)
            if tm == "sequential":
                cpb = cp_ring_bytes(model, setting, direction) if kind in ("block", "dense_block") else 0
                times[(kind, direction)] = gpu_layer_time_s(g, accelerator, tier, setting.tp_overlap, setting.tp,
                                                            setting.cp, cpb, cp_tier, setting.tp_overlap_config,
                                                            setting.deterministic, moe_net)
            else:
                times[(kind, direction)] = _scheduled_time_s(g, accelerator, tier, schedule_time_limit_s,
                                                             schedule_cache, bound_only)
    out = layer_costs_from_times(model, setting, times, optimizer, tm)
    if tm == "sequential":
        out = LayerCosts(setting=setting, time_model=tm, **{
            kind: replace(out[kind], bwd_s=out[kind].bwd_s + grad_accumulate_s(
                out[kind].grad_bytes, accelerator, params=out[kind].params, fused=setting.grad_accum_fusion,
                deterministic=setting.deterministic, tensors=weight_grads[kind]))
            for kind in LAYER_KINDS})
    if moe:
        from phaze.placement.moe_costs import moe_layer_costs, moe_time_parts
        if tm == "sequential":
            out = replace(out, block=replace(out.block, **moe_time_parts(model, setting, accelerator, tier, moe_net)))
        out = moe_layer_costs(model, setting, out, times, optimizer, accelerator, weight_grads,
                              sequential=tm == "sequential")
    _CACHE[key] = out
    return out


def layer_costs_from_times(model: ModelConfig, setting: TrainSetting, times: dict, optimizer: str = "adam",
                           time_model: str = "given") -> LayerCosts:
    """LayerCosts of ``setting`` from per-slot times {(kind, "fwd"|"bwd"): seconds} (missing: 0) and the
    memory of each layer kind (``phaze.workload.memory``)."""
    from phaze.workload.memory import layer_memory

    kinds = {}
    for kind in LAYER_KINDS:
        mem = layer_memory(model, setting, kind, optimizer)
        kinds[kind] = LayerCost(
            fwd_s=float(times.get((kind, "fwd"), 0.0)), bwd_s=float(times.get((kind, "bwd"), 0.0)),
            params=int(mem.params), weight_bytes=float(mem.weight_bytes), grad_bytes=float(mem.grad_bytes),
            optimizer_bytes=float(mem.optimizer_bytes), activation_bytes=float(mem.activation_bytes),
            boundary_fwd_bytes=float(mem.boundary_fwd_bytes), boundary_bwd_bytes=float(mem.boundary_bwd_bytes),
            working_bytes=float(getattr(mem, "recompute_working_bytes", 0)),
            tied_params=int(getattr(mem, "tied_params", 0)), zero1_scale=float(getattr(mem, "zero1_scale", 1.0)))
    return LayerCosts(setting=setting, time_model=time_model, **kinds)


def model_forward_flops_per_sequence(model: ModelConfig, seq_len: int | None = None) -> float:
    """Matrix FLOPs of one forward pass of one sequence through the whole (unsharded) model, from the
    layer graphs at t=1 without recompute: embedding + num_layers blocks + head (GEMMs only)."""
    key = ("flops", model, seq_len)
    hit = _FLOPS_CACHE.get(key)
    if hit is not None:
        return hit
    from phaze.workload.graphs import layer_graph
    from phaze.workload.ops import Gemm

    mbs = getattr(model, "microbatch_size", 1)  # a traced model exists at its traced microbatch only
    s = TrainSetting(microbatch_size=mbs, seq_len=seq_len or model.seq_len, tp=1)
    per = {k: float(sum(op.flops for op in layer_graph(model, s, k, "fwd").ops if isinstance(op, Gemm)))
           for k in LAYER_KINDS}
    total = (per["embedding"] + model.num_layers * per["block"] + per["head"]) / mbs
    _FLOPS_CACHE[key] = total
    return total


_FLOPS_CACHE: dict[tuple, float] = {}


def setting_for(model: ModelConfig, microbatch_size: int, tp: int, sequence_parallel: bool,
                recompute: str, seq_len: int | None = None, *, runtime: Runtime = PAPER_RUNTIME,
                cp: int = 1, ep: int = 1, etp: int = 1) -> TrainSetting:
    """The TrainSetting of one layer kind under ``runtime``: sequence parallelism only with t > 1, and TP
    overlap only where there is sequence parallelism (``Runtime.for_shape``: one cache entry for the same
    costs)."""
    sp = bool(sequence_parallel and tp > 1)
    return TrainSetting(microbatch_size=microbatch_size, seq_len=seq_len or model.seq_len, tp=tp,
                        sequence_parallel=sp, recompute=recompute, cp=cp, runtime=runtime.for_shape(tp, sp),
                        ep=ep, etp=etp)


__all__ = ["LayerCost", "LayerCosts", "compute_layer_costs", "layer_costs_from_times", "default_time_model", "resolve_time_model",
           "model_forward_flops_per_sequence", "setting_for", "GPU_ACCELERATORS"]
