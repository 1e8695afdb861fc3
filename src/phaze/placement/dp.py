"""The exact stage partition for one (setting, t, d, p, m) under per-device memory.

Problem (1F1B, v = 1): split embedding, L identical blocks and head into p contiguous stages (stage 0
holds the embedding, stage p-1 the head, middle stages at least one block) minimizing

    iteration = sum_i T_i + (m - 1) * max_i T_i + max_i R_i

(T_i: stage time per microbatch, R_i: exposed gradient sync + optimizer step) subject to every stage's
memory <= capacity. The objective is not decomposable, so we enumerate the bottleneck values exactly:
for a bound U on max T and W on max R, each stage's feasible block counts form an interval (T and the
memory grow with the block count; R is quasi-convex), and a partition exists iff sum(lo) <= L <= sum(hi).
Because the blocks are identical, sum_i T_i is the same for every partition whose end stages keep the
same boundary layer kind, so per such case the objective is  S + (m-1) U + W : we find the least feasible
U, then walk U upwards over the O(L) distinct stage times, each time with the least feasible W (binary
search), stopping as soon as (m-1) U + min_W can no longer beat the incumbent. Exact, and O(L log L) small
numpy checks per combination instead of the O(p L^2) table of a generic DP.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from phaze.placement import stage as st
from phaze.placement.layer_costs import LayerCosts


@dataclass
class KindRow:
    """One stage kind (first / middle / last / only) over block counts nb = 0..L."""

    T: np.ndarray
    R: np.ndarray
    base_mem: np.ndarray  # static - tied + working
    act: np.ndarray  # stashed activation per in-flight microbatch


def kind_row(c: LayerCosts, e: int, h: int, has_prev: bool, has_next: bool, L: int, topo: st.Topology,
             zero1: bool, overlap: bool, hbm_Bps: float, cache: dict | None = None) -> KindRow:
    """One stage kind over nb = 0..L. ``cache`` (a dict that must not outlive ``c``: it is keyed by id)
    shares the parts that do not depend on p between the partition problems of one search."""
    key = (id(c), e, h, has_prev, has_next, L, topo.pp_tier, topo.tp_tier, topo.dp, topo.dp_tier, zero1, hbm_Bps)
    parts = cache.get(key) if cache is not None else None
    if parts is None:
        nb = np.arange(L + 1)
        s = st.stage_sums(c, e, nb, h)
        sends = np.zeros(L + 1)
        if has_next:
            sends = sends + st.send_s(c, st.boundary_out_bytes(c, nb, h), topo.pp_tier, topo.tp_tier)
        if has_prev:
            sends = sends + st.send_s(c, st.boundary_in_bytes(c, e, nb), topo.pp_tier, topo.tp_tier)
        T = s.fwd_s + s.bwd_s + sends
        tied = st.tied_static_bytes(c) if (e and h) else 0.0
        base = st.stage_memory(s, 0.0, topo.dp, zero1, tied)
        parts = (np.asarray(T, float), st.dp_sync_row(c, e, h, s, L, topo, zero1), np.asarray(s.bwd_s, float),
                 np.asarray(st.optimizer_step_s(s, topo.dp, zero1, hbm_Bps), float), np.asarray(base, float),
                 np.asarray(s.activation_bytes, float) * np.ones(L + 1), np.asarray(s.params, float) * np.ones(L + 1))
        for x in parts:
            x.setflags(write=False)
        if cache is not None:
            cache[key] = parts
    T, sync, bwd_s, opt_s, base, act, params = parts
    if e != h:
        sync = sync + st.tied_sync_s(c, topo)
    R = st.exposed_sync_s(sync, bwd_s, overlap, params, topo.dp) + opt_s
    return KindRow(T, np.asarray(R, float) * np.ones(L + 1), base, act)


@dataclass(frozen=True)
class PartitionSolution:
    objective_s: float
    blocks: tuple[int, ...]  # blocks per stage


def _interval(mask: np.ndarray) -> tuple[int, int]:
    """(first, last) index of True in ``mask`` (assumed contiguous); (1, 0) if none."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return 1, 0
    return int(idx[0]), int(idx[-1])


