"""The static data of a branch-and-bound scheduling problem and its node lower bound (see ``bnb``).

``NodeModel`` precomputes per op its kind, modes, works, tails, predecessor masks, twin links, the
delays (ops that never contend) and the conflicting pairs; ``NodeModel.bound`` is the lower bound of a node
(heads with the cores running ops hold, conflicting pairs, energetic reasoning), every part a relaxation.
"""
# The hot loops compare with ``if`` rather than calling min()/max(): about 30% faster in CPython here.
# ruff: noqa: PLR1730, FURB136
from __future__ import annotations

from itertools import pairwise

from phaze.schedule.bounds import heads_tails
from phaze.schedule.problem import ScheduleProblem, topo_order
from phaze.schedule.reduce import overlappable, twins

KIND_INDEX = {"tc": 0, "vc": 1, "net": 2}
INF = float("inf")


class NodeModel:
    """Static data of the (reduced) problem."""

    def __init__(self, p: ScheduleProblem) -> None:
        n = self.n = len(p.ops)
        self.caps = (p.num_tc, p.num_vc, 1)
        self.kind = [KIND_INDEX[op.kind] for op in p.ops]
        self.modes = [tuple(op.modes) for op in p.ops]
        self.ks = [tuple(k for k, _ in ms) for ms in self.modes]
        self.ds = [tuple(d for _, d in ms) for ms in self.modes]
        self.works = [tuple(k * d for k, d in ms) for ms in self.modes]
        self.dmin = [min(ds) for ds in self.ds]
        _, self.tail = heads_tails(p, self.dmin)
        self.preds = p.preds()
        self.order = topo_order(n, p.edges)
        over = overlappable(p)
        caps = self.caps
        contend = [max(self.ks[i]) + sum(max(self.ks[j]) for j in over[i]) > caps[self.kind[i]]
                   for i in range(n)]
        self.delay = [not contend[i] and len(self.modes[i]) == 1 for i in range(n)]
        self.pmask = [sum(1 << q for q in self.preds[i]) for i in range(n)]
        self.twin_prev = [-1] * n
        for g in twins(p):
            for a, b in pairwise(g):
                self.twin_prev[b] = a
        # pairs of overlappable contending ops whose fastest modes do not fit side by side; for each
        # mode a of i, the index of j's largest mode fitting next to it (or -1)
        self.pairs = []
        for i in range(n):
            if self.delay[i]:
                continue
            c = self.kind[i]
            fi = self.ds[i].index(self.dmin[i])
            for j in over[i]:
                if j <= i or self.delay[j]:
                    continue
                fj = self.ds[j].index(self.dmin[j])
                if self.ks[i][fi] + self.ks[j][fj] <= caps[c]:
                    continue
                fit = []
                for a, ka in enumerate(self.ks[i]):
                    b = max((b for b, kb in enumerate(self.ks[j]) if ka + kb <= caps[c]), default=-1)
                    fit.append(b)
                self.pairs.append((i, j, tuple(fit)))
        # per kind: its contending ops by decreasing tail (ties by index), the energetic bound's order
        self.by_tail = tuple([i for i in sorted(range(n), key=lambda i: -self.tail[i])
                              if self.kind[i] == c and not self.delay[i]] for c in range(3))
        # per op: the pairs among its direct predecessors (both must end before it starts)
        self.pred_pairs = [[pr for pr in self.pairs if pr[0] in self.preds[s] and pr[1] in self.preds[s]]
                           for s in range(n)]
        # the pairs as the bound reads them: (both ops' bits, i, j, fit, dmin i, dmin j, tail i, tail j)
        self.pair_rows = [((1 << i) | (1 << j), i, j, fit, self.dmin[i], self.dmin[j], self.tail[i], self.tail[j])
                          for i, j, fit in self.pairs]
        self.contending = [j for j in range(n) if not self.delay[j]]

    def bound(self, tn: float, started: int, ends: list, kcur: list, thr: float) -> float:
        """Lower bound on any completion, with makespan below ``thr``, of the node whose started ops are
        ``started`` (ends and cores ``kcur``) and whose next decision time is ``tn``; >= thr means none."""
        n = self.n
        tail, kind, delay, caps = self.tail, self.kind, self.delay, self.caps
        # running contending ops per kind: sorted (end, cores) with end > tn
        run = ([], [], [])
        for j in self.contending:
            if started >> j & 1 and ends[j] > tn:
                run[kind[j]].append((ends[j], kcur[j]))
        for lst in run:
            lst.sort()
        used_of = [sum(k for _, k in lst) for lst in run]  # cores the running ops hold, per kind
        lb = 0.0
        head = [0.0] * n  # earliest start (not started ops)
        eend = [0.0] * n  # earliest end (all ops)
        fin: list = [None] * n  # per mode: earliest end, or inf if the mode cannot beat thr
        work = [0.0] * n
        for i in self.order:
            if started >> i & 1:
                e = ends[i]
                eend[i] = e
                if e + tail[i] > lb:
                    lb = e + tail[i]
                continue
            h = tn
            for q in self.preds[i]:
                if eend[q] > h:
                    h = eend[q]
            for a, b, fit in self.pred_pairs[i]:
                if started >> a & 1 or started >> b & 1:
                    continue
                ea, eb, ha, hb = eend[a], eend[b], head[a], head[b]
                v = (ea if ea >= hb else hb) + self.dmin[b]
                w = (eb if eb >= ha else ha) + self.dmin[a]
                if w < v:
                    v = w
                if v <= h:
                    continue
                fa_, fb_ = fin[a], fin[b]
                for ma, mb in enumerate(fit):
                    if mb < 0:
                        break
                    w = max(fa_[ma], min(fb_[: mb + 1]))
                    if w < v:
                        v = w
                        if v <= h:
                            break
                if v > h:
                    h = v
            head[i] = h
            qi = tail[i]
            if delay[i]:
                e = h + self.ds[i][0]
                eend[i] = e
                if e + qi > lb:
                    lb = e + qi
                continue
            c = kind[i]
            rl, cap, used = run[c], caps[c], used_of[c]
            fl = []
            best = INF
            wmin = INF
            for k, d, w in zip(self.ks[i], self.ds[i], self.works[i]):
                s = h
                if used + k > cap:  # wait for enough running ops to end
                    u = used
                    for e, kk in rl:
                        u -= kk
                        if u + k <= cap:
                            if e > s:
                                s = e
                            break
                f = s + d
                if f + qi < thr:
                    fl.append(f)
                    if f < best:
                        best = f
                    if w < wmin:
                        wmin = w
                else:
                    fl.append(INF)
            if best == INF:
                return INF
            fin[i] = fl
            eend[i] = best
            work[i] = wmin
            if best + qi > lb:
                lb = best + qi
        if lb >= thr:
            return lb
        # pairs: side by side (modes that fit together) or one after the other (fastest modes)
        for mask, i, j, fit, di, dj, qi, qj in self.pair_rows:
            if started & mask:
                continue
            ei, ej = eend[i], eend[j]
            hj, hi = head[j], head[i]
            x = (ei if ei >= hj else hj) + dj + qj
            v = ei + qi
            if x > v:
                v = x
            x = (ej if ej >= hi else hi) + di + qi
            w = ej + qj
            if x > w:
                w = x
            if w < v:
                v = w
            if v <= lb:
                continue
            fi, fj = fin[i], fin[j]
            for a, b in enumerate(fit):
                if b < 0:
                    break
                fa = fi[a]
                if fa + qi >= v:
                    continue
                fb = min(fj[: b + 1])
                w = fa + qi if fa + qi > fb + qj else fb + qj
                if w < v:
                    v = w
                    if v <= lb:
                        break
            if v > lb:
                lb = v
                if lb >= thr:
                    return lb
        # energetic: ops not started with head >= r0 and tail >= q0 run in [r0, makespan - q0]
        for c in range(3):
            items = [(head[i], tail[i], work[i]) for i in self.by_tail[c] if not started >> i & 1]
            if not items:
                continue
            cap = caps[c]
            rl = run[c]
            for r0 in sorted({it[0] for it in items}):
                acc = 0.0
                # x: the earliest time >= r0 by which the free cores can have done acc core-seconds (the free
                # cores only grow as the running ops end): r0 + acc / cap when none is running after r0
                segs = [(e, k) for e, k in rl if e > r0]
                if not segs:
                    for ri, qi, w in items:
                        if ri < r0:
                            continue
                        acc += w
                        x = r0 + acc / cap + qi
                        if x > lb:
                            lb = x
                    continue
                used0 = 0
                for _, k in segs:
                    used0 += k
                for ri, qi, w in items:
                    if ri < r0:
                        continue
                    acc += w
                    rem, used, x = acc, used0, r0
                    for e, k in segs:
                        free = cap - used
                        if free > 0:
                            seg = (e - x) * free
                            if seg >= rem:
                                x = x + rem / free
                                break
                            rem -= seg
                        x = e
                        used -= k
                    else:
                        x = x + rem / cap
                    x += qi
                    if x > lb:
                        lb = x
            if lb >= thr:
                return lb
        return lb

