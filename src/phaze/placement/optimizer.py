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
order of a lower bound on their iteration time (perfect balance, no memory limit) and the search stops
when the bound cannot beat the k-th best plan found: exact, without solving most combinations.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, NamedTuple

import numpy as np

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster
from phaze.placement import stage as st
from phaze.placement.bounds import (combination_entries, divisors, least_traffic_bytes, lower_bound_s, same_memory,
                                   weight_per_grad, zero_microbatch_floor_s)
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


class Combination(NamedTuple):
    """One point of the plan space, visited in order of ``lower_bound_s``: a setting's costs (one LayerCosts,
    or {mode: LayerCosts} when each pipeline stage picks its own recompute mode), d, p, v and the ZeRO stage. ``order``
    breaks ties by enumeration order (deterministic). A NamedTuple: 10^5 of them are built per search."""

    lower_bound_s: float
    order: int
    setting: TrainSetting
    costs: LayerCosts | Mapping[str, LayerCosts]
    dp: int
    pp: int
    interleave: int
    zero: int
    num_microbatches: int

    @property
    def mixed(self) -> bool:
        return isinstance(self.costs, dict)

    @property
    def sync_ranks(self) -> int:
        """Ranks holding the same weights: d x cp (gradient sync and ZeRO shards)."""
        return self.dp * self.setting.cp


# per process: cluster -> (topologies, sends, syncs) shared by every search on it; bounded (cleared past these
# sizes) so that a long session's memory stays small (a co-search needs a few thousand entries per model)
_ACROSS_SEARCHES: dict = {}
ACROSS_SEARCHES_MAX_CLUSTERS = 16
ACROSS_SEARCHES_MAX_ENTRIES = 200_000


class _Shared:
    """What the combinations of one search share, computed once: topologies, the cheapest pipeline sends of
    a (t, ranks) shape, gradient-sync times, and the partition solvers' stage rows."""

    def __init__(self, cluster: Cluster, device_rows: dict | None = None) -> None:
        self.cluster = cluster
        self.device_rows = device_rows  # the caller's, across searches (``best_device_modes``' rows)
        # topologies, sends and syncs are pure functions of their keys and the cluster, so later searches on
        # the same cluster reuse them (a co-search runs one per candidate chip: recomputing the syncs was a
        # third of its exact phase, benchmarks/bench_reproduce.py)
        if len(_ACROSS_SEARCHES) > ACROSS_SEARCHES_MAX_CLUSTERS:
            _ACROSS_SEARCHES.clear()
        self._topo, self._sends, self.sync = _ACROSS_SEARCHES.setdefault(cluster, ({}, {}, {}))
        if len(self.sync) + len(self._sends) > ACROSS_SEARCHES_MAX_ENTRIES:
            for d in (self._topo, self._sends, self.sync):
                d.clear()
        self.rows: dict = {}  # stage rows of the partition solves (keyed by id: lives only in one search)
        self.evals: dict = {}  # plan evaluations (``evaluate_costs_memo``; keyed by id: one search only)

    def topo(self, t: int, ranks: int, p: int) -> st.Topology:
        key = (t, ranks, p)
        topo = self._topo.get(key)
        if topo is None:
            topo = self._topo[key] = st.Topology.of(self.cluster, t, ranks, p)
        return topo

    def least_sends(self, c: LayerCosts, t: int, ranks: int) -> tuple[float, float]:
        E, Bk, H = c.embedding, c.block, c.head
        key = (t, ranks, Bk.boundary_fwd_bytes, E.boundary_fwd_bytes, Bk.boundary_bwd_bytes, H.boundary_bwd_bytes,
               st.scatter_gather(c))  # what the sends depend on
        hit = self._sends.get(key)
        if hit is None:
            hit = self._sends[key] = st.least_sends_s(c, self.cluster, t, ranks)
        return hit

    def mb_floor(self, t: int, ranks: int, p: int, z: int, grads_total: float, rho: float) -> float:
        """``zero_microbatch_floor_s`` of 1/p of the model over ``ranks`` replicas (0 below ZeRO-2 or with one
        rank), cached with the syncs."""
        if z < 2 or ranks <= 1:
            return 0.0
        key = ("mb", t, ranks, p, z, grads_total, rho)
        out = self.sync.get(key)
        if out is None:
            out = self.sync[key] = zero_microbatch_floor_s(grads_total, rho, self.topo(t, ranks, p), z, p)
        return out

    def row(self, f, t: int, ranks: int, z: int, total: float, other: float, p_max: int) -> np.ndarray:
        """``f`` (``sync_of`` or ``mb_floor``) at p = 1 .. p_max as an array (p at index p - 1), cached with the
        syncs: ``_emit`` needs it at many p for each (setting, d, ZeRO stage)."""
        key = (f.__name__, t, ranks, z, total, other)
        out = self.sync.get(key)
        if out is None or len(out) < p_max:
            out = self.sync[key] = np.array([f(t, ranks, p, z, total, other) for p in range(1, p_max + 1)])
        return out

    def sync_of(self, t: int, ranks: int, p: int, z: int, grads_total: float, weights_total: float) -> float:
        """The gradient sync of 1/p of the model over ``ranks`` replicas."""
        key = (t, ranks, p, z, grads_total, weights_total)
        sync = self.sync.get(key)
        if sync is None:
            sync = self.sync[key] = float(st.dp_sync_s(grads_total / p, weights_total / p, self.topo(t, ranks, p), z))
        return sync


