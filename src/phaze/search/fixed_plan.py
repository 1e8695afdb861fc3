"""A fixed chip's best plan in a co-search's plan space and runtime: what the references, the Spotlight-style chip
and the counterfactual chips of ``phaze.search.why`` are scored by (the same machinery as every candidate's)."""
from __future__ import annotations


def fixed_chip_plan(model, chip, spec, cluster, schedule_cache=None):
    """A fixed chip's best plan in the co-search's plan space and runtime (``spec.plan_space``,
    ``spec.runtime``; ``spec`` a ``SearchSpec``): what the TPUv4-like reference and the Spotlight-style chip are
    scored by. Only the settings whose lower-bound plan can win are costed exactly
    (``phaze.placement.best_first``: the same best plan as ``optimize``)."""
    from phaze.placement.best_first import optimize_best

    return optimize_best(model, chip, cluster, spec.global_batch, spec.runtime, spec.plan_space,
                         devices=spec.devices, schedule_cache=schedule_cache)
