"""Vectorized bounds over every candidate chip at once: layer-time bounds and a throughput upper bound.

For each model and setting, ``phaze.schedule.layer_time_bounds`` gives lower/upper bounds on each layer
kind's forward and backward time for all chips. A throughput upper bound per (chip, HBM size) follows
from the lower bounds: for any plan with p stages, m microbatches and per-microbatch compute S,
1F1B iteration >= S' * (1 + (m - 1) / p) + optimizer traffic / (p * HBM bandwidth), with
S' = S + (p - 1) * (least p2p forward + backward); the same bound the placement optimizer prunes with
(``phaze.placement``), taken over every (d, p) whose whole-model memory fits p devices.

The full plan space (``SearchSpec.plan_space_name`` "full") adds to each (d, p): every interleaving v Megatron
takes (bubble / v, p v - 1 boundaries), the most sharded ZeRO stage's floors (its optimizer step, sync and
memory are each the least over the stages searched), and per-stage recompute: the settings that differ only in
recompute form one plan unit (``ModelBounds.units``), bounded for p >= 2 by the least time and memory of each
layer over its modes (``phaze.placement.bounds.floor_costs``, as placement bounds such a combination).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.cluster import Cluster
from phaze.placement import stage as st
from phaze.placement.best_first import plan_units
from phaze.placement.bounds import floor_costs, plan_floor_s
from phaze.placement.layer_costs import LayerCosts, layer_costs_from_times
from phaze.search.candidate_columns import Columns, NetworkCandidates, distinct_columns, network_columns, tier_key
from phaze.schedule import layer_time_bounds
from phaze.search.spec import SearchSpec
from phaze.units import GiB
from phaze.workload.config import DIRECTIONS, LAYER_KINDS, ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import layer_graph

KINDS = LAYER_KINDS
SLOTS = tuple((k, d) for k in KINDS for d in DIRECTIONS)  # the 6 layer-time slots, in this order


def memory_costs(model: ModelConfig, setting: TrainSetting, optimizer: str = "adam") -> LayerCosts:
    """LayerCosts of ``setting`` with the memory of each layer kind and zero times."""
    return layer_costs_from_times(model, setting, {}, optimizer, "scheduled")


def with_times(c: LayerCosts, times: np.ndarray) -> LayerCosts:
    """``c`` with the 6 slot times of ``times`` (order: SLOTS)."""
    t = dict(zip(SLOTS, (float(x) for x in times)))
    return replace(c, embedding=replace(c.embedding, fwd_s=t[("embedding", "fwd")], bwd_s=t[("embedding", "bwd")]),
                   block=replace(c.block, fwd_s=t[("block", "fwd")], bwd_s=t[("block", "bwd")]),
                   head=replace(c.head, fwd_s=t[("head", "fwd")], bwd_s=t[("head", "bwd")]))


@dataclass(frozen=True)
class ModelBounds:
    """Per model: its settings, their memory-only costs, and lower/upper layer times [setting, slot, column]:
    a column per candidate, or with a network axis per chip and class of networks (``column``)."""

    model: ModelConfig
    settings: tuple[TrainSetting, ...]
    memory: tuple[LayerCosts, ...]
    lower_s: np.ndarray
    upper_s: np.ndarray
    # [unit, hbm, chip]: sequences/s no plan of this unit of settings on this chip can beat; a unit is one
    # setting in the paper's plan space (so the index is the setting's), the settings differing only in
    # recompute in the full one (``units``)
    setting_ub: np.ndarray
    units: tuple[tuple[int, ...], ...] = ()  # setting indices per unit (empty: each setting its own unit)
    # [candidate] -> its column of lower_s / upper_s (``candidate_columns.network_columns``); None: its own
    column: np.ndarray | None = None

    @property
    def throughput_ub(self) -> np.ndarray:
        """[hbm, chip]: sequences/s no plan of this chip can beat."""
        return self.setting_ub.max(axis=0)

    def times(self, candidate: int) -> tuple[np.ndarray, np.ndarray]:
        """The candidate's lower and upper layer times [setting, slot]."""
        k = candidate if self.column is None else int(self.column[candidate])
        return self.lower_s[:, :, k], self.upper_s[:, :, k]


