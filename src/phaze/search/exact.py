"""Exact evaluation of one candidate chip: optimal layer schedules, then the optimal plan per HBM size.

Runs in worker processes, so its input is plain picklable data (``ChipTask``) and its output a plain
``ChipResult``. Per model and HBM size: first the best plan under the layer-time LOWER bounds (a valid
throughput upper bound, cut off at the incumbent); only if that can still beat the incumbent are the
layers scheduled exactly (CP-SAT where the bounds differ, cached by content) and the plan optimized on
the exact times.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster
from phaze.placement import DeviceSpec, best_plan_from_costs
from phaze.placement.layer_costs import LayerCosts, model_forward_flops_per_sequence
from phaze.schedule import ScheduleCache, build_problem, solve_cached
from phaze.search.bounds import SLOTS, with_times
from phaze.search.spec import GiB
from phaze.workload.config import ModelConfig
from phaze.workload.graphs import layer_graph

_CACHE = ScheduleCache()  # one per worker process: identical layer problems are solved once
TIGHT_RTOL = 1e-9
TIE_RTOL = 1e-9  # candidates within this of the incumbent are evaluated: ties are broken by area, HBM, index


@dataclass(frozen=True)
class ModelTask:
    model: ModelConfig
    memory: tuple[LayerCosts, ...]  # one per setting, times zero
    lower_s: np.ndarray  # [setting, slot] for this chip
    upper_s: np.ndarray
    reference_seq_per_s: float  # the score divides throughput by this (TPUv4-like under its best plan)


@dataclass(frozen=True)
class ChipTask:
    index: int
    accelerator: Accelerator
    hbm_gib: tuple[int, ...]  # the HBM sizes still worth evaluating for this chip
    models: tuple[ModelTask, ...]
    cluster: Cluster
    global_batch: int
    devices: int
    incumbent_score: float  # best score known when the task was sent (prune below it)
    schedule_time_limit_s: float = 5.0


@dataclass(frozen=True)
class ModelOutcome:
    model: str
    throughput_seq_per_s: float  # 0 when nothing fits
    iteration_time_s: float
    mfu: float
    plan: str  # Plan.describe()
    plan_json: dict | None


@dataclass(frozen=True)
class ChipResult:
    index: int
    hbm_gib: int
    status: str  # "exact" | "bounded" (its upper bound fell below the incumbent) | "infeasible"
    score: float  # mean normalized throughput (exact), or the upper bound when bounded
    outcomes: tuple[ModelOutcome, ...]
    schedules_solved: int
    schedules_not_optimal: int


def _device(acc: Accelerator, gib: int) -> DeviceSpec:
    return DeviceSpec(float(gib * GiB), float(acc.hbm_bandwidth_Bps * acc.memory_efficiency),
                      float(acc.peak_matrix_flops))


_DP_MEMO: dict = {}  # per worker: chips with identical layer times share one plan optimization


def _best(costs: dict, task: ChipTask, mt: ModelTask, gib: int, cutoff_s: float = math.inf):
    key = (mt.model, gib, cutoff_s, task.cluster, task.global_batch, task.devices,
           float(task.accelerator.hbm_bandwidth_Bps * task.accelerator.memory_efficiency),
           tuple((c.setting, c.embedding.fwd_s, c.embedding.bwd_s, c.block.fwd_s, c.block.bwd_s, c.head.fwd_s,
                  c.head.bwd_s) for c in costs.values()))
    if key not in _DP_MEMO:
        if len(_DP_MEMO) > 200_000:
            _DP_MEMO.clear()
        _DP_MEMO[key] = _best_uncached(costs, task, mt, gib, cutoff_s)
    return _DP_MEMO[key]


def _best_uncached(costs: dict, task: ChipTask, mt: ModelTask, gib: int, cutoff_s: float):
    return best_plan_from_costs(costs, mt.model.num_layers, task.cluster, task.global_batch,
                                _device(task.accelerator, gib), devices=task.devices, interleave_values=(1,),
                                cutoff_s=cutoff_s)


def exact_times(task: ChipTask, mt: ModelTask, counter: list[int]) -> np.ndarray:
    """[setting, slot] optimal layer times of this chip: the bound where lower == upper, else CP-SAT."""
    out = mt.upper_s.copy()
    for i, c in enumerate(mt.memory):
        for j, (kind, direction) in enumerate(SLOTS):
            if mt.upper_s[i, j] <= mt.lower_s[i, j] * (1 + TIGHT_RTOL):
                continue
            s = c.setting
            tier = task.cluster.tier_for_group(s.tp)
            sched = solve_cached(build_problem(layer_graph(mt.model, s, kind, direction), task.accelerator,
                                               tier if s.tp > 1 else None), _CACHE, task.schedule_time_limit_s)
            counter[0] += 1
            counter[1] += sched.status != "optimal"
            out[i, j] = sched.makespan_s
    return out


def evaluate_chip(task: ChipTask) -> list[ChipResult]:
    """Exact (or provably dominated) results of one chip for each of its HBM sizes."""
    counter = [0, 0]
    exact_cache: dict[str, dict] = {}
    results = []
    dominated_by: float | None = None  # a larger HBM's score (or bound) already below the incumbent
    for gib in sorted(task.hbm_gib, reverse=True):
        # More HBM only adds feasible plans (times do not depend on capacity), so a chip's score can only
        # shrink with a smaller HBM: once below the incumbent, every smaller size is too.
        if dominated_by is not None:
            results.append(ChipResult(task.index, gib, "bounded", dominated_by, (), counter[0], counter[1]))
            continue
        # upper bound of the score with lower-bound layer times
        ub_tputs = []
        single = len(task.models) == 1 and task.incumbent_score > 0
        for mt in task.models:
            lo = {c.setting: with_times(c, mt.lower_s[i]) for i, c in enumerate(mt.memory)}
            # one model: plans that cannot beat the incumbent are cut off (None then means "bounded")
            cutoff = (task.global_batch / (task.incumbent_score * mt.reference_seq_per_s) * (1 + TIE_RTOL)
                      if single else math.inf)
            cand = _best(lo, task, mt, gib, cutoff)
            if cand is None and single:
                ub_tputs.append(task.incumbent_score * mt.reference_seq_per_s)
                continue
            ub_tputs.append(task.global_batch / cand.iteration_time_s if cand else 0.0)
        ub_score = float(np.mean([t / mt.reference_seq_per_s for t, mt in zip(ub_tputs, task.models)]))
        if ub_score == 0.0:
            results.append(ChipResult(task.index, gib, "infeasible", 0.0, (), counter[0], counter[1]))
            continue
        if ub_score < task.incumbent_score * (1 - TIE_RTOL):
            results.append(ChipResult(task.index, gib, "bounded", ub_score, (), counter[0], counter[1]))
            dominated_by = ub_score
            continue
        outcomes = []
        for mt in task.models:
            if mt.model.name not in exact_cache:
                times = exact_times(task, mt, counter)
                exact_cache[mt.model.name] = {c.setting: with_times(c, times[i]) for i, c in enumerate(mt.memory)}
            cand = _best(exact_cache[mt.model.name], task, mt, gib)
            if cand is None:
                outcomes.append(ModelOutcome(mt.model.name, 0.0, math.inf, 0.0, "", None))
                continue
            it = cand.iteration_time_s
            flops = 3.0 * model_forward_flops_per_sequence(mt.model) * task.global_batch
            mfu = flops / (it * cand.plan.devices * task.accelerator.peak_matrix_flops)
            outcomes.append(ModelOutcome(mt.model.name, task.global_batch / it, it, mfu,
                                         cand.plan.describe(), cand.plan.to_dict()))
        score = float(np.mean([o.throughput_seq_per_s / mt.reference_seq_per_s
                               for o, mt in zip(outcomes, task.models)]))
        status = "exact" if all(o.throughput_seq_per_s > 0 for o in outcomes) else "infeasible"
        results.append(ChipResult(task.index, gib, status, score, tuple(outcomes), counter[0], counter[1]))
        if score < task.incumbent_score * (1 - TIE_RTOL):
            dominated_by = score
    return results
