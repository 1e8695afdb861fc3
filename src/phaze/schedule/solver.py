"""``solve``: bounds and the list-scheduling heuristic first; where they differ, an exact branch and bound
(``bnb``), and CP-SAT (``cpsat``) only for what the branch and bound leaves unproven, where nothing shares
bandwidth (with shared bandwidth, ``solve`` docstring, the schedules the branch and bound passed through are
re-timed instead)."""
from __future__ import annotations

import time

from phaze.errors import ConfigError
from phaze.schedule.bandwidth import best_shared
from phaze.schedule.bnb import BnbResult, solve_bnb
from phaze.schedule.bounds import bandwidth_bound_s, lower_bound_s
from phaze.schedule.cpsat import solve_cpsat
from phaze.schedule.heuristic import assign_cores, heuristic_timing, to_scheduled_ops
from phaze.schedule.problem import Schedule, ScheduleProblem, problem_key
from phaze.schedule.reduce import isolated_fastest

OPTIMAL_RTOL = 1e-9  # upper and lower bound this close (relative): proven optimal
# Branch-and-bound nodes allowed per second of time limit. A node count, not the clock, ends the search,
# so results do not depend on the machine's speed or load. About 3,000 nodes/s were measured here; the
# hardest layer proofs of the benchmarks took < 2,000 nodes (benchmarks/bench_bnb.py).
BNB_NODES_PER_S = 2000
# The wall clock only as a safety net, at this many times the time limit: the node budget above and CP-SAT's
# deterministic-time budget (``cpsat.DET_PER_S``) end every search on this machine well before it, loaded or
# not. (At 0.9 x the limit it did bind: a 27-op MoE block backward ran its BnB for 0.27 s and CP-SAT to the
# wall at 1.0 s, so its schedule, and a search's stored throughput, changed with the machine's load.)
WALL_SAFETY = 10.0


# Branch-and-bound results of this process by the problem the solvers see (full-bandwidth durations, no op
# names): chips that differ only in what the re-timing under shared bandwidth reads (rates, supply), and the
# caches of different tasks, meet the same problem. Bounded so a long search does not grow it without end.
_BNB_MEMO: dict[str, tuple[int, BnbResult]] = {}
BNB_MEMO_SIZE = 4096


def _bnb_memoized(problem: ScheduleProblem, wall_s: float, node_limit: int, upper) -> BnbResult:
    """``solve_bnb(problem, wall_s, node_limit, upper=upper)``, ``upper`` being the heuristic's schedule of
    ``problem`` (so a function of the problem). A stored result answers a node limit equal to its own, or any
    limit at least its node count if it was proven: the search is deterministic and expands the same nodes in
    the same order up to its limit, so a proof within N nodes is the same under any limit >= N. A result the
    wall clock ended (unproven under its node limit) is not stored."""
    key = problem_key(problem)
    hit = _BNB_MEMO.get(key)
    if hit is not None and (hit[0] == node_limit or (hit[1].proven and hit[1].nodes <= node_limit)):
        return hit[1]
    bb = solve_bnb(problem, wall_s, node_limit, upper=upper)
    if bb.proven or bb.nodes >= node_limit:
        if len(_BNB_MEMO) >= BNB_MEMO_SIZE:
            _BNB_MEMO.pop(next(iter(_BNB_MEMO)))
        _BNB_MEMO[key] = (node_limit, bb)
    return bb


