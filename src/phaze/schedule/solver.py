"""``solve``: bounds first, then the list-scheduling heuristic, then CP-SAT only where they differ."""
from __future__ import annotations

import time

from phaze.errors import ConfigError
from phaze.schedule.bounds import lower_bound_s
from phaze.schedule.cpsat import solve_cpsat
from phaze.schedule.heuristic import assign_cores, heuristic_timing, to_scheduled_ops
from phaze.schedule.problem import Schedule, ScheduleProblem
from phaze.schedule.reduce import isolated_fastest

OPTIMAL_RTOL = 1e-9  # upper and lower bound this close (relative): proven optimal without CP-SAT


def solve(problem: ScheduleProblem, time_limit_s: float = 5.0, exact: bool = True, *,
          num_workers: int = 8, random_seed: int = 0, params: dict | None = None) -> Schedule:
    """Minimum-makespan schedule of one layer on one chip. Never raises on time-out: returns the best
    schedule found with a valid lower bound; ``status`` is "optimal" (proven, up to CP-SAT's tick
    rounding: within n_ops ticks of 2^-20 x the heuristic makespan), "feasible" (CP-SAT incumbent) or
    "heuristic" (list scheduling only). Ops that can never contend are first fixed to their fastest mode
    (``reduce.isolated_fastest``, optimum unchanged); ``num_workers`` CP-SAT subsolvers share one thread."""
    if not time_limit_s > 0:
        raise ConfigError(f"schedule: time limit must be positive seconds, got {time_limit_s!r}")
    t0 = time.perf_counter()
    original, problem = problem, isolated_fastest(problem)  # same optimum, fewer mode choices
    lb = lower_bound_s(problem)
    timing = heuristic_timing(problem)
    cores = assign_cores(problem, timing)
    status = "heuristic"
    if timing.makespan <= lb * (1.0 + OPTIMAL_RTOL):
        status = "optimal"
    elif exact:
        res = solve_cpsat(problem, timing, max(time_limit_s - (time.perf_counter() - t0), 1e-3),
                          num_workers=num_workers, random_seed=random_seed, params=params,
                          target_s=lb, det_limit=time_limit_s)
        lb = max(lb, res.lower_bound_s)
        if res.timing is not None:
            status = "optimal" if res.proven else "feasible"
            if res.timing.makespan < timing.makespan:
                timing, cores = res.timing, res.cores
    makespan = timing.makespan
    lb = min(lb, makespan)
    if makespan <= lb * (1.0 + OPTIMAL_RTOL):
        status = "optimal"
    gap = (makespan - lb) / makespan if makespan > 0 else 0.0
    return Schedule(makespan_s=makespan, lower_bound_s=lb, status=status, gap=gap,
                    solve_time_s=time.perf_counter() - t0, ops=to_scheduled_ops(original, timing, cores))
