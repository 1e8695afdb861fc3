"""Hand-made cases with known optima, the validator, time limits, determinism and the cache."""
from dataclasses import replace

import pytest

from phaze.errors import ConfigError
from phaze.schedule import (SchedOp, ScheduleCache, ScheduleProblem, ScheduleViolation, problem_key, solve,
                            solve_cached, validate)


def chain():
    ops = (SchedOp("a", "tc", ((1, 4.0), (2, 2.5))), SchedOp("b", "vc", ((1, 1.0),)),
           SchedOp("c", "tc", ((1, 3.0), (2, 2.0))))
    return ScheduleProblem(ops, ((0, 1), (1, 2)), num_tc=2, num_vc=1)


def test_chain_takes_fastest_modes():
    s = solve(chain())
    validate(chain(), s)
    assert s.status == "optimal" and s.makespan_s == pytest.approx(5.5)
    assert s.ops[0].cores == ("tc0", "tc1")


def test_two_gemms_run_side_by_side_when_that_beats_serial():
    # On 2 cores each takes 3.0 (serial 6.0); on one core each 4.0 in parallel -> 4.0.
    ops = (SchedOp("g1", "tc", ((1, 4.0), (2, 3.0))), SchedOp("g2", "tc", ((1, 4.0), (2, 3.0))))
    p = ScheduleProblem(ops, (), num_tc=2, num_vc=1)
    s = solve(p)
    validate(p, s)
    assert s.makespan_s == pytest.approx(4.0, rel=1e-4) and s.status == "optimal"
    assert {s.ops[0].cores, s.ops[1].cores} == {("tc0",), ("tc1",)}


def test_two_gemms_serialize_on_all_cores_when_that_is_faster():
    ops = (SchedOp("g1", "tc", ((1, 4.0), (2, 1.5))), SchedOp("g2", "tc", ((1, 4.0), (2, 1.5))))
    p = ScheduleProblem(ops, (), num_tc=2, num_vc=1)
    s = solve(p)
    validate(p, s)
    assert s.makespan_s == pytest.approx(3.0, rel=1e-4) and s.status == "optimal"


def test_collective_overlaps_compute():
    # g1 -> allreduce (3 s) -> v ; g2 independent of the collective: overlaps it.
    ops = (SchedOp("g1", "tc", ((1, 2.0),)), SchedOp("ar", "net", ((1, 3.0),)), SchedOp("g2", "tc", ((1, 3.0),)),
           SchedOp("v", "vc", ((1, 1.0),)))
    p = ScheduleProblem(ops, ((0, 1), (1, 3), (0, 2), (2, 3)), num_tc=1, num_vc=1)
    s = solve(p)
    validate(p, s)
    assert s.makespan_s == pytest.approx(6.0) and s.status == "optimal"
    assert s.ops[1].cores == ("net0",)


def broken(s, i, **kw):
    ops = list(s.ops)
    ops[i] = replace(ops[i], **kw)
    return replace(s, ops=tuple(ops))


def test_validator_rejects_broken_schedules():
    p = chain()
    s = solve(p)
    with pytest.raises(ScheduleViolation, match="predecessor"):
        validate(p, broken(s, 1, start_s=0.0, end_s=1.0))
    ops = (SchedOp("g1", "tc", ((1, 4.0), (2, 3.0))), SchedOp("g2", "tc", ((1, 4.0), (2, 3.0))))
    q = ScheduleProblem(ops, (), num_tc=2, num_vc=1)
    t = solve(q)
    with pytest.raises(ScheduleViolation, match="overlap"):
        validate(q, broken(t, 1, cores=t.ops[0].cores))
    with pytest.raises(ScheduleViolation, match="not among"):
        validate(q, broken(t, 1, cores=("tc2",)))
    with pytest.raises(ScheduleViolation):
        validate(q, broken(t, 1, cores=("tc0", "tc1")))  # over capacity / wrong duration for 2 cores
    with pytest.raises(ScheduleViolation, match="makespan"):
        validate(q, replace(t, makespan_s=t.makespan_s + 1.0))
    with pytest.raises(ScheduleViolation, match="lasts"):
        validate(q, broken(t, 0, end_s=t.ops[0].end_s + 0.5))


def hard_problem():
    import random

    from sched_refsolvers import random_problem
    return random_problem(random.Random(3), 24, 3, 2, 0.0)


def test_tiny_time_limit_returns_incumbent():
    p = hard_problem()
    s = solve(p, time_limit_s=1e-3)
    validate(p, s)
    assert s.status in ("optimal", "feasible", "heuristic")
    assert s.lower_bound_s <= s.makespan_s and 0.0 <= s.gap <= 1.0


def test_bad_time_limit_and_zero_cores_are_user_errors():
    with pytest.raises(ConfigError):
        solve(chain(), time_limit_s=0)
    with pytest.raises(ConfigError):
        ScheduleProblem((), (), num_tc=0, num_vc=1)
    with pytest.raises(ConfigError, match="cycle"):
        ScheduleProblem((SchedOp("a", "vc", ((1, 1.0),)), SchedOp("b", "vc", ((1, 1.0),))), ((0, 1), (1, 0)), 1, 1)


def test_deterministic():
    p = hard_problem()
    a, b = solve(p, time_limit_s=0.5), solve(p, time_limit_s=0.5)
    if a.status == "optimal":
        assert a.ops == b.ops
    c, d = solve(chain()), solve(chain())
    assert c.ops == d.ops and c.makespan_s == d.makespan_s


def test_cache_hit_and_sqlite_survives_reopen(tmp_path):
    p = chain()
    cache = ScheduleCache(tmp_path / "s.sqlite")
    first = solve_cached(p, cache)
    second = solve_cached(p, cache)
    assert cache.hits == 1 and cache.misses == 1 and second == first
    renamed = ScheduleProblem(tuple(replace(op, name=op.name + "_x") for op in p.ops), p.edges, 2, 1)
    assert problem_key(renamed) == problem_key(p)
    hit = solve_cached(renamed, cache)
    validate(renamed, hit)
    cache.close()
    reopened = ScheduleCache(tmp_path / "s.sqlite")
    assert len(reopened) == 1
    again = solve_cached(p, reopened)
    assert reopened.hits == 1 and again.ops == first.ops and again.makespan_s == first.makespan_s
    slower = ScheduleProblem((replace(p.ops[0], modes=((1, 4.0), (2, 2.6))),) + p.ops[1:], p.edges, 2, 1)
    assert problem_key(slower) != problem_key(p)
