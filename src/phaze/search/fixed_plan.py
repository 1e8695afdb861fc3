"""A fixed chip's best plan in a co-search's plan space and runtime: what the references, the Spotlight-style chip
and the counterfactual chips of ``phaze.search.why`` are scored by (the same machinery as every candidate's)."""
from __future__ import annotations

from phaze.schedule import ScheduleCache
from phaze.search.spec import SCHEDULE_TIME_LIMIT_S


# One per process (a search's worker, or the main process): the fixed chips' layer problems by content, so a chip
# that differs from one evaluated before only in what no layer time depends on (a reference given the winner's HBM
# capacity, a counterfactual step that changes HBM capacity) reuses its schedules. Fixed chips only: the
# candidates' cache (``phaze.search.exact``) counts its own hits in the search's figures.
_CACHE = ScheduleCache()


def fixed_chip_plan(model, chip, spec, cluster, schedule_cache=None):
    """A fixed chip's best plan in the co-search's plan space and runtime (``spec.plan_space``,
    ``spec.runtime``; ``spec`` a ``SearchSpec``) at the candidates' schedule budget (``SCHEDULE_TIME_LIMIT_S``):
    what the TPUv4-like reference and the Spotlight-style chip are scored by. Only the settings whose lower-bound
    plan can win are costed exactly (``phaze.placement.best_first``: the same best plan as ``optimize``)."""
    from phaze.placement.best_first import optimize_best

    return optimize_best(model, chip, cluster, spec.global_batch, spec.runtime, spec.plan_space,
                         devices=spec.devices, schedule_cache=_CACHE if schedule_cache is None else schedule_cache,
                         schedule_time_limit_s=SCHEDULE_TIME_LIMIT_S)
