"""The best plan of one chip, costing exactly only the settings whose bound can still win.

``optimize`` schedules every layer of every setting exactly (the branch and bound, CP-SAT where it is left
unproven) and then searches the plans. When only the best plan is wanted (a co-search's reference chips and
the counterfactual chips of ``phaze.search.why``), most of that work decides nothing: a setting whose plans
are slower than the best even with every layer at its lower bound cannot hold the best plan. So:

1. every setting is costed with lower-bound layer times (``compute_layer_costs(..., bound_only=True)``: the
   per-layer solver's bounds and list schedule, no exact solve; the same memory, so the same plans fit);
2. the settings form plan units (``plan_units``: each alone, or those differing only in recompute together
   when stages may each pick a mode), and each unit's best plan under the lower-bound times bounds its best
   iteration time from below (a plan's iteration time never falls when a layer time grows), as the best
   lower-bound plan over several units bounds theirs;
3. the unit of the best lower-bound plan is costed exactly; then one search under lower-bound times lists every
   plan of the other units below that unit's exact best (relative ``TIE_RTOL``: ties count), and their units are
   costed exactly in order of their best such plan, until the next one's is above the best exact time so far;
4. the answer is ``best_plans_from_costs`` over the exactly costed settings, in ``optimize``'s order.

Every unit left out is strictly slower than the answer, and the exactly costed ones are searched with the same
tie-breaking order, so the best plan is ``optimize(..., top_k=0)``'s (tests/placement/test_best_first.py).
The co-search's exact phase prunes a chip's units the same way (``phaze.search.exact.model_best``).
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

from phaze.errors import InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster
from phaze.placement.evaluation import DeviceSpec
from phaze.placement.layer_costs import compute_layer_costs, resolve_time_model
from phaze.placement.optimizer import best_plans_from_costs, evaluations, optimize, plan_settings
from phaze.placement.plan import PlanResult
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PlanSpace, Runtime, TrainSetting

TIE_RTOL = 1e-9  # a unit whose bound is within this of the best exact time is costed exactly too (ties)
# Below this many plan units ``optimize`` is faster: best-first runs 3 + (units costed) plan searches where
# ``optimize`` runs one, and with few settings costing all of them exactly is cheap. Measured (same answers, one
# process each, the machine otherwise idle): GPT-2 XL (4 units) on the demo's 5 counterfactual chips 7.8 s with
# ``optimize``, 12.2 s best-first; GPT-3 175B (28 units) on the TPUv4-like and TPU v4 chips 54.6 s and 83.8 s
# with ``optimize``, 14.4 s and 13.6 s best-first.
MIN_UNITS = 5
ALL = 1 << 30  # top_k of a search that returns every plan under its cutoff


def plan_units(settings: tuple[TrainSetting, ...], per_stage_recompute: bool) -> tuple[tuple[int, ...], ...]:
    """The settings' indices grouped into plan units: each setting alone, or (``per_stage_recompute``) the
    settings that differ only in recompute together (the plans whose stages each pick one of their modes),
    in order of first appearance."""
    if not per_stage_recompute:
        return tuple((i,) for i in range(len(settings)))
    groups: dict = {}
    for i, s in enumerate(settings):
        groups.setdefault(replace(s, recompute="none"), []).append(i)
    return tuple(tuple(g) for g in groups.values())


def optimize_best(model: ModelConfig, accelerator: Accelerator, cluster: Cluster, global_batch: int,
                  runtime: Runtime, space: PlanSpace = PlanSpace(), *, devices: int | None = None,
                  seq_len: int | None = None, time_model: str = "auto", min_units: int = MIN_UNITS,
                  **cost_kw) -> PlanResult:
    """``optimize(..., top_k=0, baselines=False)``'s best plan, costing exactly only the plan units whose
    lower-bound plan can match it (module docstring). Raises InfeasibleError (one line) when nothing fits.
    Layer times that are exact and cheap anyway (the sequential model of GPUs), and searches of fewer than
    ``min_units`` plan units (``MIN_UNITS``), go straight to ``optimize``."""
    t_start = time.perf_counter()
    N, space_r, jobs = plan_settings(model, cluster, global_batch, runtime, space, devices=devices, seq_len=seq_len)
    settings = tuple(j[0] for j in jobs)
    units = plan_units(settings, space_r.per_stage_recompute)
    if resolve_time_model(time_model, accelerator) != "scheduled" or len(units) < min_units:
        return optimize(model, accelerator, cluster, global_batch, runtime, space, devices=devices, seq_len=seq_len,
                        top_k=0, baselines=False, time_model=time_model, **cost_kw)
    space = space_r
    device = DeviceSpec.of(accelerator, runtime.memory_reserve_bytes)

    def costs(idx, bound_only: bool) -> dict:
        return {settings[i]: compute_layer_costs(model, accelerator, settings[i], jobs[i][1], time_model,
                                                 cp_tier=jobs[i][2], moe_net=jobs[i][3], bound_only=bound_only,
                                                 **cost_kw) for i in idx}

    unit_of = {settings[i]: u for u, idx in enumerate(units) for i in idx}

    def search(idx, bound_only: bool, cutoff_s: float = math.inf, top_k: int = 0):
        return best_plans_from_costs(costs(idx, bound_only), model.num_layers, cluster, global_batch, device, space,
                                     devices=N, top_k=top_k, cutoff_s=cutoff_s)

    def unit(cand) -> int:
        c = cand.costs
        return unit_of[(c if hasattr(c, "setting") else next(iter(c.values()))).setting]

    floor, _, reason = search(range(len(settings)), True)
    if not floor:  # nothing fits (memory does not depend on the times): optimize's reason
        raise InfeasibleError(f"{model.name} on {accelerator.name}: {reason}")
    first = unit(floor[0])
    found = search(units[first], False)[:2]
    if not found[0]:
        raise AssertionError("best_first: a plan fits under lower-bound times but none under exact ones")
    best = found[0][0].iteration_time_s
    # every plan of the other units below the best exact time under lower-bound times, in one pass: their
    # units' floors (a unit with none is slower than the best)
    floors: dict[int, float] = {}
    rest = [i for u, idx in enumerate(units) if u != first for i in idx]
    for cand in search(rest, True, best * (1 + TIE_RTOL), ALL)[0] if rest else ():
        floors.setdefault(unit(cand), cand.iteration_time_s)  # fastest first
    costed = [first]
    for u in sorted(floors, key=lambda u: (floors[u], u)):
        if floors[u] > best * (1 + TIE_RTOL):  # the best moved below it
            break
        costed.append(u)
        exact, stats, _ = search(units[u], False, best * (1 + TIE_RTOL))
        if exact and exact[0].iteration_time_s < best:
            best, found = exact[0].iteration_time_s, (exact, stats)
    if len(costed) > 1:  # the exactly costed units together, in optimize's order (its tie-breaking)
        found = search(sorted(i for u in costed for i in units[u]), False, best * (1 + TIE_RTOL))[:2]
    cands, stats = found
    evals = evaluations(cands, model, cluster, global_batch, device, seq_len)
    stats = replace(stats, wall_time_s=time.perf_counter() - t_start)
    return PlanResult(best=evals[0], alternatives=(), baselines=(), stats=stats, space=space)
