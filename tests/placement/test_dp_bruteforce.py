"""The partition solver (one recompute mode: ``mixed_dp``'s one-mode case) and the plan search equal brute force over every plan on small instances."""
from __future__ import annotations

import math

import pytest

from helpers import brute_force, compositions, lc, plan_of, two_tier_cluster
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st_

from phaze.placement import stage as st
from phaze.placement.mixed_dp import MixedPartitionProblem
from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.layer_costs import LayerCosts
from phaze.placement.optimizer import best_plans_from_costs
from phaze.workload.runtime import PAPER_RUNTIME, PlanSpace, TrainSetting

pos = st_.floats(min_value=0.01, max_value=10.0)
# vector-lane rates of the optimizer step: unbound, HBM-bound (1e12 B/s HBM), lane-bound by up to ~0.1 s
LANES = (math.inf, 1e12, 1e9)


@st_.composite
def layer_costs(draw, mbs=1, tp=1, recompute="none", overlap=True):
    def one(emb=False, head=False):
        bf = 0.0 if head else draw(st_.sampled_from([1e6, 1e6, 3e6]))
        bb = 0.0 if emb else draw(st_.sampled_from([1e6, 1e6, 5e5]))
        return lc(draw(pos), draw(pos), params=draw(st_.integers(1, 5_000_000)),
                  act=draw(st_.floats(0, 5e7)), bf=bf, bb=bb, working=draw(st_.sampled_from([0.0, 1e6, 2e7])),
                  tied=0)
    E, Bk, H = one(emb=True), one(), one(head=True)
    if draw(st_.booleans()):  # tied LM head
        from dataclasses import replace
        H = replace(H, tied_params=min(E.params, H.params))
    s = TrainSetting(microbatch_size=mbs, seq_len=16, tp=tp, recompute=recompute,
                     runtime=PAPER_RUNTIME.with_(dp_overlap=overlap))
    return LayerCosts(E, Bk, H, setting=s)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(c=layer_costs(), L=st_.integers(1, 6), p=st_.integers(1, 8), m=st_.integers(1, 6), d=st_.integers(1, 3),
       cap=st_.floats(1e7, 5e8), zero=st_.sampled_from((0, 1, 2, 3)), overlap=st_.booleans(),
       lanes=st_.sampled_from(LANES))
def test_partition_dp_equals_brute_force(c, L, p, m, d, cap, zero, overlap, lanes):
    if p > L + 2:
        return
    cluster = two_tier_cluster(n=64, fast=2)
    topo = st.Topology.of(cluster, 1, d, p)
    dev = DeviceSpec(cap, 1e12, 1e15, lane_ops_per_s=lanes)
    sol = MixedPartitionProblem({"none": c}, L, p, m, topo, cap, zero, overlap, dev.hbm_Bps,
                                lane_ops_per_s=dev.lane_ops_per_s).solve()
    best, B = math.inf, m * d
    for bl in compositions(L, p):
        plan = plan_of(bl, tp=1, dp=d, microbatch_size=1, num_microbatches=m, zero=zero)
        ev = evaluate_costs(plan, c, cluster, B, dev, num_blocks=L, overlap_dp=overlap)
        if ev.fits:
            best = min(best, ev.iteration_time_s)
    event("feasible" if math.isfinite(best) else "infeasible")
    if math.isinf(best):
        assert sol is None
    else:
        assert sol is not None
        assert math.isclose(sol.objective_s, best, rel_tol=1e-9), (sol, best)
        plan = plan_of(sol.blocks, tp=1, dp=d, microbatch_size=1, num_microbatches=m, zero=zero)
        ev = evaluate_costs(plan, c, cluster, B, dev, num_blocks=L, overlap_dp=overlap)
        assert ev.fits and math.isclose(ev.iteration_time_s, best, rel_tol=1e-9)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st_.data(), L=st_.integers(1, 4), B=st_.sampled_from([2, 4, 6, 8]), devices=st_.integers(1, 12),
       cap=st_.floats(2e7, 5e8), overlap=st_.booleans(), lanes=st_.sampled_from(LANES))
def test_search_equals_brute_force_over_all_plans(data, L, B, devices, cap, overlap, lanes):
    costs = {}
    for mbs in (1, 2):
        for tp in (1, 2):
            for rc in ("none", "full"):
                c = data.draw(layer_costs(mbs=mbs, tp=tp, recompute=rc, overlap=overlap))
                costs[c.setting] = c
    cluster = two_tier_cluster(n=16, fast=4)
    dev = DeviceSpec(cap, 1e12, 1e15, lane_ops_per_s=lanes)
    # overlap_dp comes from the settings' runtime (layer_costs(overlap=...))
    space = PlanSpace(interleave_values=(1, 2), zero=(0, 1, 2, 3), per_stage_recompute=False)
    cands, stats, reason = best_plans_from_costs(costs, L, cluster, B, dev, space, devices=devices, top_k=3)
    ref = brute_force(costs, L, cluster, B, dev, devices=devices, interleave_values=(1, 2),
                      zero=(0, 1, 2, 3), overlap=overlap)
    event("feasible" if math.isfinite(ref) else "infeasible")
    if math.isinf(ref):
        assert not cands and reason
    else:
        assert cands, reason
        assert math.isclose(cands[0].iteration_time_s, ref, rel_tol=1e-9), (cands[0], ref)
        times = [x.iteration_time_s for x in cands]
        assert times == sorted(times)
