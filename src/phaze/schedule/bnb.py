"""Exact branch and bound for the per-layer scheduling problem, in real time (no tick rounding).

Search space (time-oriented branching over semi-active schedules)
-----------------------------------------------------------------
A node is a partial schedule fixed up to a decision time T: every op started so far has its start, mode
and end. The root decides at T = 0; the next decision time of a node is the earliest end (> T) of an op it
has started. At a decision time T the branching chooses a set of eligible ops (all predecessors ended by
T) with one mode each that fits, together with the ops still running, in the cores of each kind, and
starts them at T; every other op waits for a later decision time. The empty choice is allowed only while
some op is still running (otherwise nothing would ever start again).

- Delays. After ``reduce.isolated_fastest`` an op that cannot contend (its largest mode plus the largest
  modes of every same-kind op it could overlap fit in the cores) has a single mode. Such an op never
  constrains a resource in any precedence-feasible schedule, so it is left out of the capacity
  accounting and started as soon as its predecessors end: a pure time lag on its dependency chain.
- Left-shift rule. An op started at T with mode m is rejected if at an earlier decision time t_A of the
  same path it was already ready, at least k' cores of its kind were free during all of [t_A, T), and
  some mode m' with k' <= k_m cores satisfies t_A + d_m' <= T + d_m (then it could run [t_A, t_A + d_m')
  instead: over [t_A, T) the cores were free, over [T, t_A + d_m') it uses no more cores than before).
- Twins (``reduce.twins``): for twins a < b, b starts no earlier than a, and with a mode index >= a's
  when both start at the same time.
- Bounds: a node is pruned when its lower bound reaches the incumbent minus a relative 1e-9, so the
  result is optimal to that relative tolerance.

Why an optimal schedule survives. For a fixed mode vector the schedules with makespan <= OPT form a
compact set of start vectors (precedence is closed; intervals are half-open, so "some set of ops over
capacity overlaps" is open and its complement closed), and there are finitely many mode vectors. So
among the optimal schedules one, S*, minimises (sum of ends, sum of starts) lexicographically; relabel
twins in it so that their (start, mode) pairs are ordered by index, which changes neither sum. In S*:
  (1) every op starts at 0 or at the end of some op: otherwise move it left by a small epsilon (its
      predecessors end strictly before it, and as no op ends at its start, just before it no more cores
      are in use than at it): both sums drop;
  (2) every delay starts when its predecessors end (moving it left never breaks a resource);
  (3) no op is left-shiftable in the sense of the rule above: the shift keeps every constraint and the
      makespan, and lowers the op's end, or keeps its end and lowers its start.
Follow S* from the root: at each decision time choose exactly the ops S* starts then, with its modes.
By (1) and induction over time, every start of S* is 0 or the end of an op already on the path; the
decision times are 0 and all those ends in increasing order, so every start of S* falls on one, and the
empty choice with nothing running never occurs in S* (its next start would be no end at all). By (2),
(3) and the twin order no rule rejects the choice, and the bound of each node on the path is at most
OPT. Hence the path is cut only once the incumbent is within the relative tolerance of OPT. Semi-active,
not non-delay: leaving cores idle while an op could start is allowed (the empty or a partial choice).

Lower bound of a node (valid for every completion with makespan below the incumbent; only relaxations):
  - heads: each op not started starts no earlier than the next decision time, the earliest ends of its
    predecessors, and the joint earliest end of any two of its predecessors that form a pair (below); a
    mode of k cores starts no earlier than the running ops leave k cores free, and only the modes that
    can still end before the incumbent count. Bound >= earliest end + tail (longest chain after the op,
    fastest modes); a running or finished op gives end + tail;
  - pairs: two overlappable ops of one kind whose fastest modes do not fit side by side either overlap
    (then in modes that fit together) or run one after the other (then in fastest modes): bound >= the
    least of these options (each op from its own earliest start, with its tail);
  - energetic (``bounds.energetic_bound`` from the node): for each r0 and q0, the ops not started with
    head >= r0 and tail >= q0 put their least work (over the still allowed modes) into
    [r0, makespan - q0], in the cores the running ops leave free.
Delays are left out of the resource part of the bounds (a relaxation).

The incumbent starts from ``heuristic.heuristic_timing`` (or ``upper`` if better); depth-first search
takes the child with the smallest bound first. On a time or node limit, the best schedule and a valid
lower bound (the least bound of the open nodes) come back with ``proven=False``. Cost grows with the
number of ops eligible at once (every subset with every mode is a child): chains with side branches
(backward blocks) are fast, many independent ops are not.
"""
# The hot loops compare with ``if`` rather than calling min()/max(): about 30% faster in CPython here.
# ruff: noqa: PLR1730, FURB136
from __future__ import annotations