@dataclass
class _Counts:
    considered: int = 0
    mixed_considered: int = 0
    solved: int = 0
    mixed_solved: int = 0
    covered: float = 0.0
    min_need: float = math.inf  # the least per-device memory any combination needs (for the refusal)
    min_need_parts: tuple = (0.0, 0.0)  # its (static, activation) bytes per device
    seq_len: int = 0  # the sequence the settings were costed at


def enumerate_combinations(costs_by_setting: Mapping[TrainSetting, LayerCosts], L: int, B: int, N: int,
                           device: DeviceSpec, shared: _Shared, space: PlanSpace, counts: _Counts,
                           cutoff_s: float = math.inf) -> list[Combination]:
    """Every (setting, d, p, v, ZeRO stage) combination of ``space`` whose whole-model memory can fit and whose
    lower bound (``phaze.placement.bounds.lower_bound_s``) is below ``cutoff_s`` (the others cannot give a
    plan faster than it), with that bound; per-stage recompute groups only for p >= 2. ``counts`` counts
    every combination considered, cut off or not."""
    cap = device.hbm_bytes
    v_values, z_values, use_all_devices = space.interleaves(L), space.zero, space.use_all_devices
    per_stage_recompute = space.per_stage_recompute
    combos: list[Combination] = []
    for s, c, cb in combination_entries(costs_by_setting, per_stage_recompute, v_values):
        mixed = isinstance(c, dict)
        mbs, t, cp = s.microbatch_size, s.tp, s.cp
        if B % mbs:
            continue
        tot = st.model_totals(cb, L)
        traffic = least_traffic_bytes(c, L) if mixed else tot.optimizer_traffic_bytes
        act_total, with_sync = tot.activation_bytes, not mixed or same_memory(c)
        grads_total, weights_total = tot.sync_grad_bytes, tot.sync_weight_bytes
        rho = weight_per_grad(cb)
        for d in divisors(B // mbs):
            if t * cp * d > N:
                break
            if (t * cp * d) % (s.ep * s.etp):
                continue  # the experts fold over the t x cp x d devices of a stage
            m, r = B // (mbs * d), d * cp  # r: the ranks that hold the same weights
            if mixed:
                sends = [shared.least_sends(x, t, r) for x in c.values()]
                pf, pb = min(x[0] for x in sends), min(x[1] for x in sends)
            else:
                pf, pb = shared.least_sends(c, t, r)
            p_max = min(L + 2, N // (t * r))
            ps = np.arange(1, p_max + 1)
            if use_all_devices:
                ps = ps[ps * t * r == N]
            if not len(ps):
                continue
            at = _At(s, c, cb, d, m, t, r, L, pf, pb, traffic, device.hbm_Bps, grads_total, weights_total, rho)
            static = np.array([tot.sharded_static_bytes(z, r) for z in z_values])  # [ZeRO stage]
            if mixed:  # p >= 2 only
                _mixed_combinations(combos, counts, shared, at, z_values, ps, cap, static + act_total, v_values,
                                    with_sync, cutoff_s)
            else:
                _uniform_combinations(combos, counts, shared, at, z_values, ps, cap, static, act_total, v_values,
                                      cutoff_s)
    return combos


class _At(NamedTuple):
    """One (setting or per-stage group, d) of ``enumerate_combinations``: what its combinations' bounds need."""
    s: TrainSetting
    c: object  # the costs to solve with (LayerCosts, or {mode: LayerCosts})
    cb: LayerCosts  # the costs to bound with
    d: int
    m: int
    t: int
    r: int
    L: int
    pf: float
    pb: float
    traffic: float  # the whole model's optimizer-step HBM traffic (ZeRO shards it over the r ranks)
    hbm_Bps: float
    grads_total: float
    weights_total: float
    rho: float


_LEGAL: dict = {}  # per process: ``_legal_pairs`` by its arguments (a few hundred keys per model)
LEGAL_MAX_ENTRIES = 100_000


def _legal_pairs(ps: np.ndarray, m: int, L: int, v_values) -> np.ndarray:
    """[v, p]: which (p of ``ps``, consecutive integers, and v of ``v_values``) may be combined: any p at v = 1;
    v > 1 (interleaving) needs p >= 2, L divisible by p v and m by p. Cached: it depends on few numbers, shared by
    many combinations and searches (do not modify the array)."""
    key = (len(ps), int(ps[0]), m, L, tuple(v_values))
    out = _LEGAL.get(key)
    if out is None:
        if len(_LEGAL) >= LEGAL_MAX_ENTRIES:
            _LEGAL.clear()
        out = _LEGAL[key] = np.array([np.ones(len(ps), bool) if v == 1 else
                                      (ps >= 2) & (L % (ps * v) == 0) & (m % ps == 0) for v in v_values])
    return out


def _emit(combos: list, shared: _Shared, at: _At, z_values, zi: np.ndarray, pk: np.ndarray, vk: np.ndarray,
          with_sync: bool, cutoff_s: float) -> None:
    """Append the (ZeRO stage ``z_values[zi]``, p ``pk``, v ``vk``) triples of ``at`` whose lower bound is below
    ``cutoff_s``, in order (all ZeRO stages' bounds in one numpy evaluation)."""
    t, r = at.t, at.r
    p_max = int(pk.max())
    sync = mbc = 0.0
    if r > 1 and with_sync:
        sync = np.array([shared.row(shared.sync_of, t, r, z, at.grads_total, at.weights_total, p_max)[:p_max]
                         for z in z_values])[zi, pk - 1]
    if r > 1 and max(z_values) >= 2:
        mbc = np.array([shared.row(shared.mb_floor, t, r, z, at.grads_total, at.rho, p_max)[:p_max] if z >= 2
                        else np.zeros(p_max) for z in z_values])[zi, pk - 1]
    tr = np.array([at.traffic / r if z else at.traffic for z in z_values])[zi]
    lbs = np.atleast_1d(lower_bound_s(at.cb, at.L, pk, vk, at.m, at.pf, at.pb, tr, at.hbm_Bps, sync, mbc))
    keep = np.flatnonzero(lbs < cutoff_s)  # (a co-search's cutoff leaves few)
    zk = np.asarray(z_values)[zi]
    for z, p, v, lb in zip(zk[keep].tolist(), pk[keep].tolist(), vk[keep].tolist(), lbs[keep].tolist()):
        combos.append(Combination(lb, len(combos), at.s, at.c, at.d, p, v, z, at.m))


def _mixed_combinations(combos, counts, shared, at: _At, z_values, ps: np.ndarray, cap: float,
                        model_bytes: np.ndarray, v_values, with_sync: bool, cutoff_s: float) -> None:
    """``enumerate_combinations``' per-stage recompute combinations of ``at`` (a group of settings): every legal
    (ZeRO stage, p >= 2 of ``ps``, v) whose model memory (``model_bytes`` per ZeRO stage) can spread over p and
    whose bound is below ``cutoff_s``, by ZeRO stage, then v-major."""
    ps = ps[ps >= 2]
    if not len(ps):
        return
    legal = _legal_pairs(ps, at.m, at.L, v_values)
    counts.mixed_considered += int(legal.sum()) * len(z_values)
    keep = legal[None] & (model_bytes[:, None] / ps[None] <= cap)[:, None, :]  # [z, v, p]: memory spreads over p
    zi, vi, pi = np.nonzero(keep)  # by ZeRO stage, then v-major
    if len(pi):
        _emit(combos, shared, at, z_values, zi, ps[pi], np.asarray(v_values)[vi], with_sync, cutoff_s)


def _uniform_combinations(combos, counts, shared, at: _At, z_values, ps: np.ndarray, cap: float,
                          static: np.ndarray, act_total: float, v_values, cutoff_s: float) -> None:
    """``enumerate_combinations``' combinations of ``at`` (one setting, one recompute mode): every valid (ZeRO
    stage, p of ``ps``, v) whose bound is below ``cutoff_s``, by ZeRO stage, then p-major, with that bound (all at
    once, numpy). ``static``: the whole model's static bytes per ZeRO stage of ``z_values``."""
    L, m = at.L, at.m
    tied = np.array([st.tied_static_bytes(at.cb, z, at.r) for z in z_values])
    need = (static[:, None] - np.where(ps == 1, tied[:, None], 0.0) + act_total) / ps  # [z, p]
    valid = _legal_pairs(ps, m, L, v_values)
    n_valid = int(valid.sum())
    if not n_valid:
        return
    counts.considered += n_valid * len(z_values)
    on = valid.any(axis=0)
    least = np.where(on, need, np.inf)
    zk, k = np.unravel_index(int(np.argmin(least)), least.shape)  # the first (ZeRO stage, p) of the least need
    if need[zk, k] < counts.min_need:
        n = need[zk, k]
        counts.min_need, counts.min_need_parts = float(n), ((n * ps[k] - act_total) / ps[k], act_total / ps[k])
        counts.seq_len = at.s.seq_len
    keep = valid[None] & (need <= cap)[:, None, :]  # [z, v, p]: the whole model's memory can spread over p
    zi, pi, vi = np.nonzero(keep.transpose(0, 2, 1))  # by ZeRO stage, then p-major
    if len(pi):
        _emit(combos, shared, at, z_values, zi, ps[pi], np.asarray(v_values)[vi], True, cutoff_s)


def solve_combination(k: Combination, L: int, B: int, cluster: Cluster, device: DeviceSpec, shared: _Shared,
                      cutoff_s: float, counts: _Counts) -> Candidate | None:
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


def nothing_fits_reason(counts: _Counts, B: int, N: int, cap: float, space: PlanSpace | None = None) -> str:
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
    shared, counts = _Shared(cluster, device_rows), _Counts()
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
