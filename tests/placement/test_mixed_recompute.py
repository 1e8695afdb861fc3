"""Per-stage recompute: the mixed partition DP and the plan search equal brute force over every partition
x every per-stage mode vector on small instances; a hand-made case where mixing strictly wins."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
from helpers import PLAN_RUNTIME, brute_force_mixed, compositions, lc, mode_vectors, plan_of, two_tier_cluster
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st_

from phaze.placement import stage as st
from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.layer_costs import LayerCosts
from phaze.placement.mixed_dp import MixedPartitionProblem
from phaze.placement.optimizer import best_plans_from_costs
from phaze.placement.recompute import Recompute
from phaze.workload.runtime import PAPER_RUNTIME, PlanSpace, TrainSetting

pos = st_.floats(min_value=0.01, max_value=10.0)
MODES = ("none", "selective", "full")


def space(**kw) -> PlanSpace:
    """The plan space best_plans_from_costs searched by default before it took one: v in (1, 2, 4), no ZeRO-1,
    one recompute mode per plan, fewer devices allowed."""
    kw.setdefault("zero", (False,))
    kw.setdefault("per_stage_recompute", False)
    return PlanSpace(**kw)


@st_.composite
def costs_by_mode(draw, modes=MODES, mbs=1, tp=1, overlap=True):
    """{mode: LayerCosts} sharing parameters and boundaries (as phaze builds them) with per-mode times,
    stashed activations and recompute buffers: usually ordered like real recompute (more recompute, longer
    backward, smaller stash), sometimes arbitrary; rarely per-mode parameters too."""
    ordered = draw(st_.booleans()) or draw(st_.booleans())
    own_params = draw(st_.integers(0, 9)) == 0

    def kind(emb=False, head=False):
        bf = 0.0 if head else draw(st_.sampled_from([1e6, 1e6, 3e6]))
        bb = 0.0 if emb else draw(st_.sampled_from([1e6, 1e6, 5e5]))
        params = draw(st_.integers(1, 5_000_000))
        fwd, bwd, act = draw(pos), draw(pos), draw(st_.floats(1e5, 5e7))
        out = {}
        for i, mode in enumerate(modes):
            if ordered:
                b, a = bwd + i * fwd * draw(st_.floats(0.0, 1.0)), act / (1 + i * draw(st_.floats(0.0, 20.0)))
            else:
                b, a = draw(pos), draw(st_.floats(0, 5e7))
            out[mode] = lc(fwd, b, params=draw(st_.integers(1, 5_000_000)) if own_params else params, act=a,
                           bf=bf, bb=bb, working=draw(st_.sampled_from([0.0, 1e6, 2e7])) if i else 0.0)
        return out

    E, Bk, H = kind(emb=True), kind(), kind(head=True)
    tied = draw(st_.booleans())
    res = {}
    for mode in modes:
        h = replace(H[mode], tied_params=min(E[mode].params, H[mode].params)) if tied else H[mode]
        s = TrainSetting(microbatch_size=mbs, seq_len=16, tp=tp, recompute=mode,
                         runtime=PAPER_RUNTIME.with_(dp_overlap=overlap))
        res[mode] = LayerCosts(E[mode], Bk[mode], h, setting=s)
    return res


def _tight_capacity(data, costs, L, p, m) -> float:
    """A per-device capacity around what an even split needs without recompute, so that memory binds and
    mixing modes often pays."""
    c = costs[next(iter(costs))]
    static = sum(n * x.static_bytes for n, x in ((1, c.embedding), (L, c.block), (1, c.head)))
    act = max(sum(n * x.activation_bytes for n, x in ((1, y.embedding), (L, y.block), (1, y.head)))
              for y in costs.values())
    return data.draw(st_.floats(0.3, 1.5)) * (static + min(p, m) * act) / p


def _best_by_brute_force(costs, L, p, m, d, cluster, dev, zero, overlap, modes):
    best, best_uniform = math.inf, math.inf
    for bl in compositions(L, p):
        for rc in mode_vectors(modes, p):
            plan = plan_of(bl, tp=1, dp=d, microbatch_size=1, num_microbatches=m, zero=zero, recompute=rc, runtime=PLAN_RUNTIME)
            ev = evaluate_costs(plan, costs, cluster, m * d, dev, num_blocks=L, overlap_dp=overlap)
            if ev.fits:
                best = min(best, ev.iteration_time_s)
                if rc.is_uniform:
                    best_uniform = min(best_uniform, ev.iteration_time_s)
    return best, best_uniform


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st_.data(), L=st_.integers(1, 5), p=st_.integers(1, 4), m=st_.integers(1, 6), d=st_.integers(1, 3),
       tight=st_.booleans(), zero=st_.sampled_from((0, 1, 2, 3)), overlap=st_.booleans(),
       modes=st_.sampled_from([("none", "full"), ("none", "selective", "full"), ("selective", "full")]),
       lanes=st_.sampled_from((math.inf, 1e9)))
def test_mixed_dp_equals_brute_force(data, L, p, m, d, tight, zero, overlap, modes, lanes):
    if p > L + 2 or (len(modes) == 3 and p == 4 and L > 4):
        return
    costs = data.draw(costs_by_mode(modes))
    cap = _tight_capacity(data, costs, L, p, m) if tight else data.draw(st_.floats(2e7, 4e8))
    cluster = two_tier_cluster(n=64, fast=2)
    dev = DeviceSpec(cap, 1e12, 1e15, lane_ops_per_s=lanes)  # 1e9: the optimizer step lane-bound
    prob = MixedPartitionProblem(costs, L, p, m, st.Topology.of(cluster, 1, d, p), cap, zero, overlap, dev.hbm_Bps,
                                 lane_ops_per_s=dev.lane_ops_per_s)
    sol = prob.solve()
    best, best_uniform = _best_by_brute_force(costs, L, p, m, d, cluster, dev, zero, overlap, modes)
    event("infeasible" if math.isinf(best) else
          "mixing strictly better" if best < best_uniform * (1 - 1e-9) else "a uniform plan is optimal")
    if math.isinf(best):
        assert sol is None
        return
    assert sol is not None
    assert math.isclose(sol.objective_s, best, rel_tol=1e-9), (sol, best)
    plan = plan_of(sol.blocks, tp=1, dp=d, microbatch_size=1, num_microbatches=m, zero=zero,
                   recompute=sol.recompute, runtime=PLAN_RUNTIME)
    ev = evaluate_costs(plan, costs, cluster, m * d, dev, num_blocks=L, overlap_dp=overlap)
    assert ev.fits and math.isclose(ev.iteration_time_s, sol.objective_s, rel_tol=1e-9)
    # a cutoff at or below the optimum leaves nothing; just above it keeps the optimum
    assert prob.solve(cutoff_s=best * (1 - 1e-9)) is None
    again = prob.solve(cutoff_s=best * (1 + 1e-6) + 1e-12)
    assert again is not None and math.isclose(again.objective_s, best, rel_tol=1e-9)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st_.data(), L=st_.integers(1, 4), B=st_.sampled_from([2, 4]), devices=st_.integers(1, 6),
       tight=st_.booleans(), overlap=st_.booleans())
def test_search_with_per_stage_recompute_equals_brute_force(data, L, B, devices, tight, overlap):
    costs = {}
    for mbs in (1, 2):
        group = data.draw(costs_by_mode(("none", "full"), mbs=mbs, overlap=overlap))
        for c in group.values():
            costs[c.setting] = c
    cap = _tight_capacity(data, group, L, max(1, devices // 2), B) if tight else data.draw(st_.floats(3e7, 4e8))
    cluster = two_tier_cluster(n=16, fast=4)
    dev = DeviceSpec(cap, 1e12, 1e15)
    kw = dict(devices=devices, interleave_values=(1, 2), zero=(0, 1, 2, 3))
    # overlap_dp comes from the settings' runtime (costs_by_mode(overlap=...))
    cands, _, reason = best_plans_from_costs(costs, L, cluster, B, dev,
                                             space(interleave_values=(1, 2), zero=(0, 1, 2, 3),
                                                   per_stage_recompute=True), devices=devices, top_k=3)
    ref = brute_force_mixed(costs, L, cluster, B, dev, overlap=overlap, **kw)
    event("infeasible" if math.isinf(ref) else "feasible")
    if math.isinf(ref):
        assert not cands and reason
        return
    assert cands, reason
    assert math.isclose(cands[0].iteration_time_s, ref, rel_tol=1e-9), (cands[0], ref)
    if not cands[0].plan.recompute.is_uniform:
        event("the best plan mixes modes")
    times = [x.iteration_time_s for x in cands]
    assert times == sorted(times)
    assert len({x.plan for x in cands}) == len(cands)
    for cand in cands:
        if not cand.plan.recompute.is_uniform:
            assert len(cand.plan.recompute.modes) >= 2
            event(f"a mixed plan among the candidates (v={cand.plan.interleave})")
        ev = evaluate_costs(cand.plan, cand.costs, cluster, B, dev, num_blocks=L, overlap_dp=overlap)
        assert ev.fits and math.isclose(ev.iteration_time_s, cand.iteration_time_s, rel_tol=1e-9)


def _two_stage_case():
    """4 identical blocks, 2 devices, 4 microbatches. A block: 1 s forward, 2 s backward (3 s with full
    recompute), 10 B stashed per microbatch (1 B with full recompute), 18 B of weights, grads and optimizer
    state; 60 B per device. Stage 0 stashes 2 microbatches, stage 1 one: without recompute stage 0 holds
    at most 1 block and stage 1 at most 2, so no plan runs without recompute; all-full [2, 2] takes
    (8 + 8) + 3 * 8 = 40 s, full on stage 0 and none on stage 1 (8 + 6) + 3 * 8 = 38 s. One device cannot
    hold the 4 blocks (72 B of static memory), so neither p = 1 nor data parallelism is possible."""
    zero = lc(0.0, 0.0)
    costs = {}
    for mode, bwd, act in (("none", 2.0, 10.0), ("full", 3.0, 1.0)):
        s = TrainSetting(microbatch_size=1, seq_len=16, tp=1, recompute=mode)
        costs[s] = LayerCosts(zero, lc(1.0, bwd, params=1, act=act), zero, setting=s)
    return costs, two_tier_cluster(n=2, fast=2), DeviceSpec(60.0, 1e12, 1e15)


def test_mixed_plan_strictly_beats_every_uniform_plan():
    costs, cluster, dev = _two_stage_case()
    by_mode = {s.recompute: c for s, c in costs.items()}
    sol = MixedPartitionProblem(by_mode, 4, 2, 4, st.Topology.of(cluster, 1, 1, 2), dev.hbm_bytes, False, True,
                                dev.hbm_Bps).solve()
    assert sol.blocks == (2, 2) and sol.modes == ("full", "none") and sol.recompute == Recompute(("full", "none"))
    assert sol.objective_s == pytest.approx(38.0, rel=1e-6)

    cands, stats, _ = best_plans_from_costs(costs, 4, cluster, 4, dev, space(interleave_values=(1,),
                                            per_stage_recompute=True), top_k=2)
    best = cands[0]
    assert best.plan.recompute.per_stage == ("full", "none") and best.plan.recompute_modes == ("full", "none")
    assert [r[1] - r[0] for r in best.plan.stages] == [3, 3]  # embedding + 2 blocks, 2 blocks + head
    assert best.iteration_time_s == pytest.approx(38.0, rel=1e-6)
    assert stats.mixed_solved >= 1
    assert "recompute=full/none" in best.plan.describe()
    ev = evaluate_costs(best.plan, best.costs, cluster, 4, dev, num_blocks=4)
    assert ev.fits and ev.iteration_time_s == pytest.approx(best.iteration_time_s, rel=1e-12)
    assert [s.recompute for s in ev.stages] == ["full", "none"]
    # every uniform plan is slower: all-full is the best of them, all-none does not fit
    uniform, _, _ = best_plans_from_costs(costs, 4, cluster, 4, dev, space(interleave_values=(1,)), top_k=0)
    assert uniform[0].plan.recompute == Recompute.uniform("full") and uniform[0].iteration_time_s == pytest.approx(40.0, rel=1e-6)
    none_only = {s: c for s, c in costs.items() if s.recompute == "none"}
    assert best_plans_from_costs(none_only, 4, cluster, 4, dev, space(interleave_values=(1,)), top_k=0)[0] == []


def test_per_stage_recompute_is_opt_in_and_needs_two_modes():
    costs, cluster, dev = _two_stage_case()
    _, stats, _ = best_plans_from_costs(costs, 4, cluster, 4, dev, space(interleave_values=(1,)))
    assert stats.mixed_considered == stats.mixed_solved == 0
    full_only = {s: c for s, c in costs.items() if s.recompute == "full"}
    cands, stats, _ = best_plans_from_costs(full_only, 4, cluster, 4, dev, space(interleave_values=(1,),
                                            per_stage_recompute=True))
    assert stats.mixed_considered == 0 and cands[0].plan.recompute == Recompute.uniform("full")


def test_interleaved_plan_mixes_modes_per_device():
    """The same blocks, v = 2 (device 0 runs blocks 1 and 3, device 1 blocks 2 and 4; device 0 stashes more
    microbatches). With 70 B per device no plan runs without recompute; full on device 0 and none on
    device 1 beats all-full, and equals brute force over every per-device mode vector."""
    costs, cluster, _ = _two_stage_case()
    dev = DeviceSpec(70.0, 1e12, 1e15)
    cands, stats, _ = best_plans_from_costs(costs, 4, cluster, 4, dev, space(interleave_values=(2,),
                                            per_stage_recompute=True), top_k=3)
    best = cands[0]
    assert best.plan.interleave == 2 and best.plan.recompute.per_stage == ("full", "none") and stats.mixed_solved >= 1
    assert best.iteration_time_s == pytest.approx(
        brute_force_mixed(costs, 4, cluster, 4, dev, devices=2, interleave_values=(2,)), rel=1e-12)
    uniform, _, _ = best_plans_from_costs(costs, 4, cluster, 4, dev, space(interleave_values=(2,)), top_k=3)
    assert [c.plan.recompute.to_json() for c in uniform] == ["full"]  # all-none does not fit
    assert best.iteration_time_s < uniform[0].iteration_time_s
    ev = evaluate_costs(best.plan, best.costs, cluster, 4, dev, num_blocks=4)
    assert ev.fits and ev.iteration_time_s == pytest.approx(best.iteration_time_s, rel=1e-12)


def test_device_rows_kept_across_capacities_give_the_same_plans():
    """``best_plans_from_costs(..., device_rows=...)``: the per-device rows of the interleaved per-stage searches,
    kept by a caller across searches that differ only in HBM capacity (a co-search's HBM sizes), give the plans
    of searches without them, at a capacity where everything fits, where only a mixed plan fits and between."""
    costs, cluster, _ = _two_stage_case()
    sp = space(interleave_values=(2,), per_stage_recompute=True)
    rows: dict = {}
    seen = []
    for cap in (1e9, 70.0, 200.0):
        dev = DeviceSpec(cap, 1e12, 1e15)
        fresh = best_plans_from_costs(costs, 4, cluster, 4, dev, sp, top_k=3)[0]
        kept = best_plans_from_costs(costs, 4, cluster, 4, dev, sp, top_k=3, device_rows=rows)[0]
        assert [(c.plan, c.iteration_time_s) for c in kept] == [(c.plan, c.iteration_time_s) for c in fresh]
        seen.append(fresh[0].plan.recompute.to_json())
        assert rows  # filled by the first search, read by the later ones
    assert seen[1] == ["full", "none"]  # at 70 B the mixed plan (test_interleaved_plan_mixes_modes_per_device)


def test_device_rows_are_the_evaluations_stage_figures():
    """``device_rows`` (what the interleaved per-device recompute search reads for each mode) equals, to the bit,
    the time per microbatch, exposed sync + optimizer step and memory of ``evaluate_costs``' stages."""
    from phaze.placement.evaluation import device_rows
    from phaze.placement.plan import Plan

    costs, _, dev = _two_stage_case()
    cluster = two_tier_cluster(n=8, fast=2)
    for c in costs.values():
        for v, z, d in ((1, 0, 1), (2, 1, 2), (2, 3, 4)):
            plan = Plan.balanced(4, 2, 1, d, 1, 4, interleave=v, zero=z,
                                 recompute=Recompute.uniform(c.setting.recompute), runtime=PLAN_RUNTIME)
            ev = evaluate_costs(plan, c, cluster, 4 * d, dev, num_blocks=4, overlap_dp=True)
            T, R, M = device_rows(plan, c, cluster, dev, num_blocks=4, overlap_dp=True)
            assert T == [s.time_per_microbatch_s for s in ev.stages]
            assert R == [s.dp_exposed_s + s.optimizer_step_s for s in ev.stages]
            assert M == [s.memory_bytes for s in ev.stages]
            assert len(T) == 2 and all(t > 0 for t in T)
