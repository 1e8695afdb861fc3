"""Provably safe reductions of a scheduling problem: they keep its optimum and only remove choices.

- ``isolated_fastest``: an op of kind X whose fastest mode, together with the largest mode of every op of
  kind X it could overlap (neither an ancestor nor a descendant), fits in the X cores, never contends for
  cores in that mode. Proof: in an optimal schedule switch such ops to their fastest mode, keeping every
  start time. Each ends no later (successors stay feasible) and during its run the other X ops in use are
  among those it could overlap, whose demands sum to at most capacity minus its own. So the makespan does
  not grow, and fixing the fastest mode is safe. The common case: an op that cannot overlap any op of its
  kind at all (e.g. every vector op on a backward block's chain).
- ``twins``: groups of interchangeable ops (same kind, same modes, same predecessors and successors).
  Swapping two twins in any schedule gives a schedule, so ordering their starts is safe (symmetry breaking).
"""
from __future__ import annotations

from dataclasses import replace

from phaze.schedule.problem import ScheduleProblem, topo_order


def reachability(problem: ScheduleProblem) -> tuple[list[int], list[int]]:
    """Bitsets: anc[i] (ops that must end before i starts), desc[i] (ops that start after i ends)."""
    n = len(problem.ops)
    order = topo_order(n, problem.edges)
    preds, succs = problem.preds(), problem.succs()
    anc, desc = [0] * n, [0] * n
    for i in order:
        for p in preds[i]:
            anc[i] |= anc[p] | (1 << p)
    for i in reversed(order):
        for s in succs[i]:
            desc[i] |= desc[s] | (1 << s)
    return anc, desc


def overlappable(problem: ScheduleProblem) -> list[list[int]]:
    """Per op: the ops of the same kind that some feasible schedule could run at the same time."""
    anc, desc = reachability(problem)
    n = len(problem.ops)
    return [[j for j in range(n) if j != i and problem.ops[j].kind == problem.ops[i].kind
             and not (anc[i] >> j) & 1 and not (desc[i] >> j) & 1] for i in range(n)]


def isolated_fastest(problem: ScheduleProblem) -> ScheduleProblem:
    """The problem with every op that cannot contend in its fastest mode fixed to that mode."""
    over = overlappable(problem)
    ops = list(problem.ops)
    for i, op in enumerate(problem.ops):
        if len(op.modes) == 1:
            continue
        f = min(range(len(op.modes)), key=lambda m: (op.modes[m][1], op.modes[m][0]))
        others = sum(max(k for k, _ in problem.ops[j].modes) for j in over[i])
        if op.modes[f][0] + others <= problem.capacity(op.kind):
            ops[i] = replace(op, modes=(op.modes[f],), rates=(op.rates[f],) if op.rates else ())
    if ops == list(problem.ops):
        return problem
    return replace(problem, ops=tuple(ops))


def twins(problem: ScheduleProblem) -> list[list[int]]:
    """Groups (size >= 2, ascending) of ops with equal kind, modes, predecessor set and successor set."""
    preds, succs = problem.preds(), problem.succs()
    groups: dict[tuple, list[int]] = {}
    for i, op in enumerate(problem.ops):
        key = (op.kind, op.modes, tuple(sorted(preds[i])), tuple(sorted(succs[i])))
        groups.setdefault(key, []).append(i)
    return [g for g in groups.values() if len(g) > 1]