def solve(problem: ScheduleProblem, time_limit_s: float = 5.0, exact: bool = True, *,
          num_workers: int = 1, random_seed: int = 0, params: dict | None = None) -> Schedule:
    """Minimum-makespan schedule of one layer on one chip. Never raises on time-out: returns the best
    schedule found with a valid lower bound; ``status`` is "optimal" (proven: by the bounds or the branch
    and bound, to a relative 1e-9; by CP-SAT, up to its tick rounding: within n_ops ticks of 2^-20 x the
    heuristic makespan), "feasible" (an incumbent without proof) or "heuristic" (list scheduling only).
    Ops that can never contend are first fixed to their fastest mode (``reduce.isolated_fastest``, optimum
    unchanged). With shared bandwidth (``ScheduleProblem.shares_bandwidth``) the solvers work on the
    full-bandwidth durations, and each schedule the branch and bound improved on its way (from the heuristic's
    to its best) is re-timed so concurrent ops never draw more than the supply; the shortest of these, or a
    shorter schedule that keeps the supply, is returned (``phaze.schedule.bandwidth.best_shared``). The
    full-bandwidth optimum is not always the best start: on the demo's 874 distinct backward-layer problems
    this gave layer times up to 12% shorter (1.3% on average) than re-timing the optimum alone (docs/changes.md,
    session 27). So CP-SAT, which only proves or improves that optimum, is not run then: adding its schedule
    to the candidates changed one of those layers, by 0.09%, for 47% more time. ``status`` stays the branch
    and bound's proof on the full-bandwidth durations and
    ``gap`` measures the returned makespan against the lower bound.
    Deterministic: ``time_limit_s`` is a work budget, not a deadline: the branch and bound stops after
    ``BNB_NODES_PER_S x time_limit_s`` nodes and CP-SAT (``num_workers`` subsolvers; 1 = one deterministic
    worker) after ``cpsat.DET_PER_S x time_limit_s`` deterministic-time units, which take about
    ``time_limit_s`` on this 2-core machine; the wall clock (``WALL_SAFETY x time_limit_s``) is only a
    safety net (on a machine over ten times slower it may end a search first, and then results may vary)."""
    if not time_limit_s > 0:
        raise ConfigError(f"schedule: time limit must be positive seconds, got {time_limit_s!r}")
    t0 = time.perf_counter()
    # the solvers see the durations only (every op at full bandwidth); shared bandwidth is applied after
    original, problem = problem, isolated_fastest(problem.relaxed())  # same optimum, fewer mode choices
    lb = lower_bound_s(problem)
    timing = heuristic_timing(problem)
    cores = assign_cores(problem, timing)
    starts = [timing]  # full-bandwidth schedules the re-timing under shared bandwidth starts from
    status = "heuristic"
    if timing.makespan <= lb * (1.0 + OPTIMAL_RTOL):
        status = "optimal"
    elif exact:
        wall_s = WALL_SAFETY * time_limit_s
        bb = _bnb_memoized(problem, wall_s, max(100, int(BNB_NODES_PER_S * time_limit_s)), timing)
        lb = max(lb, bb.lower_bound_s)
        starts = list(bb.improvements)
        if bb.timing.makespan < timing.makespan:
            timing, cores = bb.timing, assign_cores(problem, bb.timing)
        status = "optimal" if bb.proven else "feasible"
        if not bb.proven and not original.shares_bandwidth:  # the same budget whatever the BnB's wall time was
            left_s = max(1e-3, wall_s - (time.perf_counter() - t0))
            res = solve_cpsat(problem, timing, left_s, num_workers=num_workers, random_seed=random_seed,
                              params=params, target_s=lb, det_limit=time_limit_s)
            lb = max(lb, res.lower_bound_s)
            if res.timing is not None:
                status = "optimal" if res.proven else "feasible"
                if res.timing.makespan < timing.makespan:
                    timing, cores = res.timing, res.cores
    makespan = timing.makespan
    lb = min(lb, makespan)
    if makespan <= lb * (1.0 + OPTIMAL_RTOL):
        status = "optimal"
    ops, relaxed = to_scheduled_ops(original, timing, cores), None
    if original.shares_bandwidth:  # re-timed under shared bandwidth, or the serial schedule if shorter
        relaxed = makespan
        lb = max(lb, bandwidth_bound_s(original))
        # the solvers' best first, then the schedules it improved on (the first of equal makespans is kept)
        ops = best_shared(original, [ops] + [to_scheduled_ops(original, t, assign_cores(problem, t))
                                             for t in reversed(starts) if t != timing])
        makespan = max((so.end_s for so in ops), default=0.0)
        lb = min(lb, makespan)
    gap = (makespan - lb) / makespan if makespan > 0 else 0.0
    return Schedule(makespan_s=makespan, lower_bound_s=lb, status=status, gap=gap,
                    solve_time_s=time.perf_counter() - t0, ops=ops, relaxed_makespan_s=relaxed)
