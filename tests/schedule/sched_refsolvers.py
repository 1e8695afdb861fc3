"""Reference solvers for tiny scheduling problems, independent of phaze.schedule's solvers:
a branch-and-bound enumeration of all serial-SGS schedules, and a HiGHS MILP on dedicated cores."""
from __future__ import annotations

import itertools
import random

from phaze.schedule import SchedOp, ScheduleProblem, prune_modes


def random_problems(max_ops: int = 6, max_tc: int = 3):
    """Hypothesis strategy: ``random_problem`` with up to ``max_ops`` ops and ``max_tc`` tensor cores."""
    from hypothesis import strategies as st

    @st.composite
    def draw_problem(draw):
        seed = draw(st.integers(0, 2 ** 32 - 1))
        n = draw(st.integers(1, max_ops))
        return random_problem(random.Random(seed), n, draw(st.integers(1, max_tc)), draw(st.integers(1, 3)),
                              draw(st.sampled_from([0.0, 0.2, 0.4, 0.7])))
    return draw_problem()


def random_problem(rng: random.Random, n_ops: int, num_tc: int, num_vc: int, p_edge: float) -> ScheduleProblem:
    ops = []
    for i in range(n_ops):
        kind = rng.choice(["tc", "tc", "vc", "net"])
        cap = {"tc": num_tc, "vc": num_vc, "net": 1}[kind]
        ks = sorted({1, cap} | {2 ** j for j in range(4) if 2 ** j < cap})
        base = rng.choice([1, 2, 3, 5, 8]) * rng.uniform(0.9, 1.1)
        ops.append(SchedOp(f"op{i}", kind, prune_modes((k, base / k ** rng.uniform(0.2, 1.0)) for k in ks)))
    edges = tuple((a, b) for a, b in itertools.combinations(range(n_ops), 2) if rng.random() < p_edge)
    return ScheduleProblem(tuple(ops), edges, num_tc, num_vc)


def _usage_ok(placed, t, d, need, cap) -> bool:
    """Sweep the events of already placed intervals overlapping [t, t+d)."""
    events = []
    for s, e, k in placed:
        if s < t + d and t < e:
            events.append((max(s, t), k))
            events.append((e, -k))
    level = 0
    for _, delta in sorted(events, key=lambda ev: (ev[0], ev[1])):
        level += delta
        if level + need > cap:
            return False
    return True


def brute_force_makespan(problem: ScheduleProblem) -> float:
    """Optimum over every precedence-feasible op list and every mode choice, each op at its earliest
    resource-feasible start (these generate all active schedules, one of which is optimal)."""
    n = len(problem.ops)
    preds = problem.preds()
    best = [sum(max(d for _, d in op.modes) for op in problem.ops) + 1.0]
    ends = [0.0] * n
    placed = {"tc": [], "vc": [], "net": []}
    done = [False] * n

    def rec(count: int, cur: float) -> None:
        if cur >= best[0] - 1e-12:
            return
        if count == n:
            best[0] = cur
            return
        for i in range(n):
            if done[i] or not all(done[p] for p in preds[i]):
                continue
            op = problem.ops[i]
            ready = max((ends[p] for p in preds[i]), default=0.0)
            cap = problem.capacity(op.kind)
            for k, d in op.modes:
                times = sorted({ready} | {e for _, e, _ in placed[op.kind] if e > ready})
                t = next(t for t in times if _usage_ok(placed[op.kind], t, d, k, cap))
                done[i], ends[i] = True, t + d
                placed[op.kind].append((t, t + d, k))
                rec(count + 1, max(cur, t + d))
                placed[op.kind].pop()
                done[i] = False

    rec(0, 0.0)
    return best[0]


def milp_makespan(problem: ScheduleProblem) -> float:
    """Dedicated-core MILP (binary core assignment, big-M disjunctions per pair and core) with HiGHS."""
    import highspy

    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", 1e-9)
    h.setOptionValue("mip_abs_gap", 1e-12)
    big = sum(max(d for _, d in op.modes) for op in problem.ops)
    n = len(problem.ops)
    start = [h.addVariable(lb=0, ub=big) for _ in range(n)]
    dur, use = [], []
    for op in problem.ops:
        xs = [h.addBinary() for _ in op.modes]
        h.addConstr(sum(xs) == 1)
        dur.append(sum(d * x for (_, d), x in zip(op.modes, xs)))
        ys = [h.addBinary() for _ in range(problem.capacity(op.kind))]
        h.addConstr(sum(ys) == sum(k * x for (k, _), x in zip(op.modes, xs)))
        use.append(ys)
    for a, b in problem.edges:
        h.addConstr(start[b] >= start[a] + dur[a])
    for i, j in itertools.combinations(range(n), 2):
        if problem.ops[i].kind != problem.ops[j].kind:
            continue
        z = h.addBinary()  # 1: i before j
        for c in range(problem.capacity(problem.ops[i].kind)):
            both = 2 - use[i][c] - use[j][c]
            h.addConstr(start[j] >= start[i] + dur[i] - big * (1 - z) - big * both)
            h.addConstr(start[i] >= start[j] + dur[j] - big * z - big * both)
    cmax = h.addVariable(lb=0, ub=big)
    for i in range(n):
        h.addConstr(cmax >= start[i] + dur[i])
    h.minimize(cmax)
    assert h.modelStatusToString(h.getModelStatus()) == "Optimal"
    return h.getInfo().objective_function_value
