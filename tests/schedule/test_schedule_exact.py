"""CP-SAT against brute force and a HiGHS MILP on small random DAGs; bounds and heuristic around it."""
import random

import pytest
from hypothesis import HealthCheck, given, settings

from phaze.schedule import lower_bound_s, solve, validate
from phaze.schedule.cpsat import solve_cpsat
from phaze.schedule.heuristic import assign_cores, heuristic_timing, to_scheduled_ops
from phaze.schedule.problem import Schedule
from sched_refsolvers import brute_force_makespan, milp_makespan, random_problem, random_problems

# CP-SAT rounds durations up to ticks of heuristic_makespan / 2^20; n ops lose at most n ticks.
RTOL = 1e-4


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems())
def test_solve_and_cpsat_match_brute_force_and_bounds(problem):
    best = brute_force_makespan(problem)
    sched = solve(problem, time_limit_s=2.0)
    validate(problem, sched)
    # CP-SAT alone (solve() only reaches it when the branch and bound is unproven)
    hint = heuristic_timing(problem)
    cp = solve_cpsat(problem, hint, 10.0, det_limit=40.0)
    if cp.timing is not None:
        cp_sched = Schedule(cp.timing.makespan, cp.lower_bound_s, "feasible", 0.0, 0.0,
                            to_scheduled_ops(problem, cp.timing, cp.cores))
        validate(problem, cp_sched)
        assert cp.timing.makespan >= best * (1 - 1e-9)
        if cp.proven:
            assert cp.timing.makespan <= best * (1 + RTOL)
    assert cp.lower_bound_s <= best * (1 + 1e-9)
    assert sched.lower_bound_s <= best * (1 + 1e-9)
    assert sched.makespan_s >= best * (1 - 1e-9)
    assert lower_bound_s(problem) <= best * (1 + 1e-9)
    if sched.status == "optimal":
        assert sched.makespan_s <= best * (1 + RTOL)
    timing = heuristic_timing(problem)
    heur = Schedule(timing.makespan, 0.0, "heuristic", 1.0, 0.0,
                    to_scheduled_ops(problem, timing, assign_cores(problem, timing)))
    validate(problem, heur)
    assert heur.makespan_s >= best * (1 - 1e-9)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems(max_ops=5))
def test_brute_force_agrees_with_highs_milp(problem):
    assert milp_makespan(problem) == pytest.approx(brute_force_makespan(problem), rel=1e-6)


def test_seven_op_cases_against_milp():
    rng = random.Random(7)
    for _ in range(6):
        problem = random_problem(rng, 7, rng.randint(1, 3), rng.randint(1, 3), 0.3)
        sched = solve(problem, time_limit_s=2.0)
        validate(problem, sched)
        best = milp_makespan(problem)
        assert sched.makespan_s >= best * (1 - 1e-6)
        assert sched.lower_bound_s <= best * (1 + 1e-6)
        if sched.status == "optimal":
            assert sched.makespan_s <= best * (1 + RTOL)
