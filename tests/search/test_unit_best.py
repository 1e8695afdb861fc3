"""A plan unit's best plan with as few exact layer schedules as it takes (``phaze.search.exact.unit_best``):
the same plan and throughput as the best over every setting's exact layer times, computed here directly, with
fewer schedules; and a chip just above (below) the incumbent is found exact (ruled out) as those times say."""
import dataclasses
import math

import pytest

import phaze.search.exact as exact
from phaze.hardware.space import DesignSpace
from phaze.search import SearchSpec, run_search
from phaze.search.executor import InlineExecutor
from tinysearch import MiB, TINY

pytestmark = pytest.mark.slow  # a 17-chip search without pruning, then each chip scheduled exactly again

SPACE = DesignSpace(num_tc=(4, 16), num_vc=(1, 4), tc_widths=(16, 64), tc_depths=(16,), glb_bytes=(2 * MiB,),
                    net_scale_up_chips=(16,), net_scale_up_Bps=(50e9,), net_topologies=("switch",),
                    net_scale_out_Bps=(12.5e9,))


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    """Every chip of SPACE evaluated without pruning (incumbent 0): its task and results."""
    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="unit", hbm_gib=(2,), microbatch_sizes=(1,),
                      devices=16, global_batch=32, plan_space_name="full")
    assert {s.recompute for s in spec.settings(TINY)} == {"none", "selective", "full"}
    got = []
    evaluate = exact.evaluate_chip

    def spy(task):
        out = evaluate(task)
        got.append((task, out))
        return out

    mp = pytest.MonkeyPatch()
    mp.setattr(exact, "evaluate_chip", spy)
    try:
        run_search(spec, str(tmp_path_factory.mktemp("unit") / "s.db"), executor=InlineExecutor(), quiet=True,
                   prune=False, why=False)
    finally:
        mp.undo()
    assert len(got) >= 4
    return got


def all_exact_best(task, gib):
    """(best plan or None, schedules solved): every setting's layer times scheduled exactly, then the best
    plan of each unit on them."""
    mt = task.models[0]
    counter = [0, 0, 0]
    times = [exact.setting_times(task, mt, i, counter, exact=True) for i in range(len(mt.memory))]
    best = None
    for idx in mt.unit_settings:
        costs = {mt.memory[i].setting: exact.with_times(mt.memory[i], times[i]) for i in idx}
        c = exact._best_uncached(costs, task, mt, gib, math.inf)
        if c is not None and (best is None or c.iteration_time_s < best.iteration_time_s):
            best = c
    return best, counter[0]


def test_unit_best_is_the_best_plan_on_every_settings_exact_times(evaluated):
    fewer = 0
    for task, results in evaluated:
        (r,) = results
        best, solved_all = all_exact_best(task, r.hbm_gib)
        assert best is not None and r.status == "exact"
        o = r.outcomes[0]
        assert o.throughput_seq_per_s == task.global_batch / best.iteration_time_s
        assert o.plan == best.plan.describe()
        assert r.schedules_solved <= solved_all
        fewer += r.schedules_solved < solved_all
    assert fewer == len(evaluated)  # every chip here: its best plan leaves a recompute mode unscheduled


@pytest.mark.parametrize("factor, status", [(1.001, "bounded"), (0.999, "exact")])
def test_a_chip_just_below_the_incumbent_is_ruled_out_and_just_above_is_exact(evaluated, factor, status):
    for task, results in evaluated:
        score = results[0].score
        (r,) = exact.evaluate_chip(dataclasses.replace(task, incumbent_score=score * factor))
        assert r.status == status
        if status == "exact":
            assert r.score == score and r.outcomes == results[0].outcomes
