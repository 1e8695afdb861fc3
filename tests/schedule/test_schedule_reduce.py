"""The safe reductions (fixed fastest modes, twin symmetry) and the energetic bound keep the optimum."""
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaze.schedule import SchedOp, ScheduleProblem, lower_bound_s, solve, validate
from phaze.schedule.bounds import energetic_bound_s
from phaze.schedule.reduce import isolated_fastest, overlappable, twins
from sched_refsolvers import brute_force_makespan, random_problem

RTOL = 1e-4


def with_twins(rng: random.Random, n: int, num_tc: int, num_vc: int) -> ScheduleProblem:
    """A random problem whose ops are duplicated (same modes, same neighbours): twins by construction."""
    base = random_problem(rng, n, num_tc, num_vc, 0.3)
    ops = base.ops + tuple(SchedOp(op.name + "'", op.kind, op.modes) for op in base.ops)
    edges = base.edges + tuple((a + n, b) for a, b in base.edges) + tuple((a, b + n) for a, b in base.edges) \
        + tuple((a + n, b + n) for a, b in base.edges)
    return ScheduleProblem(ops, edges, num_tc, num_vc)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 6), st.sampled_from([0.0, 0.3, 0.7]))
def test_isolated_fastest_keeps_the_optimum(seed, n, p_edge):
    rng = random.Random(seed)
    problem = random_problem(rng, n, rng.randint(1, 4), rng.randint(1, 3), p_edge)
    reduced = isolated_fastest(problem)
    best = brute_force_makespan(problem)
    assert abs(brute_force_makespan(reduced) - best) <= 1e-9 * best
    assert energetic_bound_s(problem) <= best * (1 + 1e-9)
    assert lower_bound_s(reduced) <= best * (1 + 1e-9)


def test_chain_ops_are_fixed_to_their_fastest_mode():
    ops = (SchedOp("a", "vc", ((1, 4.0), (2, 2.5))), SchedOp("g", "tc", ((1, 3.0), (2, 2.0))),
           SchedOp("w", "tc", ((1, 3.0), (2, 2.0))), SchedOp("b", "vc", ((1, 1.0), (2, 0.9))))
    p = ScheduleProblem(ops, ((0, 1), (0, 2), (1, 3)), num_tc=2, num_vc=2)
    assert overlappable(p) == [[], [2], [1], []]
    r = isolated_fastest(p)
    assert r.ops[0].modes == ((2, 2.5),) and r.ops[3].modes == ((2, 0.9),)
    assert r.ops[1].modes == p.ops[1].modes and r.ops[2].modes == p.ops[2].modes


def test_a_fixed_mode_keeps_its_own_bandwidth_rates():
    # the chain's vector ops are fixed to their fastest mode; each keeps that mode's (GLB, HBM) rate, and an op
    # left free keeps all of its rates (a fixed op with the other modes' rates would be refused)
    ops = (SchedOp("a", "vc", ((1, 4.0), (2, 2.5)), ((1e9, 2e9), (3e9, 4e9))),
           SchedOp("g", "tc", ((1, 3.0), (2, 2.0)), ((5e9, 6e9), (7e9, 8e9))),
           SchedOp("w", "tc", ((1, 3.0), (2, 2.0))), SchedOp("b", "vc", ((1, 1.0), (2, 0.9)), ((1e9, 0.0), (2e9, 0.0))))
    p = ScheduleProblem(ops, ((0, 1), (0, 2), (1, 3)), num_tc=2, num_vc=2, glb_supply_Bps=1e10, hbm_supply_Bps=1e10)
    r = isolated_fastest(p)
    assert r.ops[0].modes == ((2, 2.5),) and r.ops[0].rates == ((3e9, 4e9),)
    assert r.ops[3].modes == ((2, 0.9),) and r.ops[3].rates == ((2e9, 0.0),)
    assert r.ops[1] == p.ops[1] and r.ops[2] == p.ops[2]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 3))
def test_twin_symmetry_breaking_keeps_the_optimum(seed, n):
    rng = random.Random(seed)
    problem = with_twins(rng, n, rng.randint(1, 3), rng.randint(1, 2))
    assert twins(problem)
    best = brute_force_makespan(problem)
    sched = solve(problem, time_limit_s=2.0)
    validate(problem, sched)
    assert sched.lower_bound_s <= best * (1 + 1e-9) and sched.makespan_s >= best * (1 - 1e-9)
    if sched.status == "optimal":
        assert sched.makespan_s <= best * (1 + RTOL)


def test_energetic_bound_counts_the_idle_head():
    # v (vc, 1 s) precedes two tc ops of 2 core-s each on 2 cores: the tc cores idle for 1 s first.
    ops = (SchedOp("v", "vc", ((1, 1.0),)), SchedOp("g1", "tc", ((1, 2.0),)), SchedOp("g2", "tc", ((1, 2.0),)))
    p = ScheduleProblem(ops, ((0, 1), (0, 2)), num_tc=1, num_vc=1)
    assert energetic_bound_s(p) == 5.0 and lower_bound_s(p) == 5.0
