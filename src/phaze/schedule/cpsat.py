"""Exact multi-mode scheduling with OR-Tools CP-SAT on integer ticks.

Durations are rounded UP to ticks of ``tick_s``; every (op, mode) is an optional fixed-size interval with
its OWN start variable (the flexible-job-shop idiom; sharing one start between modes can yield a wrong
"optimal"), exactly one mode per op, one cumulative (or no-overlap) constraint per resource. The tick
solution is mapped back to real time by keeping each core's op order and re-timing with the real
durations (never later than the tick schedule). Rounding each of at most n ops up by < 1 tick costs at
most n ticks, so ``bound_ticks - n`` ticks is a valid real-time lower bound.

Search: ``num_workers`` subsolvers (LNS, LP-based, core-based ...) interleaved on ONE thread. With one
worker the deterministic-time budget (``DET_PER_S`` x the time limit) is enforced and ends the search
before the wall clock on this machine, so results repeat; with several, CP-SAT 9.x does not reliably
enforce it (measured: 0.06 units took 7 s), so the wall clock ends unproven searches and those (status
"feasible") can differ between runs. Every solution found is re-timed in real time; the search stops as
soon as one meets ``target_s`` (a valid real-time lower bound): it is then optimal.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from phaze.schedule.bounds import energetic_bound, heads_tails
from phaze.schedule.heuristic import Timing, assign_cores, retime
from phaze.schedule.problem import KINDS, ScheduleProblem
from phaze.schedule.reduce import overlappable, twins


@dataclass(frozen=True)
class CpResult:
    timing: Timing | None  # real-time timing of the best CP-SAT solution, None if it found none
    cores: list[tuple[int, ...]] | None  # core indices per op for ``timing``
    lower_bound_s: float  # valid for the real problem
    proven: bool  # the tick problem was solved to optimality


def _ticks(d: float, tick_s: float) -> int:
    t = max(1, math.ceil(d / tick_s))
    return t if t * tick_s >= d else t + 1


# CP-SAT deterministic-time units per second of limit. One worker did 0.5-1 unit/s on the hardest GPT layers
# here and 0.23 unit/s on a 27-op MoE block backward (1.07 s for its 0.25 units), so this budget ends a search
# within about the limit, and solve()'s wall-clock safety net (10 x the limit) never before it.
DET_PER_S = 0.07
OPTIMAL_RTOL = 1e-9


@functools.cache
def _tracker_class():
    """The solution callback class, defined at first use: OR-Tools (and the pandas it imports, 0.2 s) is loaded
    only by a process that runs CP-SAT, which a chip with shared bandwidth never does (``solver.solve``)."""
    from ortools.sat.python import cp_model

    class _Tracker(cp_model.CpSolverSolutionCallback):
        """Re-times each solution in real time, keeps the best, stops once it meets the target bound."""

        def __init__(self, problem: ScheduleProblem, start, choice, dur, target_s: float) -> None:
            super().__init__()
            self.problem, self.start, self.choice, self.dur, self.target_s = problem, start, choice, dur, target_s
            self.best: tuple[Timing, list] | None = None

        def on_solution_callback(self) -> None:
            modes = tuple(next(m for m, lit in ch if lit is None or self.boolean_value(lit)) for ch in self.choice)
            ops = self.problem.ops
            starts = tuple(self.value(s) for s in self.start)
            tick = Timing(starts, tuple(starts[i] + self.dur[i][m] for i, m in enumerate(modes)), modes)
            cores = assign_cores(self.problem, tick)
            real = retime(self.problem, tick, cores, [op.modes[modes[i]][1] for i, op in enumerate(ops)])
            if self.best is None or real.makespan < self.best[0].makespan:
                self.best = (real, cores)
            if real.makespan <= self.target_s * (1.0 + OPTIMAL_RTOL):
                self.stop_search()

    return _Tracker


def _contending(problem: ScheduleProblem) -> list[bool]:
    """False for an op whose largest mode plus the largest modes of every same-kind op it could overlap fit
    in the cores: at any instant it runs, its kind is within capacity whatever the others do, so it needs no
    resource constraint (a fixed-mode vector op on a backward block's chain is the common case)."""
    over = overlappable(problem)
    return [max(k for k, _ in op.modes) + sum(max(k for k, _ in problem.ops[j].modes) for j in over[i])
            > problem.capacity(op.kind) for i, op in enumerate(problem.ops)]


def solve_cpsat(problem: ScheduleProblem, hint: Timing, time_limit_s: float, num_workers: int = 1,
                random_seed: int = 0, resolution: int = 1 << 20, params: dict | None = None,
                target_s: float = 0.0, det_limit: float | None = None) -> CpResult:
    from ortools.sat.python import cp_model

    n = len(problem.ops)
    tick_s = hint.makespan / resolution
    dur = [[_ticks(d, tick_s) for _, d in op.modes] for op in problem.ops]
    # Horizon: the heuristic schedule re-timed with the rounded durations (same core orders).
    hint_cores = assign_cores(problem, hint)
    hint_t = retime(problem, hint, hint_cores, [dur[i][hint.modes[i]] for i in range(n)])
    horizon = int(round(hint_t.makespan))
    dmin = [min(ds) for ds in dur]
    head, tail = heads_tails(problem, [float(x) for x in dmin])
    head = [int(h) for h in head]
    tail = [int(t) for t in tail]

    model = cp_model.CpModel()
    start, end = [], []
    choice: list[list[tuple[int, object]]] = []  # per op: (mode index, literal or None if the only one)
    by_kind: dict[str, list[tuple[object, int]]] = {k: [] for k in KINDS}
    energy: dict[str, list] = {k: [] for k in KINDS}  # core-ticks of each op, as linear terms
    contends = _contending(problem)
    for i, op in enumerate(problem.ops):
        lo, hi = head[i], horizon - tail[i]
        s_i = model.new_int_var(lo, hi - dmin[i], f"s{i}")
        e_i = model.new_int_var(lo + dmin[i], hi, f"e{i}")
        start.append(s_i)
        end.append(e_i)
        allowed = [m for m in range(len(op.modes)) if lo + dur[i][m] <= hi]
        if len(allowed) == 1:
            m = allowed[0]
            if contends[i]:
                iv = model.new_interval_var(s_i, dur[i][m], e_i, f"iv{i}")
                by_kind[op.kind].append((iv, op.modes[m][0]))
            else:  # a pure delay: it can never push its cores over capacity
                model.add(e_i == s_i + dur[i][m])
            energy[op.kind].append(op.modes[m][0] * dur[i][m])
            choice.append([(m, None)])
            model.add_hint(s_i, int(hint_t.starts[i]))
            continue
        lits = []
        for m in allowed:
            lit = model.new_bool_var(f"x{i}_{m}")
            s_im = model.new_int_var(lo, hi - dur[i][m], f"s{i}_{m}")
            iv = model.new_optional_fixed_size_interval_var(s_im, dur[i][m], lit, f"iv{i}_{m}")
            model.add(s_i == s_im).only_enforce_if(lit)
            by_kind[op.kind].append((iv, op.modes[m][0]))
            energy[op.kind].append(op.modes[m][0] * dur[i][m] * lit)
            lits.append((m, lit))
            on = m == hint.modes[i]
            model.add_hint(lit, on)
            model.add_hint(s_im, int(hint_t.starts[i]) if on else lo)
        choice.append(lits)
        model.add_exactly_one(lit for _, lit in lits)
        model.add(e_i == s_i + sum(dur[i][m] * lit for m, lit in lits))
        model.add_hint(s_i, int(hint_t.starts[i]))
    makespan = model.new_int_var(0, horizon, "makespan")
    for kind, items in by_kind.items():
        if not items:
            continue
        cap = problem.capacity(kind)
        # Redundant energy row: core-ticks used <= cores x makespan (ties mode choices to the objective in the LP).
        model.add(sum(energy[kind]) <= cap * makespan)
        if cap == 1:
            model.add_no_overlap([iv for iv, _ in items])
        else:
            model.add_cumulative([iv for iv, _ in items], [k for _, k in items], cap)
    for a, b in problem.edges:
        model.add(start[b] >= end[a])
    work_lb = energetic_bound(problem, dmin, [min(k * dur[i][m] for m, (k, _) in enumerate(op.modes))
                                              for i, op in enumerate(problem.ops)])
    cp_lb = max(head[i] + dmin[i] + tail[i] for i in range(n))
    for group in twins(problem):  # interchangeable ops: any schedule can list them by start (safe)
        for a, b in zip(group, group[1:]):
            model.add(start[a] <= start[b])
    model.add(makespan >= min(max(cp_lb, work_lb), horizon))
    succs = problem.succs()
    for i in range(n):
        if not succs[i]:
            model.add(makespan >= end[i])
    model.minimize(makespan)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.max_deterministic_time = float(time_limit_s if det_limit is None else det_limit) * DET_PER_S
    solver.parameters.num_workers = int(num_workers)
    solver.parameters.interleave_search = True
    solver.parameters.random_seed = int(random_seed)
    for key, value in (params or {}).items():
        setattr(solver.parameters, key, value)
    tracker = _tracker_class()(problem, start, choice, dur, target_s)
    status = solver.solve(model, tracker)
    if status == cp_model.OPTIMAL:
        bound = solver.objective_value
    elif status == cp_model.FEASIBLE:
        bound = solver.best_objective_bound
    else:
        bound = max(cp_lb, work_lb)
    lb = max(0.0, (bound - n) * tick_s)
    if tracker.best is None:
        return CpResult(None, None, lb, False)
    return CpResult(tracker.best[0], tracker.best[1], lb, status == cp_model.OPTIMAL)