# Rounding slack of the split bound below. A block count x = (U - c) / b computed at a breakpoint U = k b + c
# can come out as k - 1e-15 (float64); adding 1e-9 blocks before the floor counts it as k. Counting one block
# more than fits can only lower U, so the result stays a lower bound. FLOOR_RTOL does the same for U = max(e, h).
BREAKPOINT_SLACK = 1e-9
FLOOR_RTOL = 1e-12


def min_bottleneck_s(e: np.ndarray, b: np.ndarray, h: np.ndarray, L: int, p: int) -> np.ndarray:
    """Least possible max stage compute time over every split of embedding (e), L blocks (b each) and head
    (h) into p contiguous stages, ignoring memory (so a lower bound on max_i T_i), for many chips at once.
    Stage 0 holds the embedding, stage p-1 the head; at bound U they take floor((U-e)/b), floor((U-h)/b)
    and floor(U/b) blocks each. The least feasible U is a breakpoint k*b + c, c in {0, e, h}, and for each
    c the least k has a closed form (the block count at U = k*b + c is p*k plus a constant); a few steps
    of the exact float test then settle rounding at the breakpoints, so the answer is the least k the
    float test accepts, the same as a binary search on k (kept as ``_min_bottleneck_bisect_s``)."""
    if p == 1:
        return e + L * b + h
    floor_u, k_hi, fits = _bracket(e, b, h, L, p)
    best = np.full_like(b, np.inf)
    # block count at U = k b + c (exact arithmetic): c = 0: p k - ceil(e/b) - ceil(h/b); c = e:
    # p k + floor((e-h)/b) + (p-2) floor(e/b); c = h: the same with e and h swapped
    for c, const in ((np.zeros_like(b), np.floor(-e / b) + np.floor(-h / b)),
                     (e, np.floor((e - h) / b) + (p - 2) * np.floor(e / b)),
                     (h, np.floor((h - e) / b) + (p - 2) * np.floor(h / b))):
        k = np.maximum(np.ceil((L - const) / p), np.ceil((floor_u - c) / b))
        k = np.clip(k, 0, k_hi)
        todo = np.arange(len(b))  # chips whose k is not yet known to be the least accepted
        for _ in range(3):  # float rounding at a breakpoint moves the answer by a block at most (2 spare steps)
            kt, ct, bt = k[todo], c[todo], b[todo]
            sub = _fits(e[todo], bt, h[todo], L, p, floor_u[todo]) if len(todo) < len(b) else fits
            ok, below = sub(kt * bt + ct), sub(np.maximum(kt - 1, 0) * bt + ct)
            least = ((kt == k_hi[todo]) | ok) & ((kt == 0) | ~below)
            k[todo] = np.where(least, kt, np.where(ok, kt - 1, kt + 1))
            todo = todo[~least]
            if not len(todo):
                break
        if len(todo):  # not settled in three steps (never seen): the binary search for those chips
            k[todo] = _least_k(_fits(e[todo], b[todo], h[todo], L, p, floor_u[todo]), b[todo], c[todo], k_hi[todo])
        best = np.minimum(best, k * b + c)
    return best


def _bracket(e, b, h, L, p):
    """What both searches for the least U start from (per chip): the floor max(e, h) no stage bound goes
    below, a k whose U = k*b + c surely fits, and the fits test."""
    floor_u = np.maximum(e, h)
    return floor_u, L + np.ceil(floor_u / b) + 1, _fits(e, b, h, L, p, floor_u)


def _fits(e, b, h, L, p, floor_u):
    """U -> whether p stages of at most U hold the embedding, L blocks and the head (per chip), counting
    blocks with the rounding slack below."""
    def blocks(x):  # floor, forgiving rounding at the breakpoints themselves (errs low: the bound stays valid)
        return np.floor(x + BREAKPOINT_SLACK)

    def fits(U):
        return ((blocks((U - e) / b) + blocks((U - h) / b) + (p - 2) * blocks(U / b) >= L)
                & (U >= floor_u * (1 - FLOOR_RTOL)))
    return fits


