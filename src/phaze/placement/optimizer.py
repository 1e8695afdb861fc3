"""The exact best plan: enumerate (t, mbs, sp, recompute, d, p, v, ZeRO stage), bound, solve the partition.

Plan space (documented choices):
- t: powers of two that ``model.valid_tp`` accepts (divide heads and kv heads, <= model.max_tp) and fit in
  the fastest network tier (a TP group never leaves a node).
- d: any divisor of global_batch / mbs, so that m = global_batch / (mbs * d) is an integer.
- p: any value 1..L+2 with p * t * d <= devices (the paper's rule: not every device has to be used; with
  ``use_all_devices=True`` only p * t * d == devices).
- v (interleaving): v > 1 needs p >= 2, L divisible by p*v (equal virtual stages, as Megatron requires)
  and m divisible by p (Megatron's interleaved schedule); the partition is then fixed.
- recompute: each pipeline stage (device) picks its own mode among the requested ones
  (``per_stage_recompute``, on in ``optimize`` when >= 2 modes are given): the stages that stash the most
  microbatches can recompute while the others do not. With v = 1 jointly with the partition; with v > 1
  (fixed partition) by ``phaze.placement.mixed_interleaved``. A plan whose stages all use one mode reports
  it as a plain string.
For v = 1 the stage partition is solved exactly by ``phaze.placement.mixed_dp``: one mode as its one-mode
case, per-stage modes (an extra combination per (setting without recompute, d, p, ZeRO stage), bounded
with the least per-layer costs over its modes, so never above its optimum). Combinations are visited in
order of a lower bound on their iteration time (``phaze.placement.combinations``: perfect balance, an interleaved
plan's fixed first and last devices, no memory limit) and the search stops when the bound cannot beat the k-th
best plan found: exact, without solving most combinations.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, replace
from typing import Mapping

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster
from phaze.placement.combinations import Combination, SearchCounts, SearchShared, enumerate_combinations
from phaze.placement.evaluation import DeviceSpec, evaluate_costs, evaluate_costs_memo, moe_net_for
from phaze.placement.layer_costs import LayerCosts, compute_layer_costs, model_forward_flops_per_sequence, \
    setting_for
from phaze.placement.mixed_dp import MixedPartitionProblem
from phaze.placement.mixed_interleaved import best_device_modes
from phaze.placement.plan import Plan, PlanResult, SearchStats, plan_from_blocks
from phaze.placement.recompute import Recompute
from phaze.units import GiB
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PlanSpace, Runtime, TrainSetting
from phaze.workload.traced import microbatch_choices


@dataclass(frozen=True)
class Candidate:
    """A solved plan: its iteration time (the same formula ``evaluate`` uses) and the costs it used (one
    LayerCosts, or {mode: LayerCosts} for a plan with per-stage recompute modes)."""

    iteration_time_s: float
    plan: Plan
    costs: LayerCosts | Mapping[str, LayerCosts]


def solve_combination(k: Combination, L: int, B: int, cluster: Cluster, device: DeviceSpec, shared: SearchShared,
                      cutoff_s: float, counts: SearchCounts) -> Candidate | None:
    """The best plan of one combination (None: nothing fits, nothing beats ``cutoff_s``, or a per-stage
    combination whose best uses one mode for all: its uniform combination has that plan). The four solvers:
    per-stage modes with interleaving (fixed partition, ``mixed_interleaved``), per-stage modes without
    (``mixed_dp``), one mode without interleaving (``mixed_dp`` with that one mode), one mode with interleaving (balanced, evaluated)."""
    s, c, p, v, z, m = k.setting, k.costs, k.pp, k.interleave, k.zero, k.num_microbatches
    topo = shared.topo(s.tp, k.sync_ranks, p)
    cap, overlap_dp = device.hbm_bytes, s.runtime.dp_overlap
    kw = dict(tp=s.tp, dp=k.dp, microbatch_size=s.microbatch_size, num_microbatches=m,
              recompute=Recompute.uniform(s.recompute),
              sequence_parallel=s.sequence_parallel, zero=z, cp=s.cp, runtime=s.runtime, ep=s.ep, etp=s.etp)
    if k.mixed and v > 1:
        counts.mixed_solved += 1
        counts.covered += len(c) ** p
        kw.pop("recompute")
        found = best_device_modes(c, L, p, v, cluster, B, device, overlap_dp, shared.evals, cutoff_s,
                                  shared.device_rows, **kw)
        if found is None:
            return None
        plan, obj = found
        return Candidate(obj, plan, {r: c[r] for r in plan.recompute.modes})
    if k.mixed:
        counts.mixed_solved += 1
        counts.covered += math.comb(L + 1, p - 1) * len(c) ** p
        msol = MixedPartitionProblem(c, L, p, m, topo, cap, z, overlap_dp, device.hbm_Bps, shared.rows,
                                     device.lane_ops_per_s).solve(cutoff_s)
        if msol is None or msol.uniform:
            return None
        kw["recompute"] = msol.recompute
        return Candidate(msol.objective_s, plan_from_blocks(msol.blocks, **kw), {r: c[r] for r in dict.fromkeys(msol.modes)})
    counts.solved += 1
    if v == 1:
        counts.covered += math.comb(L + 1, p - 1) if p >= 2 else 1
        sol = MixedPartitionProblem({s.recompute: c}, L, p, m, topo, cap, z, overlap_dp, device.hbm_Bps,
                                    shared.rows, device.lane_ops_per_s).solve()
        if sol is None:
            return None
        return Candidate(sol.objective_s, plan_from_blocks(sol.blocks, **kw), c)
    counts.covered += 1
    plan = Plan.balanced(L, p, interleave=v, **kw)
    ev = evaluate_costs_memo(shared.evals, plan, c, cluster, B, device, num_blocks=L, overlap_dp=overlap_dp)
    return Candidate(ev.iteration_time_s, plan, c) if ev.fits else None


def nothing_fits_reason(counts: SearchCounts, B: int, N: int, cap: float, space: PlanSpace | None = None) -> str:
    """One line: why no combination gave a plan, naming the sequence length and the largest memory consumer of
    the closest plan, and suggesting only what the searched ``space`` did not already try."""
    if counts.considered == 0:
        return (f"no plan shape is possible: global batch {B} with these microbatch sizes and "
                f"{N} devices gives no valid (t, p, d); change the batch, microbatch sizes or devices")
    tips = ["more devices", "a larger HBM"]
    if space is not None and "full" not in space.recompute_modes:
        tips.insert(1, "--recompute full")
    if space is not None and max(space.zero) < 3:
        tips.insert(1, "--zero 3")
    if counts.min_need > cap:
        static, act = counts.min_need_parts
        big = (f"weights, gradients and optimizer state {static / GiB:.1f} GiB" if static >= act else
               f"activations {act / GiB:.1f} GiB at sequence {counts.seq_len}")
        if act > static:
            tips.insert(0, "a shorter --seq")
        return (f"the model does not fit on {N} devices: even spread over the deepest pipeline it needs "
                f"{counts.min_need / GiB:.1f} GiB per device > {cap / GiB:.1f} GiB (largest: {big}, at sequence "
                f"{counts.seq_len}); use {', '.join(tips[:-1])} or {tips[-1]}")
    return (f"no plan fits in {cap / GiB:.1f} GiB per device on {N} devices at sequence {counts.seq_len} (the "
            f"memory of some stage always exceeds it); use {', '.join(tips[:-1])} or {tips[-1]}")


def best_plans_from_costs(costs_by_setting: Mapping[TrainSetting, LayerCosts], num_blocks: int, cluster: Cluster,
                          global_batch: int, device: DeviceSpec, space: PlanSpace, *, devices: int | None = None,
                          top_k: int = 5, cutoff_s: float = math.inf,
                          device_rows: dict | None = None) -> tuple[list[Candidate], SearchStats, str]:
    """The ``top_k`` best plans (fastest first) over every setting in ``costs_by_setting`` (keys: the
    TrainSetting the costs were built for: microbatch size, t, sequence parallelism, recompute, context
    parallelism, and the runtime every plan runs under) and every d, p, v and ZeRO stage of ``space``.
    Per-layer costs are plain floats, so a co-search can call this per chip. Returns (candidates, stats,
    reason): reason says why nothing fits when candidates is empty.
    ``cutoff_s``: plans whose iteration time provably cannot get below it are skipped (a co-search passes
    its incumbent); candidates may then be empty although some plan fits. ``device_rows``: a dict the caller
    keeps across its searches with one cluster, batch and device but for its HBM capacity, keeping the costs
    alive while it lives (``phaze.placement.mixed_interleaved.best_device_modes``' ``rows``).
    With ``space.per_stage_recompute`` also v = 1 plans whose pipeline stages each pick their own mode among
    the settings that differ only in recompute (``phaze.placement.mixed_dp``); each such combination
    adds its best plan when that mixes modes (an all-one-mode optimum is its uniform combination's).
    Steps: ``enumerate_combinations`` (with lower bounds), visit them in bound order, ``solve_combination``
    until the bound cannot beat the k-th best plan found."""
    t0 = time.perf_counter()
    N = devices or cluster.num_devices
    L, B = num_blocks, global_batch
    shared, counts = SearchShared(cluster, device_rows), SearchCounts()
    combos = enumerate_combinations(costs_by_setting, L, B, N, device, shared, space, counts, cutoff_s)
    combos.sort()  # by (lower bound, order): order is unique, so nothing else is compared
    K = max(1, top_k + 1)
    top: list[tuple[float, int, Candidate]] = []  # max-heap by -time
    for k in combos:
        incumbent = -top[0][0] if len(top) >= K else math.inf
        if k.lower_bound_s >= incumbent or k.lower_bound_s >= cutoff_s:
            break
        cand = solve_combination(k, L, B, cluster, device, shared, min(incumbent, cutoff_s), counts)
        if cand is None:
            continue
        item = (-cand.iteration_time_s, -k.order, cand)
        if len(top) < K:
            heapq.heappush(top, item)
        elif cand.iteration_time_s < -top[0][0]:
            heapq.heapreplace(top, item)
    out = [x[2] for x in sorted(top, key=lambda x: (-x[0], -x[1]))]
    stats = SearchStats(plans_considered=counts.considered, plans_solved=counts.solved,
                        partitions_covered=counts.covered, wall_time_s=time.perf_counter() - t0,
                        mixed_considered=counts.mixed_considered, mixed_solved=counts.mixed_solved)
    return out, stats, ("" if out else nothing_fits_reason(counts, B, N, device.hbm_bytes, space))


def best_plan_from_costs(costs_by_setting: Mapping[TrainSetting, LayerCosts], num_blocks: int, cluster: Cluster,
                         global_batch: int, device: DeviceSpec, space: PlanSpace, **kw) -> Candidate | None:
    """The single best plan from plain per-layer costs (None when nothing fits)."""
    kw.setdefault("top_k", 0)
    cands, _, _ = best_plans_from_costs(costs_by_setting, num_blocks, cluster, global_batch, device, space, **kw)
    return cands[0] if cands else None


def expert_shapes(model, space: PlanSpace, tcp: int, devices: int) -> list[tuple[int, int]]:
    """The (ep, etp) pairs of ``space`` for ``model`` with t x cp = ``tcp``: (1, 1) for a dense model; else ep
    dividing the experts and etp the experts' FFN, ep x etp at most the devices (each must also divide
    t x cp x d, checked per d by the plan search)."""
    if not getattr(model, "is_moe", False):
        return [(1, 1)]
    def pow2(limit):
        out, x = [], 1
        while x <= limit:
            out.append(x)
            x *= 2
        return out
    eps = space.ep_values or tuple(x for x in pow2(model.num_experts) if model.num_experts % x == 0)
    etps = space.etp_values or tuple(x for x in pow2(max(1, tcp)) if model.moe_ffn % x == 0)
    return [(ep, etp) for ep in eps for etp in etps
            if ep * etp <= devices and model.num_experts % ep == 0 and model.moe_ffn % etp == 0]


def default_tp_values(model: ModelConfig, cluster: Cluster, devices: int) -> tuple[int, ...]:
    fast = cluster.tiers[0].devices_per_group
    out, t = [], 1
    while t <= min(model.max_tp, fast, devices):
        if model.valid_tp(t):
            out.append(t)
        t *= 2
    return tuple(out)


def plan_settings(model: ModelConfig, cluster: Cluster, global_batch: int, runtime: Runtime, space: PlanSpace, *,
                  devices: int | None = None, seq_len: int | None = None) -> tuple[int, PlanSpace, list[tuple]]:
    """Check the inputs of a plan search and list what it costs: (devices N, the space for ``runtime``, the
    settings as (TrainSetting, TP tier, CP tier or None, MoE network) in the search's order). Raises ConfigError
    or InfeasibleError (one line) on bad input."""
    N = cluster.num_devices if devices is None else devices
    if not isinstance(N, int) or N < 1:
        raise ConfigError(f"devices must be a positive integer, got {N!r}")
    if N > cluster.num_devices:
        raise InfeasibleError(f"asked for {N} devices but cluster {cluster.name!r} has {cluster.num_devices}; "
                              f"use --devices <= {cluster.num_devices} or a larger cluster")
    if not isinstance(global_batch, int) or global_batch < 1:
        raise ConfigError(f"global batch must be a positive integer, got {global_batch!r}")
    space = space.for_runtime(runtime)
    space.check(runtime, seq_len or model.seq_len)
    if getattr(model, "is_moe", False) and max(space.zero) >= 2:  # experts shard over their own group: not modelled
        if min(space.zero) >= 2:
            raise ConfigError(f"--zero {','.join(map(str, space.zero))}: ZeRO-2/3 of an MoE model's experts are not "
                              f"modelled yet; use --zero 0,1")
        space = space.with_(zero=tuple(z for z in space.zero if z < 2))
    tps = default_tp_values(model, cluster, N) if space.tp_values is None else space.tp_values
    for t in tps:
        if not model.valid_tp(t):
            raise ConfigError(f"tensor-parallel width {t} is not valid for {model.name}: {model.tp_rule}")
    jobs = []
    for mbs in microbatch_choices(model, space.microbatch_sizes):
        if global_batch % mbs:
            continue
        for t in tps:
            tier = cluster.tier_for_group(t, 1, "tp")
            for cp in space.cp_values:
                if t * cp > N:
                    continue
                cp_tier = cluster.tier_for_group(cp, t, "cp") if cp > 1 else None
                for sp in dict.fromkeys(bool(x) and t > 1 for x in space.sequence_parallel):
                    if getattr(model, "is_moe", False) and t > 1 and not sp:
                        continue  # Megatron-Core's MoE layer with TP needs sequence parallelism
                    for ep, etp in expert_shapes(model, space, t * cp, N):
                        for rc in space.recompute_modes:
                            s = setting_for(model, mbs, t, sp, rc, seq_len, runtime=runtime, cp=cp, ep=ep, etp=etp)
                            jobs.append((s, tier, cp_tier, moe_net_for(model, cluster, s)))
    return N, space, jobs


def evaluations(cands: list[Candidate], model: ModelConfig, cluster: Cluster, global_batch: int, device: DeviceSpec,
                seq_len: int | None = None) -> list:
    """The full ``Evaluation`` of each candidate plan, checked against the optimizer's own iteration time."""
    s_len = seq_len or model.seq_len
    flops = model_forward_flops_per_sequence(model, s_len)
    evals = []
    for cand in cands:
        tm = (cand.costs if isinstance(cand.costs, LayerCosts) else next(iter(cand.costs.values()))).time_model
        ev = evaluate_costs(cand.plan, cand.costs, cluster, global_batch, device, num_blocks=model.num_layers,
                            model_flops_per_sequence=flops, seq_len=s_len, time_model=tm)
        if not (ev.fits and math.isclose(ev.iteration_time_s, cand.iteration_time_s, rel_tol=1e-9, abs_tol=1e-12)):
            raise AssertionError(f"placement bug: optimizer and evaluate disagree on {cand.plan.describe()}: "
                                 f"{cand.iteration_time_s} vs {ev.iteration_time_s} (fits={ev.fits})")
        evals.append(ev)
    return evals


def optimize(model: ModelConfig, accelerator: Accelerator, cluster: Cluster, global_batch: int, runtime: Runtime,
             space: PlanSpace = PlanSpace(), *, devices: int | None = None, seq_len: int | None = None,
             top_k: int = 5, baselines: bool = True, time_model: str = "auto", **cost_kw) -> PlanResult:
    """The fastest plan (and ``top_k`` runners-up) of ``space`` for ``model`` on up to ``devices``
    accelerators of ``cluster`` with ``global_batch`` sequences per iteration, every plan running under
    ``runtime`` (kernels, formats, overlaps, optimizer, memory reserve: none of it searched); the baselines
    are evaluated separately and never affect the result. With >= 2 recompute modes and
    ``space.per_stage_recompute`` the v = 1 plans may give each pipeline stage its own mode. Raises
    InfeasibleError (one line) when nothing fits. ``cost_kw``: the layer-cost options of
    ``compute_layer_costs`` (schedule time limit, schedule cache). Every setting is costed exactly;
    ``phaze.placement.best_first.optimize_best`` gives the same best plan costing only those whose bound can win."""
    t_start = time.perf_counter()
    N, space, jobs = plan_settings(model, cluster, global_batch, runtime, space, devices=devices, seq_len=seq_len)
    costs: dict[TrainSetting, LayerCosts] = {
        s: compute_layer_costs(model, accelerator, s, tier, time_model, cp_tier=cp_tier, moe_net=moe_net, **cost_kw)
        for s, tier, cp_tier, moe_net in jobs}
    device = DeviceSpec.of(accelerator, runtime.memory_reserve_bytes)
    cands, stats, reason = best_plans_from_costs(costs, model.num_layers, cluster, global_batch, device, space,
                                                 devices=N, top_k=top_k)
    if not cands:
        raise InfeasibleError(f"{model.name} on {accelerator.name}: {reason}")
    evals = evaluations(cands, model, cluster, global_batch, device, seq_len)
    base = ()
    if baselines:
        from phaze.placement.baseline_plans import evaluate_baselines
        base = evaluate_baselines(model, accelerator, cluster, global_batch, runtime, devices=N,
                                  time_model=time_model, seq_len=seq_len, **cost_kw)
    stats = replace(stats, wall_time_s=time.perf_counter() - t_start)
    return PlanResult(best=evals[0], alternatives=tuple(evals[1:top_k + 1]), baselines=tuple(base), stats=stats,
                      space=space)
