"""Vectorized bounds over every candidate chip at once: layer-time bounds and a throughput upper bound.

For each model and setting, ``phaze.schedule.layer_time_bounds`` gives lower/upper bounds on each layer
kind's forward and backward time for all chips. A throughput upper bound per (chip, HBM size) follows
from the lower bounds: for any plan with p stages, m microbatches and per-microbatch compute S,
1F1B iteration >= S' * (1 + (m - 1) / p) + optimizer traffic / (p * HBM bandwidth), with
S' = S + (p - 1) * (least p2p forward + backward); the same bound the placement optimizer prunes with
(``phaze.placement``), taken over every (d, p) whose whole-model memory fits p devices.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.cluster import Cluster
from phaze.placement import stage as st
from phaze.placement.bounds import plan_floor_s
from phaze.placement.layer_costs import LayerCosts, layer_costs_from_times
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
    from dataclasses import replace
    t = dict(zip(SLOTS, (float(x) for x in times)))
    return replace(c, embedding=replace(c.embedding, fwd_s=t[("embedding", "fwd")], bwd_s=t[("embedding", "bwd")]),
                   block=replace(c.block, fwd_s=t[("block", "fwd")], bwd_s=t[("block", "bwd")]),
                   head=replace(c.head, fwd_s=t[("head", "fwd")], bwd_s=t[("head", "bwd")]))


@dataclass(frozen=True)
class ModelBounds:
    """Per model: its settings, their memory-only costs, and lower/upper layer times [setting, slot, chip]."""

    model: ModelConfig
    settings: tuple[TrainSetting, ...]
    memory: tuple[LayerCosts, ...]
    lower_s: np.ndarray
    upper_s: np.ndarray
    setting_ub: np.ndarray  # [setting, hbm, chip]: sequences/s no plan of this setting on this chip can beat

    @property
    def throughput_ub(self) -> np.ndarray:
        """[hbm, chip]: sequences/s no plan of this chip can beat."""
        return self.setting_ub.max(axis=0)


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


def _bound_rows(c: LayerCosts, model: ModelConfig, spec: SearchSpec, cluster: Cluster, cap_bytes: float,
                hbm_Bps: float) -> list[_Row]:
    """Every (d, p) of one setting whose whole-model memory fits p devices, with its chip-independent terms
    (a smaller ``cap_bytes`` keeps a subset: the rows whose ``need_bytes`` it holds)."""
    s = c.setting
    L, B, N, t, mbs = model.num_layers, spec.global_batch, spec.devices, s.tp, s.microbatch_size
    tot = st.model_totals(c, L)
    static, act, traffic, grads = (tot.static_bytes(), tot.activation_bytes, tot.optimizer_traffic_bytes,
                                   tot.sync_grad_bytes)
    rows = []
    most_grads: dict[int, float] = {}
    for d in range(1, B // mbs + 1):
        if (B // mbs) % d:
            continue
        if t * d > N:
            break
        pf, pb = st.least_sends_s(c, cluster, t, d)
        for p in range(1, min(L + 2, N // (t * d)) + 1):
            need = (static - (st.tied_static_bytes(c) if p == 1 else 0.0) + act) / p
            if need > cap_bytes:
                continue
            sync = None
            if d > 1:
                if p not in most_grads:
                    most_grads[p] = max(grads / p, least_max_stage_bytes(c.embedding.grad_bytes, c.block.grad_bytes,
                                                                         c.head.grad_bytes, L, p))
                sync = float(st.dp_sync_s(most_grads[p], 0.0, st.Topology.of(cluster, t, d, p), False))
            rows.append(_Row(p, B // (mbs * d), (p - 1) * (pf + pb), traffic / p / hbm_Bps, sync, need))
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


def _row_floor_s(r: _Row, S: np.ndarray, U: dict[int, np.ndarray]) -> np.ndarray:
    """``iteration_lower_bound_s`` of one row."""
    Sp = S + r.send_s
    M = np.maximum(Sp / r.p, U[r.p])
    return plan_floor_s(Sp, M, r.opt_s, 0.0 if r.sync_s is None else r.sync_s, r.m)


def setting_bounds(model: ModelConfig, spec: SearchSpec, setting: TrainSetting, arch: ArchArrays,
                   cluster: Cluster, memo: dict | None = None) -> tuple[np.ndarray, np.ndarray, LayerCosts, np.ndarray]:
    """One setting on every chip: lower and upper layer times [slot, chip], the memory-only LayerCosts, and
    the throughput upper bound [hbm, chip]. Independent per setting, so settings can run in parallel.
    ``memo``: op costs shared with other settings on the same ``arch`` (``layer_time_bounds``)."""
    n = len(arch)
    lower, upper = np.zeros((len(SLOTS), n)), np.zeros((len(SLOTS), n))
    tier = cluster.tier_for_group(setting.tp) if setting.tp > 1 else cluster.tiers[0]
    for j, (kind, direction) in enumerate(SLOTS):
        lower[j], upper[j] = layer_time_bounds(layer_graph(model, setting, kind, direction), arch, tier, memo)
    c, tput = _plan_bounds(model, spec, setting, arch, cluster, lower)
    return lower, upper, c, tput


def _plan_bounds(model, spec, setting, arch, cluster, lower):
    """The memory-only LayerCosts and the throughput upper bound [hbm, chip] of one setting from its lower
    layer times [slot, chip] on ``cluster``."""
    n = len(arch)
    c = memory_costs(model, setting, spec.optimizer)
    L = model.num_layers
    hbm_Bps = float(arch.hbm_bandwidth_Bps[0] * arch.memory_efficiency[0])
    e, b, h = lower[0] + lower[1], lower[2] + lower[3], lower[4] + lower[5]
    S = e + L * b + h  # compute per microbatch at the lower bounds
    U: dict[int, np.ndarray] = {}
    tput = np.zeros((len(spec.hbm_gib), n))
    # a smaller HBM's rows are a subset of a larger one's: each row's floor is computed once, and the HBM
    # sizes, smallest first, take the running minimum over the rows each one adds (iteration_lower_bound_s
    # of each size's rows, the same values: a minimum does not depend on the order it is taken in)
    rows = sorted(_bound_rows(c, model, spec, cluster, max(spec.hbm_gib) * GiB, hbm_Bps),
                  key=lambda r: r.need_bytes)
    best, k = np.full(n, np.inf), 0
    for hh in sorted(range(len(spec.hbm_gib)), key=lambda hh: spec.hbm_gib[hh]):
        cap = spec.hbm_gib[hh] * GiB
        while k < len(rows) and rows[k].need_bytes <= cap:
            r = rows[k]
            if r.p not in U:
                U[r.p] = min_bottleneck_s(e, b, h, L, r.p)
            best = np.minimum(best, _row_floor_s(r, S, U))
            k += 1
        if k:
            tput[hh] = spec.global_batch / best
    return c, tput


def setting_bounds_networks(model: ModelConfig, spec: SearchSpec, setting: TrainSetting, net, memo: dict):
    """``setting_bounds`` of (chip, network) candidates (``net``: a ``NetworkCandidates``). Layer times: each
    candidate's own network's, once per distinct tier the setting's tensor-parallel collectives cross (the
    chips' compute ops costed once, ``memo``). Throughput bound: each chip's on ``net.fastest``, a network at
    least as fast as every choice (``phaze.hardware.chip_network.at_least_as_fast``: no plan is slower on it),
    so an upper bound for the chip on any of its networks; a bound of a slower network is never used for a
    faster one. Each candidate's exact evaluation then bounds and plans on its own network (``exact``)."""
    base, clusters, chip, netk = net.base, net.clusters, net.chip_index, net.network_index
    n = len(chip)
    lower, upper = np.zeros((len(SLOTS), n)), np.zeros((len(SLOTS), n))
    tiers = [cl.tier_for_group(setting.tp) if setting.tp > 1 else cl.tiers[0] for cl in clusters]
    classes: dict = {}
    for k, t in enumerate(tiers):
        classes.setdefault((t.bandwidth_Bps, t.latency_s, t.efficiency) if setting.tp > 1 else None, []).append(k)
    layer_lo = {}
    for key, ks in classes.items():
        idx = np.flatnonzero(np.isin(netk, ks))
        lo, up = _layer_bounds(model, setting, base, tiers[ks[0]], memo)
        layer_lo[key] = lo
        lower[:, idx], upper[:, idx] = lo[:, chip[idx]], up[:, chip[idx]]
    fast = net.fastest.tier_for_group(setting.tp) if setting.tp > 1 else None
    key = None if fast is None else (fast.bandwidth_Bps, fast.latency_s, fast.efficiency)
    if key in classes:  # the fastest network's tier is one of the choices' (always at t = 1): its times again
        lo = layer_lo[key]
    else:
        lo, _ = _layer_bounds(model, setting, base, fast, memo)
    c, tput = _plan_bounds(model, spec, setting, base, net.fastest, lo)
    return lower, upper, c, tput[:, chip]


