"""Cheap lower bounds on a layer's makespan (scalar, one chip)."""
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


def lower_bound_s(problem: ScheduleProblem) -> float:
    return max(critical_path_s(problem), work_bound_s(problem))