def _is_affine(x: np.ndarray, slope: float) -> bool:
    if x.size < 2:
        return True
    return bool(np.allclose(np.diff(x), slope, rtol=1e-9, atol=1e-15 + 1e-12 * abs(slope)))


def _quasiconvex(x: np.ndarray) -> bool:
    """Non-increasing then non-decreasing (every sublevel set is an interval)."""
    if x.size < 3:
        return True
    dx = np.diff(x)
    tol = 1e-12 * max(1.0, float(np.abs(x).max()))
    up = np.flatnonzero(dx > tol)
    return up.size == 0 or not np.any(dx[up[0]:] < -tol)


class PartitionProblem:
    """The partition problem of one combination; ``solve()`` returns the optimum or None (nothing fits)."""

    def __init__(self, c: LayerCosts, L: int, p: int, m: int, topo: st.Topology, capacity: float,
                 zero1: bool, overlap: bool, hbm_Bps: float, row_cache: dict | None = None) -> None:
        self.L, self.p, self.m, self.cap = L, p, m, capacity
        self.beta = st.bottleneck_weight(m)
        args = (L, topo, zero1, overlap, hbm_Bps, row_cache)
        self.tb = c.block.fwd_s + c.block.bwd_s
        if p == 1:
            self.only = kind_row(c, 1, 1, False, False, *args)
            return
        self.first = kind_row(c, 1, 0, False, True, *args)
        self.last = kind_row(c, 0, 1, True, False, *args)
        self.mid = kind_row(c, 0, 0, True, True, *args) if p > 2 else None
        nb = np.arange(L + 1)
        k = np.array([st.in_flight_microbatches(i, p, m, 1) for i in range(p)])
        self.k = k

        def mcap(row: KindRow, ki: np.ndarray) -> np.ndarray:
            ok = (row.base_mem[None, :] + ki[:, None] * row.act[None, :]) <= capacity
            # memory grows with nb: the feasible block counts are a prefix; -1 if none
            return ok.sum(axis=1) - 1 if _monotone(row) else _prefix_len(ok) - 1

        self.mcap_first = int(mcap(self.first, k[:1])[0])
        self.mcap_last = int(mcap(self.last, k[-1:])[0])
        if self.mid is not None:
            mc = mcap(self.mid, k[1:-1])
            self.mcap_mid = np.sort(mc)
            self.mcap_mid_prefix = np.concatenate([[0], np.cumsum(self.mcap_mid)])
        self._nb = nb

    # -- feasibility of (U, W) within one case (domains of the end stages) --------------------------
    def _end_interval(self, row: KindRow, dom: tuple[int, int], mcap: int, U: float, W: float):
        lo, hi = dom
        hi = min(hi, mcap)
        if hi < lo:
            return 1, 0
        seg_T = row.T[lo:hi + 1]
        seg_R = row.R[lo:hi + 1]
        a, b = _interval((seg_T <= U) & (seg_R <= W))
        return lo + a, lo + b

    def _feasible(self, dom0, domL, U: float, W: float) -> bool:
        lo0, hi0 = self._end_interval(self.first, dom0, self.mcap_first, U, W)
        if hi0 < lo0:
            return False
        loL, hiL = self._end_interval(self.last, domL, self.mcap_last, U, W)
        if hiL < loL:
            return False
        lo_sum, hi_sum = lo0 + loL, hi0 + hiL
        if self.mid is not None:
            n = self.p - 2
            a, b = _interval((self.mid.T[1:] <= U) & (self.mid.R[1:] <= W))
            if b < a:
                return False
            a, b = a + 1, b + 1
            if self.mcap_mid[0] < a:
                return False
            # sum_i min(b, mcap_i) with mcap sorted ascending
            j = int(np.searchsorted(self.mcap_mid, b, side="right"))
            hi_sum += int(self.mcap_mid_prefix[j]) + (n - j) * b
            lo_sum += n * a
        return lo_sum <= self.L <= hi_sum

    def _cases(self):
        """Domains of (first, last) stage block counts on which sum_i T_i is one constant."""
        out = []
        dom_f = [(0, self.L)] if _is_affine(self.first.T, self.tb) else [(0, 0), (1, self.L)]
        dom_l = [(0, self.L)] if _is_affine(self.last.T, self.tb) else [(0, 0), (1, self.L)]
        mid_ok = self.mid is None or _is_affine(self.mid.T[1:], self.tb)
        mid_ok = mid_ok and _is_affine(self.first.T[1:], self.tb) and _is_affine(self.last.T[1:], self.tb)
        for a in dom_f:
            for b in dom_l:
                out.append((a, b))
        generic = not mid_ok or not all(_quasiconvex(r.R[d[0]:d[1] + 1]) for r, ds in
                                        ((self.first, dom_f), (self.last, dom_l)) for d in ds)
        if self.mid is not None and not _quasiconvex(self.mid.R[1:]):
            generic = True
        return out, generic

    def _sum_T(self, dom0, domL) -> float:
        """sum_i T_i for any partition in the case (affine rows, common slope tb)."""
        n_mid = self.p - 2
        lo0, loL = dom0[0], domL[0]
        rest = self.L - lo0 - loL - n_mid
        s = self.first.T[lo0] + self.last.T[loL] + rest * self.tb
        if self.mid is not None:
            s += n_mid * self.mid.T[1]
        return float(s)

    def solve(self) -> PartitionSolution | None:
        L = self.L
        if self.p == 1:
            row = self.only
            if row.base_mem[L] + 1.0 * row.act[L] > self.cap:
                return None
            return PartitionSolution(float(st.iteration_s(row.T[L], row.T[L], row.R[L], self.m)), (L,))
        if self.p > L + 2:
            return None
        cases, generic = self._cases()
        if generic:
            return self._solve_generic()
        best: tuple[float, tuple, float, float] | None = None
        rows = [self.first, self.last] + ([self.mid] if self.mid is not None else [])
        U_all = np.unique(np.concatenate([r.T for r in rows]))
        W_all = np.unique(np.concatenate([r.R for r in rows]))
        inf = np.inf
        for dom0, domL in cases:
            if dom0[0] + domL[0] + (self.p - 2) > L:
                continue
            if not self._feasible(dom0, domL, inf, inf):
                continue
            S = self._sum_T(dom0, domL)
            w_inf = self._least(W_all, lambda W: self._feasible(dom0, domL, inf, W))
            if self.beta == 0:
                obj = S + W_all[w_inf]
                if best is None or obj < best[0]:
                    best = (obj, (dom0, domL), inf, W_all[w_inf])
                continue
            u0 = self._least(U_all, lambda U: self._feasible(dom0, domL, U, inf))
            w_hi = len(W_all) - 1
            for ui in range(u0, len(U_all)):
                U = U_all[ui]
                if best is not None and S + self.beta * U + W_all[w_inf] >= best[0]:
                    break
                wi = self._least(W_all, lambda W: self._feasible(dom0, domL, U, W), lo=w_inf, hi=w_hi)
                w_hi = wi
                obj = S + self.beta * U + W_all[wi]
                if best is None or obj < best[0]:
                    best = (obj, (dom0, domL), U, W_all[wi])
                if wi == w_inf:
                    break
        if best is None:
            return None
        obj, (dom0, domL), U, W = best
        blocks = self._assign(dom0, domL, U, W)
        return PartitionSolution(self.objective(blocks), blocks)

    @staticmethod
    def _least(vals: np.ndarray, ok, lo: int = 0, hi: int | None = None) -> int:
        """Smallest index i in [lo, hi] with ok(vals[i]) (ok is monotone and ok(vals[hi]) holds)."""
        hi = len(vals) - 1 if hi is None else hi
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(vals[mid]):
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _bounds(self, dom0, domL, U: float, W: float) -> tuple[list[int], list[int]]:
        lo0, hi0 = self._end_interval(self.first, dom0, self.mcap_first, U, W)
        loL, hiL = self._end_interval(self.last, domL, self.mcap_last, U, W)
        los, his = [lo0], [hi0]
        if self.mid is not None:
            a, b = _interval((self.mid.T[1:] <= U) & (self.mid.R[1:] <= W))
            mc = self._mid_caps_in_order()
            for i in range(self.p - 2):
                los.append(a + 1)
                his.append(min(b + 1, int(mc[i])))
        los.append(loL)
        his.append(hiL)
        return los, his

    def _mid_caps_in_order(self) -> np.ndarray:
        row = self.mid
        ki = self.k[1:-1]
        ok = (row.base_mem[None, :] + ki[:, None] * row.act[None, :]) <= self.cap
        return _prefix_len(ok) - 1

    def _assign(self, dom0, domL, U: float, W: float) -> tuple[int, ...]:
        """A partition within the bounds; spare blocks go to the stage with the smallest time so far."""
        los, his = self._bounds(dom0, domL, U, W)
        nb = list(los)
        rows = self._rows()
        heap = [(rows[i].T[nb[i]], i) for i in range(self.p) if nb[i] < his[i]]
        heapq.heapify(heap)
        rest = self.L - sum(nb)
        while rest > 0:
            _, i = heapq.heappop(heap)
            nb[i] += 1
            rest -= 1
            if nb[i] < his[i]:
                heapq.heappush(heap, (rows[i].T[nb[i]], i))
        return tuple(nb)

    def _rows(self) -> list[KindRow]:
        return [self.first] + [self.mid] * (self.p - 2) + [self.last]

    def objective(self, blocks) -> float:
        """The iteration time of a partition (same formula as ``evaluate``); inf if it does not fit."""
        if self.p == 1:
            row = self.only
            return float(st.iteration_s(row.T[self.L], row.T[self.L], row.R[self.L], self.m))
        rows = self._rows()
        T = np.array([rows[i].T[b] for i, b in enumerate(blocks)])
        R = np.array([rows[i].R[b] for i, b in enumerate(blocks)])
        mem = np.array([rows[i].base_mem[b] + self.k[i] * rows[i].act[b] for i, b in enumerate(blocks)])
        if np.any(mem > self.cap):
            return np.inf
        return float(st.iteration_s(T.sum(), T.max(), R.max(), self.m))

    def _solve_generic(self) -> PartitionSolution | None:
        """Fallback when the rows lack the structure used above: exact enumeration of (U, W) pairs with a
        reachability DP (bitsets) for feasibility; slow but only for unusual cost functions."""
        rows = self._rows()
        L, p = self.L, self.p
        mem_ok = [rows[i].base_mem + self.k[i] * rows[i].act <= self.cap for i in range(p)]
        lo_nb = [0] + [1] * (p - 2) + [0]
        best = None
        Us = np.unique(np.concatenate([r.T for r in rows]))
        Ws = np.unique(np.concatenate([r.R for r in rows]))
        for U in Us:
            for W in Ws:
                masks = [mem_ok[i] & (rows[i].T <= U) & (rows[i].R <= W) & (np.arange(L + 1) >= lo_nb[i])
                         for i in range(p)]
                choice = _min_sum_partition(rows, masks, L)
                if choice is None:
                    continue
                obj = self.objective(choice)
                if best is None or obj < best[0]:
                    best = (obj, choice)
        if best is None:
            return None
        return PartitionSolution(best[0], best[1])


