"""The plan search's combinations: every (setting, d, p, v, ZeRO stage) of a plan space that can fit, with the lower
bound (``placement.bounds.lower_bound_s``) the search visits them by (``optimizer.best_plans_from_costs``), and
what the combinations of one search share (topologies, sends, syncs, stage rows, evaluations).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import numpy as np

from phaze.hardware.cluster import Cluster
from phaze.placement import stage as st
from phaze.placement.bounds import (combination_entries, divisors, least_traffic_bytes, lower_bound_s, same_memory,
                                   weight_per_grad, zero_microbatch_floor_s)
from phaze.placement.evaluation import DeviceSpec
from phaze.placement.layer_costs import LayerCosts
from phaze.workload.runtime import PlanSpace, TrainSetting


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


class SearchShared:
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
class SearchCounts:
    considered: int = 0
    mixed_considered: int = 0
    solved: int = 0
    mixed_solved: int = 0
    covered: float = 0.0
    min_need: float = math.inf  # the least per-device memory any combination needs (for the refusal)
    min_need_parts: tuple = (0.0, 0.0)  # its (static, activation) bytes per device
    seq_len: int = 0  # the sequence the settings were costed at


def enumerate_combinations(costs_by_setting: Mapping[TrainSetting, LayerCosts], L: int, B: int, N: int,
                           device: DeviceSpec, shared: SearchShared, space: PlanSpace, counts: SearchCounts,
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


def _emit(combos: list, shared: SearchShared, at: _At, z_values, zi: np.ndarray, pk: np.ndarray, vk: np.ndarray,
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