def _layer_bounds(model, setting, arch, tier, memo):
    lo, up = np.zeros((len(SLOTS), len(arch))), np.zeros((len(SLOTS), len(arch)))
    for j, (kind, direction) in enumerate(SLOTS):
        lo[j], up[j] = layer_time_bounds(layer_graph(model, setting, kind, direction), arch, tier, memo)
    return lo, up


@dataclass(frozen=True)
class NetworkCandidates:
    """What the bounds of (chip, network) candidates need: the distinct chips, each candidate's chip row and
    network, and each network's cluster (``phaze.hardware.chip_network.network_cluster``)."""

    base: ArchArrays
    chip_index: np.ndarray
    network_index: np.ndarray
    clusters: tuple[Cluster, ...]
    fastest: Cluster  # a network at least as fast as every choice (``phaze.hardware.chip_network.fastest``)


def group_bounds(model: ModelConfig, spec: SearchSpec, settings: tuple[TrainSetting, ...], arch: ArchArrays,
                 cluster: Cluster, net: NetworkCandidates | None = None) -> list[tuple]:
    """``setting_bounds`` of several settings with one op-cost memo: settings that differ only in recompute
    share most of their ops (a recomputing backward pass repeats the forward's), so each is costed once.
    ``net``: the candidates are (chip, network) pairs (``setting_bounds_networks``)."""
    memo: dict = {}
    if net is not None:
        return [setting_bounds_networks(model, spec, s, net, memo) for s in settings]
    return [setting_bounds(model, spec, s, arch, cluster, memo) for s in settings]


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
    if executor is None:
        for a in args:
            done.update(zip(a[2], group_bounds(*a)))
            for _ in a[2]:
                tick()
    else:
        for a, f in [(a, executor.submit(group_bounds, *a)) for a in args]:
            done.update(zip(a[2], f.result()))
            for _ in a[2]:
                tick()
    parts = [done[s] for s in settings]
    return ModelBounds(model, settings, tuple(p[2] for p in parts), np.stack([p[0] for p in parts]),
                       np.stack([p[1] for p in parts]), np.stack([p[3] for p in parts]))