def _min_sum_partition(rows, masks, L):
    """Min sum of T over choices nb_i in masks[i] with sum L (exact DP over prefix sums)."""
    INF = np.inf
    f = np.full(L + 1, INF)
    f[0] = 0.0
    arg = []
    for i, row in enumerate(rows):
        g = np.full(L + 1, INF)
        a = np.full(L + 1, -1)
        for nb in np.flatnonzero(masks[i]):
            cand = np.full(L + 1, INF)
            cand[nb:] = f[:L + 1 - nb] + row.T[nb]
            better = cand < g
            g[better] = cand[better]
            a[better] = nb
        f = g
        arg.append(a)
    if not np.isfinite(f[L]):
        return None
    out, j = [], L
    for i in range(len(rows) - 1, -1, -1):
        nb = int(arg[i][j])
        out.append(nb)
        j -= nb
    return tuple(reversed(out))


def _monotone(row: KindRow) -> bool:
    return bool(np.all(np.diff(row.base_mem) >= 0) and np.all(np.diff(row.act) >= 0))


def _prefix_len(ok: np.ndarray) -> np.ndarray:
    """Length of the all-True prefix of each row."""
    bad = ~ok
    has = bad.any(axis=1)
    first_bad = np.where(has, bad.argmax(axis=1), ok.shape[1])
    return first_bad