import time
from dataclasses import dataclass, replace

from phaze.schedule.bnb_model import INF, NodeModel
from phaze.schedule.bounds import lower_bound_s
from phaze.schedule.heuristic import Timing, heuristic_timing
from phaze.schedule.problem import ScheduleProblem, prune_modes
from phaze.schedule.reduce import isolated_fastest

OPTIMAL_RTOL = 1e-9
_INF = INF


@dataclass(frozen=True)
class BnbResult:
    """``timing``: the best schedule found (its modes index the INPUT problem's modes). ``lower_bound_s``
    is valid for the input problem; ``proven``: the search finished, so ``timing`` is optimal up to a
    relative 1e-9 (then ``lower_bound_s`` equals its makespan)."""

    timing: Timing
    lower_bound_s: float
    proven: bool
    nodes: int
    solve_time_s: float
    # every schedule that improved on the one before it during the search, in order (the last is ``timing``;
    # the first is ``upper`` or the heuristic's): candidates for the re-timing under shared bandwidth
    improvements: tuple[Timing, ...] = ()


def _shiftable(hist, ready: float, c: int, k: int, end: float, ks, ds) -> bool:
    """Left-shift rule: could the op (ready at ``ready``, kind c, k cores, ending at ``end`` if started
    now) start at an earlier decision time of the path, in a mode of at most k cores, ending no later?
    ``hist`` links (decision time, free cores per kind until the next decision time, parent link)."""
    minfree = 1 << 62
    while hist is not None:
        t_a, free_a, hist = hist
        if ready > t_a:
            return False
        if free_a[c] < minfree:
            minfree = free_a[c]
        kk = k if k < minfree else minfree
        if kk < ks[0]:
            return False
        m = 0
        while m + 1 < len(ks) and ks[m + 1] <= kk:
            m += 1
        if t_a + ds[m] <= end:
            return True
    return False


def _reduced(problem: ScheduleProblem) -> ScheduleProblem:
    """Same optimum, fewer choices: ops that cannot contend fixed to their fastest mode
    (``reduce.isolated_fastest``), and modes sorted by cores with dominated ones dropped (a mode with more
    cores and no shorter duration can be swapped for the other in any schedule), as the search assumes."""
    red = isolated_fastest(problem)
    ops = tuple(replace(op, modes=prune_modes(op.modes)) for op in red.ops)
    return red if ops == red.ops else replace(red, ops=ops)


