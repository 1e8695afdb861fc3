"""``optimize_best`` (cost exactly only the plan units whose lower-bound plan can win) against ``optimize``
(every setting costed exactly): the same best plan and iteration time, an infeasible chip with the same
reason, and fewer settings costed exactly."""
from dataclasses import replace

import pytest

import phaze.placement.best_first as bf
from phaze import api
from phaze.errors import InfeasibleError
from phaze.hardware.presets import get_cluster
from phaze.placement import optimize
from phaze.placement.optimizer import plan_settings
from phaze.search.run import reference_cluster
from phaze.units import GiB


@pytest.fixture(scope="module")
def setting():
    spec = api.search_spec(models=("megatron-bert",), space="default", budget_mm2=None, devices=64, global_batch=256,
                           microbatch_sizes=(1, 2, 4), tp_values=None, hbm_gib=(32,), recompute_modes=None,
                           cluster="flat-4gib", pareto=False, plan_space="full")
    return spec, reference_cluster(spec, get_cluster(spec.cluster, spec.devices))


def _both(spec, cluster, chip, monkeypatch):
    exact_calls = []
    real = bf.compute_layer_costs

    def spy(*a, bound_only=False, **kw):
        if not bound_only:
            exact_calls.append(a[2])
        return real(*a, bound_only=bound_only, **kw)

    monkeypatch.setattr(bf, "compute_layer_costs", spy)
    m = spec.models[0]
    best = bf.optimize_best(m, chip, cluster, spec.global_batch, spec.runtime, spec.plan_space, devices=spec.devices,
                            min_units=1)
    full = optimize(m, chip, cluster, spec.global_batch, spec.runtime, spec.plan_space, devices=spec.devices,
                    top_k=0, baselines=False)
    return best, full, set(exact_calls)


@pytest.mark.parametrize("which", ["reference", "real_reference"])
def test_same_best_plan_as_optimize_with_fewer_settings_costed(setting, which, monkeypatch):
    spec, cluster = setting
    chip = getattr(spec.space, which)
    best, full, costed = _both(spec, cluster, chip, monkeypatch)
    assert best.best.plan == full.best.plan
    assert best.best.iteration_time_s == full.best.iteration_time_s
    _, space, jobs = plan_settings(spec.models[0], cluster, spec.global_batch, spec.runtime, spec.plan_space,
                                   devices=spec.devices)
    units = bf.plan_units(tuple(j[0] for j in jobs), space.per_stage_recompute)
    assert len(units) >= 5  # t 1, 2, 4, 8 x microbatch 1, 2, 4 x sequence parallelism: a real choice
    assert 0 < len(costed) < len(jobs)  # pruning happened, and the best plan's settings were costed exactly
    assert full.best.plan.microbatch_size in {s.microbatch_size for s in costed}


def test_nothing_fits_gives_optimizes_reason(setting, monkeypatch):
    spec, cluster = setting
    tiny = replace(spec.space.reference, hbm_bytes=int(0.05 * GiB))
    m = spec.models[0]
    with pytest.raises(InfeasibleError) as a:
        bf.optimize_best(m, tiny, cluster, spec.global_batch, spec.runtime, spec.plan_space, devices=spec.devices,
                         min_units=1)
    with pytest.raises(InfeasibleError) as b:
        optimize(m, tiny, cluster, spec.global_batch, spec.runtime, spec.plan_space, devices=spec.devices, top_k=0,
                 baselines=False)
    assert str(a.value) == str(b.value)
