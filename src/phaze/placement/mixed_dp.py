"""The exact stage partition when every pipeline stage picks its own recompute mode (1F1B, v = 1).

Problem: split embedding, L identical blocks and head into p contiguous stages (stage 0 holds the
embedding, stage p-1 the head, middle stages at least one block) and give stage i a recompute mode r_i from
the requested ones, minimizing what ``evaluate_costs`` computes for such a plan,

    iteration = sum_i T_i + (m - 1) * max_i T_i + max_i R_i,

subject to every stage's memory (with its k_i = min(p - i, m) in-flight microbatches) <= capacity. Stage
i's time T, exposed sync + optimizer step R and memory depend only on (i, its mode, its block count), so
for fixed bounds U >= max T and W >= max R the least sum of T is a min-sum partition: stage i with nb
blocks costs the least T over the modes with T <= U, R <= W and memory within capacity, and a DP over the
stages (state: blocks assigned so far, one vectorized shifted minimum per stage) finds it exactly. The
optimum is min over U in the stage times, W in the R values of S(U, W) + (m-1) U + W: U is walked upwards
from the least feasible one, W upwards from the least feasible one for that U, and both walks stop as
soon as the bound S(inf, inf) + (m-1) U + W (resp. S(U, inf) + (m-1) U + W) cannot beat the incumbent
(or the caller's cutoff, so most combinations of a search end after one DP run). The least feasible
bounds come from binary searches on a feasibility test that needs no DP when every stage's allowed block
counts form an interval (sum of lows <= L <= sum of highs). No structural assumption (affine times,
quasi-convex R) is needed. One recompute mode for every stage is the special case ``costs = {mode: c}``
(the optimizer solves uniform v = 1 combinations so; it replaced a separate one-mode solver, same answers
and no slower on benchmarks/bench_plan.py). Interleaved plans (v > 1) have a fixed partition and are
handled by ``phaze.placement.mixed_interleaved``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from phaze.placement import stage as st
from phaze.placement.layer_costs import LayerCosts
from phaze.placement.recompute import Recompute

INF = np.inf


@dataclass
class KindRow:
    """One stage kind (first / middle / last / only) over block counts nb = 0..L."""

    T: np.ndarray
    R: np.ndarray
    base_mem: np.ndarray  # static - tied + working
    act: np.ndarray  # stashed activation per in-flight microbatch


def _kind_row(c: LayerCosts, e: int, h: int, has_prev: bool, has_next: bool, L: int, topo: st.Topology,
             zero: int, overlap: bool, hbm_Bps: float, cache: dict | None = None,
             lane_ops_per_s: float = np.inf) -> KindRow:
    """One stage kind over nb = 0..L. ``cache`` (a dict that must not outlive ``c``: it is keyed by id)
    shares the parts that do not depend on p between the partition problems of one search."""
    key = (id(c), e, h, has_prev, has_next, L, topo.pp_tier, topo.tp_tier, topo.dp, topo.dp_tier, zero, hbm_Bps,
           lane_ops_per_s)
    parts = cache.get(key) if cache is not None else None
    if parts is None:
        nb = np.arange(L + 1)
        s = st.stage_sums(c, e, nb, h)
        sends = np.zeros(L + 1)
        if has_next:
            sends = sends + st.send_s(c, st.boundary_out_bytes(c, nb, h), topo.pp_tier, topo.tp_tier)
        if has_prev:
            sends = sends + st.send_s(c, st.boundary_in_bytes(c, e, nb), topo.pp_tier, topo.tp_tier)
        T = s.fwd_s + s.bwd_s + sends + st.exposed_microbatch_comm_s(c, s, topo, zero, overlap, hbm_Bps)
        tied = st.tied_static_bytes(c, zero, topo.dp) if (e and h) else 0.0
        base = st.stage_memory(s, 0.0, topo.dp, zero, tied)
        parts = (np.asarray(T, float) * np.ones(L + 1), st.dp_sync_row(c, e, h, s, L, topo, zero),
                 np.asarray(s.bwd_s, float),
                 np.asarray(st.optimizer_step_s(s, topo.dp, zero, hbm_Bps, lane_ops_per_s), float),
                 np.asarray(base, float),
                 np.asarray(s.activation_bytes, float) * np.ones(L + 1), np.asarray(s.params, float) * np.ones(L + 1),
                 np.asarray(st.param_gather_s(s.weight_bytes, topo, zero), float) * np.ones(L + 1),
                 np.asarray(s.fwd_s, float) * np.ones(L + 1))
        for x in parts:
            x.setflags(write=False)
        if cache is not None:
            cache[key] = parts
    T, sync, bwd_s, opt_s, base, act, params, gather, fwd_s = parts
    if e != h:
        sync = sync + st.tied_sync_s(c, topo)
    lost = st.sync_interference(c, topo, hbm_Bps)
    R = st.exposed_sync_s(sync, bwd_s, overlap, params, topo.dp, gather, fwd_s, lost) + opt_s
    return KindRow(T, np.asarray(R, float) * np.ones(L + 1), base, act)


@dataclass(frozen=True)
class MixedSolution:
    objective_s: float
    blocks: tuple[int, ...]  # blocks per stage
    modes: tuple[str, ...]  # recompute mode per stage

    @property
    def uniform(self) -> bool:
        return len(set(self.modes)) == 1

    @property
    def recompute(self) -> Recompute:
        """The ``Plan.recompute`` value."""
        return Recompute(self.modes)


class MixedPartitionProblem:
    """The partition x per-stage recompute problem of one (setting without recompute, t, d, p, m, ZeRO stage)
    combination (ZeRO stage ``zero``); ``costs`` maps each allowed recompute mode to its LayerCosts. ``solve(cutoff_s)``
    returns the optimum, or None when nothing fits or nothing beats ``cutoff_s``. ``row_cache``: see
    ``_kind_row``."""

    def __init__(self, costs: Mapping[str, LayerCosts], L: int, p: int, m: int, topo: st.Topology,
                 capacity: float, zero: int, overlap: bool, hbm_Bps: float, row_cache: dict | None = None,
                 lane_ops_per_s: float = np.inf) -> None:
        self.modes = tuple(costs)
        self.L, self.p, self.m = L, p, m
        self.beta = st.bottleneck_weight(m)
        self.evaluations = 0  # min-sum DP runs (for benchmarks and tests)
        M, n = len(self.modes), L + 1
        T, R, ok = np.empty((p, M, n)), np.empty((p, M, n)), np.empty((p, M, n), dtype=bool)
        k = np.array([st.in_flight_microbatches(i, p, m, 1) for i in range(p)])
        args = (L, topo, zero, overlap, hbm_Bps, row_cache, lane_ops_per_s)
        distinct_T, distinct_R = [], []  # the candidate bounds: every row's values (a superset is exact too)
        for r, mode in enumerate(self.modes):
            c = costs[mode]
            if p == 1:
                kinds = [(slice(0, 1), _kind_row(c, 1, 1, False, False, *args))]
            else:
                kinds = [(slice(0, 1), _kind_row(c, 1, 0, False, True, *args)),
                         (slice(p - 1, p), _kind_row(c, 0, 1, True, False, *args))]
                if p > 2:
                    kinds.append((slice(1, p - 1), _kind_row(c, 0, 0, True, True, *args)))
            for sl, row in kinds:
                distinct_T.append(row.T)
                distinct_R.append(row.R)
                T[sl, r] = row.T
                R[sl, r] = row.R
                mem_bytes = row.base_mem[None, :] + k[sl, None] * row.act[None, :]
                ok[sl, r] = mem_bytes <= capacity
        if p == 1:
            ok[:, :, :L] = False  # the only stage holds every block
        elif p > 2:
            ok[1:p - 1, :, 0] = False  # middle stages hold at least one block
        self.ok = ok
        self._Us, self._Ws = np.unique(np.concatenate(distinct_T)), np.unique(np.concatenate(distinct_R))
        self.T = np.where(ok, T, INF)
        self.R = np.where(ok, R, INF)
        idx = np.arange(n)[:, None] - np.arange(n)[None, :]
        self._shift = np.where(idx >= 0, idx, n)  # [j, nb] -> j - nb, or the padding slot n (= inf)

    # -- the min-sum partition for fixed bounds ------------------------------------------------------
    def _costs(self, U: float, W: float) -> np.ndarray:
        """Per stage and block count: the least T over the modes allowed under (U, W); inf if none."""
        return np.where((self.T <= U) & (self.R <= W), self.T, INF).min(axis=1)

    def min_sum_s(self, U: float, W: float, want_blocks: bool = False):
        """min sum_i T_i over partitions with every stage within (U, W) and memory (inf if none); with
        ``want_blocks`` also the block counts of a minimizer (None if none)."""
        self.evaluations += 1
        cost = self._costs(U, W)
        p, L = self.p, self.L
        if p == 1:
            return (cost[0, L], (L,) if np.isfinite(cost[0, L]) else None) if want_blocks else cost[0, L]
        finite = np.isfinite(cost[1:p - 1])
        if not finite.any(axis=1).all():
            return (INF, None) if want_blocks else INF
        los = finite.argmax(axis=1).tolist()
        his = (L - finite[:, ::-1].argmax(axis=1)).tolist()
        buf = np.full(L + 2, INF)  # f followed by the padding slot the shift points to
        f = cost[0]
        rows = np.arange(L + 1)
        choices = []
        for i in range(1, p - 1):
            lo, hi = los[i - 1], his[i - 1] + 1
            buf[:L + 1] = f
            F = buf[self._shift[:, lo:hi]] + cost[i, lo:hi]
            if want_blocks:
                a = F.argmin(axis=1)
                f = F[rows, a]
                choices.append(a + lo)
            else:
                f = F.min(axis=1)
        tail = f[::-1] + cost[p - 1]  # tail[nb] = f[L - nb] + cost of nb blocks on the last stage
        nb_last = int(tail.argmin())
        total = float(tail[nb_last])
        if not want_blocks:
            return total
        if not np.isfinite(total):
            return INF, None
        blocks, j = [nb_last], L - nb_last
        for a in reversed(choices):
            nb = int(a[j])
            blocks.append(nb)
            j -= nb
        blocks.append(j)
        return total, tuple(reversed(blocks))

    def feasible(self, U: float, W: float) -> bool:
        """Whether some partition keeps every stage within (U, W) and memory. Stage i's allowed block
        counts lie in [lo_i, hi_i]; when each is that whole interval, sum lo <= L <= sum hi decides it,
        else the DP does."""
        mask = (self.ok & (self.T <= U) & (self.R <= W)).any(axis=1)  # (stage, blocks)
        if not mask.any(axis=1).all():
            return False
        n = self.L + 1
        lo, hi = mask.argmax(axis=1), n - 1 - mask[:, ::-1].argmax(axis=1)
        if lo.sum() > self.L or hi.sum() < self.L:
            return False
        if np.array_equal(mask.sum(axis=1), hi - lo + 1):
            return True
        return bool(np.isfinite(self.min_sum_s(U, W)))

    # -- the search over (U, W) -----------------------------------------------------------------------
    @staticmethod
    def _least(ok, lo: int, hi: int) -> int:
        """Smallest index i in [lo, hi] with ok(i) (ok monotone, ok(hi) holds)."""
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def solve(self, cutoff_s: float = INF) -> MixedSolution | None:
        if self.p > self.L + 2:
            return None
        S_inf = self.min_sum_s(INF, INF)
        if not np.isfinite(S_inf):
            return None
        Us, Ws = self._Us, self._Ws
        beta, best, arg = self.beta, cutoff_s, None
        # max T >= sum T / p >= S_inf / p and max R >= the least R: a first bound before any search
        if S_inf + beta * S_inf / self.p + float(self.R.min()) >= best:
            return None
        w0 = self._least(lambda wi: self.feasible(INF, Ws[wi]), 0, len(Ws) - 1)
        if beta == 0:  # one microbatch: U is free, scan W only
            Us = np.array([INF])
        u_lo = max(0, int(np.searchsorted(Us, S_inf / self.p * (1 - 1e-9))) - 1) if beta else 0
        u0 = self._least(lambda ui: self.feasible(Us[ui], INF), min(u_lo, len(Us) - 1), len(Us) - 1)
        w_hi = len(Ws) - 1
        for ui in range(u0, len(Us)):
            U = Us[ui]
            bU = beta * U if beta else 0.0
            if S_inf + bU + Ws[w0] >= best:
                break  # no larger U can do better either
            S_U = self.min_sum_s(U, INF)
            if S_U + bU + Ws[w0] >= best:
                continue
            wi = self._least(lambda j, U=U: self.feasible(U, Ws[j]), w0, w_hi)
            w_hi = wi  # the least feasible W does not grow with U
            while wi < len(Ws) and S_U + bU + Ws[wi] < best:
                s = self.min_sum_s(U, Ws[wi])
                if s + bU + Ws[wi] < best:
                    best, arg = s + bU + Ws[wi], (U, Ws[wi])
                if s <= S_U:
                    break  # a larger W cannot lower the sum below S_U
                wi += 1
        if arg is None:
            return None
        _, blocks = self.min_sum_s(*arg, want_blocks=True)
        modes = self._modes_of(blocks, *arg)
        return MixedSolution(self.objective(blocks, modes), blocks, modes)

    def _modes_of(self, blocks, U: float, W: float) -> tuple[str, ...]:
        """Per stage the allowed mode with the least T at its block count (ties: the least R, then the
        order the modes were given in)."""
        out = []
        for i, nb in enumerate(blocks):
            t, rr = self.T[i, :, nb], self.R[i, :, nb]
            allowed = (t <= U) & (rr <= W)
            key = np.lexsort((np.arange(len(t)), np.where(allowed, rr, INF), np.where(allowed, t, INF)))
            out.append(self.modes[int(key[0])])
        return tuple(out)

    def objective(self, blocks, modes) -> float:
        """The iteration time of a partition with per-stage modes (the formula of ``evaluate``); inf if it
        does not fit."""
        r = [self.modes.index(x) for x in modes]
        T = np.array([self.T[i, r[i], b] for i, b in enumerate(blocks)])
        R = np.array([self.R[i, r[i], b] for i, b in enumerate(blocks)])
        if not (np.all(np.isfinite(T)) and np.all(np.isfinite(R))):
            return INF
        return float(st.iteration_s(T.sum(), T.max(), R.max(), self.m))