def _least_k(fits, b, c, k_hi):
    """Least k in [0, k_hi] with fits(k*b + c) (k_hi when none below it), by binary search per chip."""
    lo, hi = np.zeros_like(b), k_hi.copy()  # invariant: fits(hi*b + c), not fits((lo-1)*b + c)
    while np.any(lo < hi):
        mid = np.floor((lo + hi) / 2)
        ok = fits(mid * b + c)
        hi = np.where(ok & (lo < hi), mid, hi)
        lo = np.where(~ok & (lo < hi), mid + 1, lo)
    return hi


def _min_bottleneck_bisect_s(e: np.ndarray, b: np.ndarray, h: np.ndarray, L: int, p: int) -> np.ndarray:
    """``min_bottleneck_s`` by binary search on k for each c (the reference the closed form is tested on)."""
    if p == 1:
        return e + L * b + h
    _, k_hi, fits = _bracket(e, b, h, L, p)
    best = np.full_like(b, np.inf)
    for c in (np.zeros_like(b), e, h):
        best = np.minimum(best, _least_k(fits, b, c, k_hi) * b + c)
    return best


def least_max_stage_bytes(e: float, b: float, h: float, L: int, p: int) -> float:
    """Least possible max over stages of a per-layer quantity (e.g. gradient bytes: e for the embedding, b
    per block, h for the head) over every split into p contiguous stages: some stage always holds at
    least this much, so its gradient sync takes at least the sync of this many bytes."""
    one = lambda x: np.array([float(x)])  # noqa: E731 (reuse the vectorized split bound on one "chip")
    if b <= 0:
        return max(e, h) if p > 1 else e + h
    return float(min_bottleneck_s(one(e), one(b), one(h), L, p)[0])


@dataclass(frozen=True)
class _Row:
    """One feasible (d, p) of a setting: its microbatch count and the chip-independent terms."""

    p: int
    m: int
    send_s: float  # least p2p time a microbatch adds to sum T (over p - 1 boundaries)
    opt_s: float  # optimizer step of the stage with the most parameters (>= 1/p of them)
    sync_s: float | None  # gradient sync of the stage with the most gradients (None: d = 1)
    need_bytes: float = 0.0  # the whole model's memory over p devices: the row needs at least this HBM
    v: int = 1  # interleaving (virtual stages per device)
    # ZeRO-2/3 rows: a floor on max T, the reduce-scatter of the gradients of the stage with the most of them
    # that every microbatch's backward starts (``stage.exposed_microbatch_comm_s`` leaves T >= that transfer)
    mb_comm_s: float = 0.0