def solve_bnb(problem: ScheduleProblem, time_limit_s: float = 1.0, node_limit: int | None = None, *,
              upper: Timing | None = None) -> BnbResult:
    """Minimum makespan by branch and bound (module docstring). ``upper``: a feasible schedule of
    ``problem`` (modes indexing its modes) to start from instead of ``heuristic.heuristic_timing``.
    Stops after ``time_limit_s`` seconds or ``node_limit`` expanded nodes with the best schedule so far
    and a valid lower bound (``proven=False``). Deterministic unless the time limit ends the search."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit_s
    red = _reduced(problem)
    md = NodeModel(red)
    n = md.n
    back = [[problem.ops[i].modes.index(mode) for mode in red.ops[i].modes] for i in range(n)]
    if upper is None:
        heur = heuristic_timing(red)
        best_ms = heur.makespan
        best = (list(heur.starts), list(heur.ends), [back[i][m] for i, m in enumerate(heur.modes)])
    else:
        best_ms = upper.makespan
        best = (list(upper.starts), list(upper.ends), list(upper.modes))
    found = [best]
    root_lb = lower_bound_s(red)
    nodes = 0
    open_lb = _INF
    if best_ms > root_lb * (1.0 + OPTIMAL_RTOL):
        kind, ks, ds, caps, delay, pmask, tw = md.kind, md.ks, md.ds, md.caps, md.delay, md.pmask, md.twin_prev
        tail, preds = md.tail, md.preds
        full = (1 << n) - 1
        # node: (bound, decision time or None for the root, started mask, ends, starts, modes, history)
        stack = [(root_lb, None, 0, [0.0] * n, [0.0] * n, [0] * n, None)]
        while stack:
            node = stack.pop()
            lb, t, started, ends, starts, mds, hist = node
            thr = best_ms * (1.0 - OPTIMAL_RTOL)
            if lb >= thr:
                continue
            if (node_limit is not None and nodes >= node_limit) or time.perf_counter() > deadline:
                stack.append(node)
                open_lb = min(min(e[0] for e in stack), thr)
                break
            nodes += 1
            if t is None:
                T = 0.0
            else:
                T = min(ends[j] for j in range(n) if started >> j & 1 and ends[j] > t)
            ends, starts, mds = list(ends), list(starts), list(mds)
            done = 0
            for j in range(n):
                if started >> j & 1 and ends[j] <= T:
                    done |= 1 << j
            for i in range(n):  # delays start as soon as they are ready
                if not started >> i & 1 and delay[i] and pmask[i] & done == pmask[i]:
                    started |= 1 << i
                    starts[i], ends[i], mds[i] = T, T + ds[i][0], 0
            free = list(caps)
            run_min = _INF
            for j in range(n):
                if started >> j & 1 and ends[j] > T:
                    if ends[j] < run_min:
                        run_min = ends[j]
                    if not delay[j]:
                        free[kind[j]] -= ks[j][mds[j]]
            opts = []
            for i in range(n):
                if started >> i & 1 or pmask[i] & done != pmask[i]:
                    continue
                c = kind[i]
                ready = max((ends[q] for q in preds[i]), default=0.0)
                o = [m for m in range(len(ks[i]))
                     if ks[i][m] <= free[c] and T + ds[i][m] + tail[i] < thr
                     and not _shiftable(hist, ready, c, ks[i][m], T + ds[i][m], ks[i], ds[i])]
                opts.append((i, c, o))
            kids = []
            timed_out = False
            for count, ch in enumerate(_combos(opts, 0, list(free), (), started, tw, ks)):
                if count & 1023 == 1023 and time.perf_counter() > deadline:
                    timed_out = True
                    break
                if not ch and run_min == _INF:
                    continue
                st2, e2, s2, m2, fr2 = started, list(ends), list(starts), list(mds), list(free)
                tn = run_min
                for i, m in ch:
                    st2 |= 1 << i
                    e2[i], s2[i], m2[i] = T + ds[i][m], T, m
                    fr2[kind[i]] -= ks[i][m]
                    if e2[i] < tn:
                        tn = e2[i]
                if st2 == full:
                    ms = max(e2)
                    if ms < best_ms:
                        best_ms = ms
                        best = (s2, e2, [back[i][m] for i, m in enumerate(m2)])
                        found.append(best)
                        thr = best_ms * (1.0 - OPTIMAL_RTOL)
                    continue
                kc = [ks[j][m2[j]] if st2 >> j & 1 else 0 for j in range(n)]
                clb = md.bound(tn, st2, e2, kc, thr)
                if clb < thr:
                    kids.append((clb, T, st2, e2, s2, m2, (T, fr2, hist)))
            if timed_out:  # expand this node again later: its bound stays among the open ones
                stack.append(node)
                open_lb = min(min(e[0] for e in stack), thr)
                break
            kids.sort(key=lambda x: -x[0])
            stack.extend(kids)
    timing = Timing(tuple(best[0]), tuple(best[1]), tuple(best[2]))
    proven = open_lb == _INF
    lb = best_ms if proven else max(min(open_lb, best_ms), min(root_lb, best_ms))
    return BnbResult(timing, lb, proven, nodes, time.perf_counter() - t0,
                     tuple(Timing(tuple(b[0]), tuple(b[1]), tuple(b[2])) for b in found))


def _combos(opts, idx, free, chosen, started, tw, ks):
    """Yield every choice of (op, mode) among ``opts[idx:]`` that fits in ``free`` (twin order kept)."""
    if idx == len(opts):
        yield chosen
        return
    i, c, o = opts[idx]
    yield from _combos(opts, idx + 1, free, chosen, started, tw, ks)  # i waits
    a = tw[i]
    lo = 0
    if a >= 0 and not started >> a & 1:
        lo = next((m for j, m in chosen if j == a), None)
        if lo is None:  # its twin a waits: so does i
            return
    for m in o:
        k = ks[i][m]
        if m < lo or k > free[c]:
            continue
        free[c] -= k
        yield from _combos(opts, idx + 1, free, chosen + ((i, m),), started, tw, ks)
        free[c] += k
