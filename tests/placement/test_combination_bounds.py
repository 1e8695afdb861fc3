"""Every combination's lower bound (``placement.bounds.lower_bound_s``, as ``enumerate_combinations`` computes it)
is at most the iteration time of every plan of that combination. For interleaved combinations (v > 1) the
partition is fixed, so every plan is the balanced one with some recompute mode per device: all of them are
evaluated here (memory ignored, as the bound ignores it)."""
from __future__ import annotations

import itertools
import math

from helpers import two_tier_cluster
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st_
from test_dp_bruteforce import LANES, layer_costs

from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.combinations import SearchCounts, SearchShared, enumerate_combinations
from phaze.placement.plan import Plan
from phaze.placement.recompute import Recompute
from phaze.workload.runtime import PlanSpace


def _plans(k, L):
    """Every plan of interleaved combination ``k``: the balanced partition, each device any of its modes."""
    s = k.setting
    kw = dict(tp=s.tp, dp=k.dp, microbatch_size=s.microbatch_size, num_microbatches=k.num_microbatches,
              sequence_parallel=s.sequence_parallel, zero=k.zero, cp=s.cp, runtime=s.runtime)
    modes = list(k.costs) if k.mixed else [s.recompute]
    for choice in itertools.product(modes, repeat=k.pp):
        plan = Plan.balanced(L, k.pp, interleave=k.interleave, recompute=Recompute(choice), **kw)
        yield plan, ({r: k.costs[r] for r in set(choice)} if k.mixed else k.costs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st_.data(), L=st_.sampled_from([4, 6, 8, 12]), B=st_.sampled_from([4, 8, 12]),
       devices=st_.integers(2, 16), overlap=st_.booleans(), lanes=st_.sampled_from(LANES))
def test_interleaved_bounds_never_exceed_any_plan_of_their_combination(data, L, B, devices, overlap, lanes):
    costs = {}
    for rc in ("none", "full"):
        c = data.draw(layer_costs(mbs=1, tp=1, recompute=rc, overlap=overlap))
        costs[c.setting] = c
    cluster = two_tier_cluster(n=16, fast=4)
    dev = DeviceSpec(1e15, 1e12, 1e15, lane_ops_per_s=lanes)
    space = PlanSpace(interleave_values=(1, 2, 3, 4), zero=(0, 1, 2, 3), per_stage_recompute=True)
    combos = enumerate_combinations(costs, L, B, devices, dev, SearchShared(cluster), space, SearchCounts())
    checked = 0
    for k in combos:
        if k.interleave == 1:
            continue
        for plan, c in _plans(k, L):
            ev = evaluate_costs(plan, c, cluster, B, dev, num_blocks=L, overlap_dp=overlap)
            assert k.lower_bound_s <= ev.iteration_time_s * (1 + 1e-9), (k, plan.describe(), ev.iteration_time_s)
            checked += 1
    event(f"{'some' if checked else 'no'} interleaved plans")


def test_interleaved_bound_is_the_head_device_by_hand():
    """One interleaved combination by hand: L = 4 blocks of 1 s, p = 2, v = 2, no sends, no sync: the last device
    holds 2 blocks and a 5 s head, so max T >= 7 s where the perfect balance S / p gives (4 + 1 + 5) / 2 = 5 s;
    with m = 2 microbatches the bound is sum T / v + (m - 1/v) max T = 10 / 2 + 1.5 x 7 = 15.5 s (the plan's
    exact time, as nothing else costs)."""
    from helpers import lc

    from phaze.placement.layer_costs import LayerCosts
    from phaze.workload.runtime import PAPER_RUNTIME, TrainSetting

    s = TrainSetting(microbatch_size=1, seq_len=16, tp=1, recompute="none", runtime=PAPER_RUNTIME)
    c = LayerCosts(lc(0.5, 0.5), lc(0.5, 0.5), lc(2.5, 2.5), setting=s)
    cluster = two_tier_cluster(n=16, fast=4)
    dev = DeviceSpec(1e15, 1e12, 1e15)
    space = PlanSpace(interleave_values=(2,), zero=(0,), per_stage_recompute=False)
    combos = enumerate_combinations({s: c}, 4, 2, 2, dev, SearchShared(cluster), space, SearchCounts())
    (k,) = [k for k in combos if (k.pp, k.interleave, k.dp) == (2, 2, 1)]
    assert math.isclose(k.lower_bound_s, 15.5, rel_tol=1e-12)
    plan, _ = next(_plans(k, 4))
    assert math.isclose(evaluate_costs(plan, c, cluster, 2, dev, num_blocks=4, overlap_dp=False).iteration_time_s,
                        15.5, rel_tol=1e-12)