def _bound_rows(c: LayerCosts, model: ModelConfig, spec: SearchSpec, cluster: Cluster, cap_bytes: float,
                hbm_Bps: float, min_p: int = 1, max_p: int | None = None) -> list[_Row]:
    """Every (d, p) of one setting whose whole-model memory fits p devices, with its chip-independent terms
    (a smaller ``cap_bytes`` keeps a subset: the rows whose ``need_bytes`` it holds). The full plan space adds
    a row per interleaving v > 1 Megatron takes (p >= 2, L divisible by p v, m by p) and splits the ZeRO
    stages searched into two rows: stages 0-1 and stages 2-3, each with the least memory, optimizer step and
    sync over its stages, the second also with the per-microbatch reduce-scatter as a floor on max T (without
    it ZeRO-3's zero step-end sync would make every row as loose as a free network). ``min_p``, ``max_p``: leave
    out smaller, larger p."""
    s = c.setting
    L, B, N, t, mbs = model.num_layers, spec.global_batch, spec.devices, s.tp, s.microbatch_size
    space = spec.plan_space_for(model)
    zs, vs = (space.zero, space.interleaves(L)) if not spec.paper else ((0,), (1,))
    classes = [k for k in ((z for z in zs if z < 2), (z for z in zs if z >= 2)) for k in [tuple(k)] if k]
    tot = st.model_totals(c, L)
    act, traffic, grads = tot.activation_bytes, tot.optimizer_traffic_bytes, tot.sync_grad_bytes
    # weight bytes per gradient byte, the least over the layer kinds: a stage's weights are at least this
    # times its gradients (both are sums over its layers)
    rho = min((x.weight_bytes / x.grad_bytes for x in (c.embedding, c.block, c.head) if x.grad_bytes > 0),
              default=0.0)
    rows = []
    most_grads: dict[int, float] = {}
    for d in range(1, B // mbs + 1):
        if (B // mbs) % d:
            continue
        if t * d > N:
            break
        m = B // (mbs * d)
        pf, pb = st.least_sends_s(c, cluster, t, d)
        for p in range(max(1, min_p), min(L + 2, N // (t * d), max_p or L + 2) + 1):
            topo = None
            for zc in classes:
                need = min((tot.sharded_static_bytes(z, d) - (st.tied_static_bytes(c, z, d) if p == 1 else 0.0)
                            + act) / p for z in zc)
                if need > cap_bytes:
                    continue
                sync, mb_comm = None, 0.0
                if d > 1:
                    if p not in most_grads:
                        most_grads[p] = max(grads / p, least_max_stage_bytes(c.embedding.grad_bytes,
                                                                             c.block.grad_bytes, c.head.grad_bytes, L, p))
                    topo = topo or st.Topology.of(cluster, t, d, p)
                    # that stage's weights (ZeRO-1/2 all-gather them after the step): >= rho x its gradients
                    w = rho * most_grads[p] if max(zc) >= 1 else 0.0
                    sync = min(float(st.dp_sync_s(most_grads[p], w, topo, z)) for z in zc)
                    if min(zc) >= 2:
                        mb_comm = float(st.microbatch_comm_s(most_grads[p], 0.0, topo, 2)[1])
                # ZeRO >= 1 divides the optimizer step over the d ranks (placement's combination bound)
                opt = traffic / p / hbm_Bps / (d if max(zc) >= 1 else 1)
                for v in vs:
                    if v > 1 and (p < 2 or L % (p * v) or m % p):
                        continue
                    rows.append(_Row(p, m, (p * v - 1) * (pf + pb), opt, sync, need, v, mb_comm))
    return rows


def iteration_lower_bound_s(rows: list[_Row], S: np.ndarray, U: dict[int, np.ndarray]) -> np.ndarray:
    """Least 1F1B iteration time any plan of these rows can reach, per chip.

    Placement's own plan bound (``phaze.placement.bounds.plan_floor_s``) with sum T >= S' = S + sends and
    max T >= M = max(S'/p, U*_p) (``min_bottleneck_s``, tighter than placement's S'/p): iteration >=
    S' + (m-1) M + opt and >= S' + (m-2) M + sync + opt (m = 1: >= sync + opt). The sync is that of the
    stage with the most gradients, which holds at least
    1/p of the gradients and at least the least max-stage share of any split (``least_max_stage_bytes``:
    the embedding or head stage of a deep pipeline holds more than 1/p)."""
    best = np.full_like(S, np.inf)
    for r in rows:
        best = np.minimum(best, _row_floor_s(r, S, U))
    return best


def _row_floor_s(r: _Row, S: np.ndarray, U: dict) -> np.ndarray:
    """``iteration_lower_bound_s`` of one row. An interleaved row (v > 1) takes its max T from ``U[(p, v)]``
    (``bottleneck_s``)."""
    Sp = S + r.send_s
    M = np.maximum(Sp / r.p, U[r.p] if r.v == 1 else U[(r.p, r.v)])
    if r.mb_comm_s > 0:  # max T >= the transfer, and sum T >= max T (what counts when m = 1)
        M = np.maximum(M, r.mb_comm_s)
        Sp = np.maximum(Sp, M)
    return plan_floor_s(Sp, M, r.opt_s, 0.0 if r.sync_s is None else r.sync_s, r.m, r.v)


def bottleneck_s(e: np.ndarray, b: np.ndarray, h: np.ndarray, L: int, p: int, v: int = 1) -> np.ndarray:
    """A floor on max T over the p pipeline devices: ``min_bottleneck_s`` (every contiguous split); with
    interleaving v > 1 the partition is Megatron's fixed one (L / (p v) blocks per virtual stage), so the first
    device holds the embedding and L / p blocks and the last the head and L / p blocks (an assignment that is
    also a contiguous split's, so ``min_bottleneck_s`` stays below it too)."""
    U = min_bottleneck_s(e, b, h, L, p)
    if v > 1:
        U = np.maximum(U, (L // p) * b + np.maximum(e, h))
    return U


def setting_bounds(model: ModelConfig, spec: SearchSpec, setting: TrainSetting, arch: ArchArrays,
                   cluster: Cluster, memo: dict | None = None,
                   max_p: int | None = None) -> tuple[np.ndarray, np.ndarray, LayerCosts, np.ndarray]:
    """One setting on every chip: lower and upper layer times [slot, chip], the memory-only LayerCosts, and
    the throughput upper bound [hbm, chip] (of its plans with at most ``max_p`` stages when given).
    Independent per setting, so settings can run in parallel. ``memo``: op costs shared with other settings on
    the same ``arch`` (``layer_time_bounds``)."""
    tier = cluster.tier_for_group(setting.tp) if setting.tp > 1 else cluster.tiers[0]
    lower, upper = _layer_bounds(model, setting, arch, tier, memo)
    c = memory_costs(model, setting, spec.optimizer)
    return lower, upper, c, throughput_bound(model, spec, c, lower, arch, cluster, max_p=max_p)


def setting_bounds_networks(model: ModelConfig, spec: SearchSpec, setting: TrainSetting, net: NetworkCandidates,
                            memo: dict, max_p: int | None = None, cols: Columns | None = None):
    """``setting_bounds`` of (chip, network) candidates (``net``). Layer times [slot, column] (``cols``, by
    default ``model_columns``): each column's networks', once per distinct tier the setting's tensor-parallel
    collectives cross (the chips' compute ops costed once, ``memo``). Throughput bound [hbm, candidate]: each
    chip's on ``net.fastest``, a network at least as fast as every choice
    (``phaze.hardware.chip_network.at_least_as_fast``: no plan is slower on it), so an upper bound for the chip on
    any of its networks; a bound of a slower network is never used for a faster one. Each candidate's exact
    evaluation then bounds and plans on its own network (``exact``)."""
    cols = model_columns(model, spec, net) if cols is None else cols
    base, clusters = net.base, net.clusters
    lower, upper = np.zeros((len(SLOTS), len(cols.chip))), np.zeros((len(SLOTS), len(cols.chip)))
    tiers = [cl.tier_for_group(setting.tp) if setting.tp > 1 else cl.tiers[0] for cl in clusters]
    classes: dict = {}
    for k, t in enumerate(tiers):
        classes.setdefault(tier_key(t) if setting.tp > 1 else None, []).append(k)
    layer_lo = {}
    for key, ks in classes.items():
        idx = np.flatnonzero(np.isin(cols.network, ks))
        lo, up = _layer_bounds(model, setting, base, tiers[ks[0]], memo)
        layer_lo[key] = lo
        lower[:, idx], upper[:, idx] = lo[:, cols.chip[idx]], up[:, cols.chip[idx]]
    fast = net.fastest.tier_for_group(setting.tp) if setting.tp > 1 else None
    key = None if fast is None else tier_key(fast)
    if key in classes:  # the fastest network's tier is one of the choices' (always at t = 1): its times again
        lo = layer_lo[key]
    else:
        lo, _ = _layer_bounds(model, setting, base, fast, memo)
    c = memory_costs(model, setting, spec.optimizer)
    return lower, upper, c, throughput_bound(model, spec, c, lo, base, net.fastest, max_p=max_p)[:, net.chip_index]


def model_columns(model: ModelConfig, spec: SearchSpec, net: NetworkCandidates) -> Columns:
    """The columns of ``net``'s candidates for the tensor-parallel widths of ``model``'s settings."""
    return network_columns(net, {s.tp for s in spec.settings(model)})


def _layer_bounds(model, setting, arch, tier, memo):
    """Lower and upper layer times [slot, chip] of one setting with its tensor-parallel collectives on ``tier``."""
    lo, up = np.zeros((len(SLOTS), len(arch))), np.zeros((len(SLOTS), len(arch)))
    for j, (kind, direction) in enumerate(SLOTS):
        lo[j], up[j] = layer_time_bounds(layer_graph(model, setting, kind, direction), arch, tier, memo)
    return lo, up


def throughput_bound(model: ModelConfig, spec: SearchSpec, c: LayerCosts, lower: np.ndarray, arch: ArchArrays,
                     cluster: Cluster, min_p: int = 1, max_p: int | None = None) -> np.ndarray:
    """[hbm, chip]: sequences/s no plan with layer times >= ``lower`` [slot, chip] and memory >= ``c``'s can
    beat, over every row of ``_bound_rows`` (``min_p`` <= p <= ``max_p``)."""
    n = lower.shape[1]
    L = model.num_layers
    hbm_Bps = float(arch.hbm_bandwidth_Bps[0] * arch.memory_efficiency[0])
    e, b, h = lower[0] + lower[1], lower[2] + lower[3], lower[4] + lower[5]
    S = e + L * b + h  # compute per microbatch at the lower bounds
    U: dict = {}
    tput = np.zeros((len(spec.hbm_gib), n))
    # a smaller HBM's rows are a subset of a larger one's: each row's floor is computed once, and the HBM
    # sizes, smallest first, take the running minimum over the rows each one adds (iteration_lower_bound_s
    # of each size's rows, the same values: a minimum does not depend on the order it is taken in)
    rows = sorted(_bound_rows(c, model, spec, cluster, max(spec.hbm_gib) * GiB, hbm_Bps, min_p, max_p),
                  key=lambda r: r.need_bytes)
    best, k = np.full(n, np.inf), 0
    for hh in sorted(range(len(spec.hbm_gib)), key=lambda hh: spec.hbm_gib[hh]):
        cap = spec.hbm_gib[hh] * GiB
        while k < len(rows) and rows[k].need_bytes <= cap:
            r = rows[k]
            if r.p not in U:
                U[r.p] = min_bottleneck_s(e, b, h, L, r.p)
            if r.v > 1 and (r.p, r.v) not in U:
                U[(r.p, r.v)] = bottleneck_s(e, b, h, L, r.p, r.v)
            best = np.minimum(best, _row_floor_s(r, S, U))
            k += 1
        if k:
            tput[hh] = spec.global_batch / best
    return tput


def unit_bound(model: ModelConfig, spec: SearchSpec, parts: list[tuple], arch: ArchArrays,
               cluster: Cluster, net: NetworkCandidates | None = None, cols: Columns | None = None) -> np.ndarray:
    """[hbm, chip] throughput bound of a plan unit from its settings' ``setting_bounds`` (``parts``): the
    largest of theirs (every plan of one mode; with >= 2 modes they need cover p = 1 only) and, with >= 2
    modes, the bound of a pipeline whose stages may each use any of them (p >= 2), from each layer's least
    lower time and least memory over the modes (above each mode's own bound at every p >= 2: its rows are a
    superset, each no higher). ``net``: (chip, network) candidates, whose lower times are each on its own
    network, stored per column (``cols``): their pipeline bound is taken on ``net.fastest`` (no plan is slower
    on it, so still an upper bound; ``arch`` and ``cluster`` unused)."""
    best = np.max([x[3] for x in parts], axis=0)
    if len(parts) < 2:
        return best
    lower = np.min([x[0] for x in parts], axis=0)
    floor = floor_costs({x[2].setting.recompute: x[2] for x in parts})
    if net is not None:
        arch, cluster = net.base, net.fastest  # arch: the HBM bandwidth only, the same for every chip
        cols = model_columns(model, spec, net) if cols is None else cols
        lower, back = distinct_columns(lower, cols.chip)  # lower: [slot, column]
        tput = throughput_bound(model, spec, floor, lower, arch, cluster, min_p=2)
        return np.maximum(best, tput[:, back[cols.of]])
    return np.maximum(best, throughput_bound(model, spec, floor, lower, arch, cluster, min_p=2))


def group_bounds(model: ModelConfig, spec: SearchSpec, settings: tuple[TrainSetting, ...], arch: ArchArrays,
                 cluster: Cluster, max_p: int | None = None, net: NetworkCandidates | None = None,
                 cols: Columns | None = None) -> list[tuple]:
    """``setting_bounds`` of several settings with one op-cost memo: settings that differ only in recompute
    share most of their ops (a recomputing backward pass repeats the forward's), so each is costed once.
    ``net``: the candidates are (chip, network) pairs (``setting_bounds_networks``; ``cols``: their columns,
    by default ``model_columns``)."""
    memo: dict = {}
    if net is not None:
        cols = model_columns(model, spec, net) if cols is None else cols
        return [setting_bounds_networks(model, spec, s, net, memo, max_p, cols) for s in settings]
    return [setting_bounds(model, spec, s, arch, cluster, memo, max_p) for s in settings]


def group_unit_bounds(model: ModelConfig, spec: SearchSpec, settings: tuple[TrainSetting, ...], arch: ArchArrays,
                      cluster: Cluster, net: NetworkCandidates | None = None) -> tuple[list[tuple], list[np.ndarray]]:
    """``group_bounds`` of settings of one (microbatch, t), and the throughput bound of each of their plan units
    (``plan_units``, ``unit_bound``), in the units' order. With units of several modes each setting's own bound
    covers p = 1 only: the unit's bound from its floor costs (p >= 2) is above the settings' there. ``net``:
    (chip, network) candidates (``setting_bounds_networks``). Each setting's part comes back without its own
    throughput bound (None in its place): the units' bounds hold what is needed of it, and from a worker it
    would be 12 x 3 x 558,084 floats (160 MB) to send back for the demo's settings. With ``net`` the units'
    bounds are [hbm, column] (``model_columns``; ``model_bounds`` maps them to the candidates)."""
    units = plan_units(settings, spec.plan_space_for(model).per_stage_recompute and not spec.paper)
    cols = model_columns(model, spec, net) if net is not None else None
    parts = group_bounds(model, spec, settings, arch, cluster, 1 if any(len(u) > 1 for u in units) else None, net,
                         cols)
    ubs = [unit_bound(model, spec, [parts[i] for i in u], arch, cluster, net, cols) for u in units]
    if cols is not None:  # a unit's bound is the same for every candidate of a column: one per column
        _, first = np.unique(cols.of, return_index=True)
        ubs = [ub[:, first] for ub in ubs]
    return [p[:3] + (None,) for p in parts], ubs


def model_bounds(model: ModelConfig, spec: SearchSpec, arch: ArchArrays, cluster: Cluster,
                 executor=None, on_setting=None, net: NetworkCandidates | None = None) -> ModelBounds:
    """Layer-time bounds and the throughput upper bound of every chip for one model (vectorized over chips;
    settings spread over ``executor`` when given, those with one (microbatch, t) together so that they share
    their op costs). ``on_setting()`` is called as each setting finishes. ``net``: the candidates are (chip,
    network) pairs, each bounded on its own network (``arch`` and ``cluster`` unused)."""
    settings = spec.settings(model)
    groups: dict[tuple[int, int], list[TrainSetting]] = {}
    for s in settings:
        groups.setdefault((s.microbatch_size, s.tp), []).append(s)
    args = [(model, spec, tuple(g), arch, cluster, net) for g in groups.values()]
    tick = on_setting or (lambda: None)
    done: dict[TrainSetting, tuple] = {}
    unit_ub: dict[tuple[TrainSetting, ...], np.ndarray] = {}

    def take(a, result) -> None:
        parts, ubs = result
        done.update(zip(a[2], parts))
        units = plan_units(a[2], spec.plan_space_for(model).per_stage_recompute and not spec.paper)
        unit_ub.update({tuple(a[2][i] for i in u): ub for u, ub in zip(units, ubs)})
        for _ in a[2]:
            tick()

    if executor is None:
        for a in args:
            take(a, group_unit_bounds(*a))
    else:
        for a, f in [(a, executor.submit(group_unit_bounds, *a)) for a in args]:
            take(a, f.result())
    parts = [done[s] for s in settings]
    index = {s: i for i, s in enumerate(settings)}
    units = tuple(sorted((tuple(index[s] for s in u) for u in unit_ub), key=lambda u: u[0]))
    ub = np.stack([unit_ub[tuple(settings[i] for i in u)] for u in units])
    column = None if net is None else model_columns(model, spec, net).of
    if column is not None:
        ub = ub[:, :, column]  # [unit, hbm, column] -> [unit, hbm, candidate]
    return ModelBounds(model, settings, tuple(p[2] for p in parts), np.stack([p[0] for p in parts]),
                       np.stack([p[1] for p in parts]), ub, units, column)
