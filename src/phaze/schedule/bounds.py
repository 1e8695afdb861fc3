"""Cheap lower bounds on a layer's makespan (scalar, one chip).

- critical path: the longest dependency chain with every op in its fastest mode;
- work: per resource, the least total core-seconds over the core count;
- energetic (heads and tails): for any set S of ops of one kind, all of S runs inside
  [min head, makespan - min tail] on ``capacity`` cores, so makespan >= min_S head + work(S) / capacity +
  min_S tail (heads and tails are critical-path lengths with fastest modes; work uses least-work modes).
  Checking the sets {i: head_i >= r, tail_i >= q} over all r, q covers the strongest such bound;
- bandwidth (ops that share the GLB/HBM supply, ``phaze.schedule.bandwidth``): the energetic bound with
  the supply as the capacity and each op's bytes as its work (the layer's bytes over the supply, and better
  where some ops must run before or after the others).
"""
from __future__ import annotations

from phaze.schedule.problem import KINDS, ScheduleProblem, topo_order


def heads_tails(problem: ScheduleProblem, durations: list[float]) -> tuple[list[float], list[float]]:
    """head[i]: longest path ending just before op i; tail[i]: longest path starting just after op i."""
    n = len(problem.ops)
    order = topo_order(n, problem.edges)
    preds, succs = problem.preds(), problem.succs()
    head = [0.0] * n
    for i in order:
        head[i] = max((head[p] + durations[p] for p in preds[i]), default=0.0)
    tail = [0.0] * n
    for i in reversed(order):
        tail[i] = max((tail[s] + durations[s] for s in succs[i]), default=0.0)
    return head, tail


def critical_path_s(problem: ScheduleProblem) -> float:
    """Longest dependency chain with every op in its fastest mode."""
    d = [op.min_duration_s for op in problem.ops]
    head, _ = heads_tails(problem, d)
    return max((head[i] + d[i] for i in range(len(d))), default=0.0)


def work_bound_s(problem: ScheduleProblem) -> float:
    """Per resource: least total core-seconds over the core count; the max over resources."""
    best = 0.0
    for kind in KINDS:
        work = sum(op.min_work_s for op in problem.ops if op.kind == kind)
        best = max(best, work / problem.capacity(kind))
    return best


def window_bound(head: list, tail: list, idx: list[int], works: list, capacity, integral: bool = False):
    """max over r, q of r + work({i in idx: head_i >= r, tail_i >= q}) / capacity + q: the ops of such a set
    all run inside [r, makespan - q] and need ``works`` of a resource that delivers ``capacity`` per unit
    time (``integral``: integer ticks, the work term rounded up)."""
    best = 0
    for r in sorted({head[i] for i in idx}):
        chosen = sorted((i for i in idx if head[i] >= r), key=lambda i: -tail[i])
        acc = 0
        for i in chosen:  # prefix of decreasing tails: the set {tail >= tail[i]} (ties fill in order)
            acc += works[i]
            energy = -(-acc // capacity) if integral else acc / capacity
            best = max(best, r + energy + tail[i])
    return best


def energetic_bound(problem: ScheduleProblem, durations: list, works: list):
    """max over kinds and (r, q) of r + work({i of kind: head_i >= r, tail_i >= q}) / capacity + q, for
    least durations and works given per op (seconds, or integer ticks: then the work term is rounded up)."""
    head, tail = heads_tails(problem, durations)
    integral = all(isinstance(x, int) for x in list(durations) + list(works))
    best = 0
    for kind in KINDS:
        idx = [i for i, op in enumerate(problem.ops) if op.kind == kind]
        best = max(best, window_bound(head, tail, idx, works, problem.capacity(kind), integral))
    return int(round(best)) if integral else best


def energetic_bound_s(problem: ScheduleProblem) -> float:
    return float(energetic_bound(problem, [op.min_duration_s for op in problem.ops],
                                 [op.min_work_s for op in problem.ops]))


def bandwidth_bound_s(problem: ScheduleProblem) -> float:
    """A lower bound on the makespan of any schedule that keeps the shared supply (the re-timed and the serial
    one included): every op moves at least its least GLB (HBM) bytes over its modes (rate x duration: the same
    bytes at any speed), inside [its head, makespan - its tail] (fastest modes), and the chip delivers at most
    its supply per second; so for each window of heads and tails, the bytes of the ops inside it over the supply
    (``window_bound``; the whole layer's bytes over the supply is one of them)."""
    if not problem.shares_bandwidth:
        return 0.0
    head, tail = heads_tails(problem, [op.min_duration_s for op in problem.ops])
    best = 0.0
    for r, supply in ((0, problem.glb_supply_Bps), (1, problem.hbm_supply_Bps)):
        moved = [min((rate[r] * d for (_, d), rate in zip(op.modes, op.rates)), default=0.0) if op.rates else 0.0
                 for op in problem.ops]
        idx = [i for i, b in enumerate(moved) if b > 0]
        best = max(best, window_bound(head, tail, idx, moved, supply))
    return best


def lower_bound_s(problem: ScheduleProblem) -> float:
    """The strongest of the bounds above (the bandwidth bound only counts with shared bandwidth: a relaxed
    problem, ``ScheduleProblem.relaxed``, has none)."""
    return max(critical_path_s(problem), work_bound_s(problem), energetic_bound_s(problem),
               bandwidth_bound_s(problem))
