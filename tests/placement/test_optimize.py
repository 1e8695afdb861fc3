"""optimize(): consistency with evaluate, infeasibility messages, baselines never gate the result."""
from __future__ import annotations

import importlib

import pytest

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import evaluate, optimize
from phaze.workload.zoo import get_model
from phaze.workload.runtime import PAPER_RUNTIME, PlanSpace

A100 = get_accelerator("a100-80g")


def test_optimize_small_model_matches_evaluate_and_beats_baselines():
    model = get_model("megatron-gpt2-2.5b")
    cluster = get_cluster("dgx-a100", 64)
    res = optimize(model, A100, cluster, 512, PAPER_RUNTIME, PlanSpace(), top_k=3)
    ev = evaluate(res.best.plan, model, A100, cluster, 512)
    assert ev.iteration_time_s == pytest.approx(res.best.iteration_time_s, rel=1e-9)
    assert ev.fits and res.best.plan.devices <= 64
    assert len(res.alternatives) == 3
    assert all(a.iteration_time_s >= res.best.iteration_time_s for a in res.alternatives)
    for b in res.baselines:
        if b.fits:
            assert b.evaluation.iteration_time_s >= res.best.iteration_time_s * (1 - 1e-9)


def test_failing_paper_baseline_does_not_affect_optimize():
    model = get_model("opt-350m")  # the paper's 12/1/85 plan: d = 85 does not divide the batch
    cluster = get_cluster("dgx-a100", 1024)
    res = optimize(model, A100, cluster, 4096, PAPER_RUNTIME, PlanSpace(microbatch_sizes=(1, 4), recompute_modes=("none",)))
    paper = next(b for b in res.baselines if b.name == "paper")
    assert not paper.fits
    assert paper.reason == "global batch 4096 not divisible by mbs x d 85 for mbs 1, 2, 4, 8, 16"  # one clause per d
    ref = optimize(model, A100, cluster, 4096, PAPER_RUNTIME, PlanSpace(microbatch_sizes=(1, 4), recompute_modes=("none",)),
                   baselines=False)
    assert res.best.plan == ref.best.plan


def test_refused_baseline_is_reported_not_raised(monkeypatch):
    def refuse(*a, **k):
        raise ConfigError("baseline refused")
    baselines_mod = importlib.import_module("phaze.placement.baseline_plans")
    monkeypatch.setattr(baselines_mod, "paper_baseline", refuse)
    model = get_model("megatron-gpt2-2.5b")
    res = optimize(model, A100, get_cluster("dgx-a100", 32), 256, PAPER_RUNTIME, PlanSpace(microbatch_sizes=(1, 2)))
    paper = next(b for b in res.baselines if b.name == "paper")
    assert not paper.fits and "refused" in paper.reason
    assert res.best.fits


def test_baseline_bug_is_not_swallowed(monkeypatch):
    """Only refusals (PhazeError) become reasons; a bug in our code still raises."""
    def boom(*a, **k):
        raise RuntimeError("baseline exploded")
    baselines_mod = importlib.import_module("phaze.placement.baseline_plans")
    monkeypatch.setattr(baselines_mod, "paper_baseline", boom)
    with pytest.raises(RuntimeError):
        optimize(get_model("megatron-gpt2-2.5b"), A100, get_cluster("dgx-a100", 32), 256, PAPER_RUNTIME, PlanSpace(microbatch_sizes=(1, 2)))


def test_model_that_fits_nowhere_is_one_line_infeasible():
    with pytest.raises(InfeasibleError) as e:
        optimize(get_model("gpt3-175b"), A100, get_cluster("dgx-a100", 8), 64, PAPER_RUNTIME, PlanSpace(microbatch_sizes=(1,)))
    msg = str(e.value)
    assert "\n" not in msg and "fit" in msg and "8 devices" in msg


def test_more_devices_than_cluster_is_one_line_infeasible():
    with pytest.raises(InfeasibleError) as e:
        optimize(get_model("gpt2-xl"), A100, get_cluster("dgx-a100", 16), 64, PAPER_RUNTIME, PlanSpace(), devices=32)
    assert "\n" not in str(e.value) and "32" in str(e.value)


def test_paper_baseline_for_gpt3_fits_and_optimizer_is_faster():
    model = get_model("gpt3-175b")
    res = optimize(model, A100, get_cluster("dgx-a100", 1024), 1536, PAPER_RUNTIME, PlanSpace(microbatch_sizes=(1, 2), interleave_values=(1,)), top_k=1)
    paper = next(b for b in res.baselines if b.name == "paper")
    assert paper.fits and (paper.plan.pp, paper.plan.tp, paper.plan.dp) == (32, 4, 8)
    assert res.best.iteration_time_s < paper.evaluation.iteration_time_s


def test_optimize_mixes_recompute_per_stage_when_it_pays():
    model = get_model("gpt3-175b")
    cluster = get_cluster("dgx-a100", 1024)
    space = PlanSpace(microbatch_sizes=(1,), recompute_modes=("none", "selective"), interleave_values=(1,),
                      sequence_parallel=(True,), zero=False)  # without ZeRO-1 memory is tight
    kw = dict(top_k=2, baselines=False)
    mixed = optimize(model, A100, cluster, 1536, PAPER_RUNTIME, space, **kw)  # optimize() asserts optimizer == evaluate_costs
    uniform = optimize(model, A100, cluster, 1536, PAPER_RUNTIME, space.with_(per_stage_recompute=False), **kw)
    assert uniform.stats.mixed_considered == 0 and mixed.stats.mixed_solved >= 1
    assert all(e.plan.recompute.is_uniform for e in (uniform.best,) + uniform.alternatives)
    best = mixed.best
    assert not best.plan.recompute.is_uniform and set(best.plan.recompute.modes) == {"none", "selective"}
    assert best.iteration_time_s < uniform.best.iteration_time_s
    # the first stage stashes the most microbatches: it is the one that recomputes
    assert best.plan.recompute_of(0) == "selective" and best.plan.recompute_of(best.plan.pp - 1) == "none"
    ev = evaluate(best.plan, model, A100, cluster, 1536)
    assert ev.fits and ev.iteration_time_s == pytest.approx(best.iteration_time_s, rel=1e-9)
