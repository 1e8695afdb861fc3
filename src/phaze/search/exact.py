"""Exact evaluation of one candidate chip: optimal layer schedules, then the optimal plan per HBM size.

Runs in worker processes, so its input is plain picklable data (``ChipTask``) and its output a plain
``ChipResult``. Per model and HBM size: first the best plan under the layer-time LOWER bounds (a valid
throughput upper bound, cut off at the incumbent); only if that can still beat the incumbent are the
layers scheduled exactly (CP-SAT where the bounds differ, cached by content) and the plan optimized on
the exact times.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace

import numpy as np

from phaze.hardware.accelerator import Accelerator
from phaze.hardware.chip_network import at_least_as_fast
from phaze.hardware.cluster import Cluster
from phaze.placement import DeviceSpec, best_plan_from_costs, evaluate_costs
from phaze.placement.evaluation import lane_ops_per_s
from phaze.placement.layer_costs import LayerCosts, model_forward_flops_per_sequence
from phaze.schedule import ScheduleCache, build_problem, solve_cached
from phaze.search.bounds import SLOTS, with_times
from phaze.search.spec import SCHEDULE_TIME_LIMIT_S
from phaze.units import GiB
from phaze.workload.config import ModelConfig
from phaze.workload.graphs import layer_graph
from phaze.workload.runtime import PAPER_PLAN_SPACE, PlanSpace

_CACHE = ScheduleCache()  # one per worker process: identical layer problems are solved once
# a layer whose vectorized upper and lower time bounds agree to this (relative; float64 rounding of sums of
# ~100 op times is ~1e-14) is already exact: no schedule is solved for it
TIGHT_RTOL = 1e-9
TIE_RTOL = 1e-9  # candidates within this of the incumbent are evaluated: ties are broken by area, HBM, index


@dataclass(frozen=True)
class ModelTask:
    model: ModelConfig
    memory: tuple[LayerCosts, ...]  # one per setting, times zero
    lower_s: np.ndarray  # [setting, slot] for this chip
    upper_s: np.ndarray
    reference_seq_per_s: float  # the score divides throughput by this (TPUv4-like under its best plan)
    setting_ub: dict  # HBM GiB -> per-unit throughput upper bounds of this chip (vectorized bound)
    # the plan units (``phaze.placement.best_first.plan_units``: setting indices searched together; empty: each
    # setting alone) and the plan space their plans are searched in (``SearchSpec.plan_space_for``)
    units: tuple[tuple[int, ...], ...] = ()
    plan_space: PlanSpace = PAPER_PLAN_SPACE

    @property
    def unit_settings(self) -> tuple[tuple[int, ...], ...]:
        return self.units or tuple((i,) for i in range(len(self.memory)))


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
    schedule_time_limit_s: float = SCHEDULE_TIME_LIMIT_S
    # CP-SAT subsolvers (the fallback after the branch and bound) taking turns on one thread: one is fastest
    # (measured: 0.35 s vs 1.8 s per chip with 8 on BERT-Large's near-best chips); unproven ones are counted
    schedule_subsolvers: int = 1
    # objective weight per HBM size (phaze.search.objective; None: 1): the score divides throughput by the
    # reference's times this
    weight_by_hbm: dict | None = None
    # with a network axis: the candidate's chip (its row of the space's distinct chips) and its network, so a
    # batch's candidates of one chip bound each other (``evaluate_chips``); -1 / None without an axis
    base_chip: int = -1
    network: object = None


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
    schedules_solved: int  # running count of this chip's exact layer schedules when this result was made
    schedules_not_optimal: int
    bound_only: bool = False  # bounded by the lower-bound layer times alone (no exact time was needed)
    schedules_reused: int = 0  # of schedules_solved: answered by the worker's content-hashed schedule cache
    #                            (counted in this run only; not stored)
    # a bounded result's score is either an upper bound (the chip scores at most it) or, strict, the incumbent
    # the chip was proven to stay below by the tie tolerance (it scores less than score x (1 - TIE_RTOL));
    # the sibling bounds of ``evaluate_chips`` use the difference (not stored: a loaded result is not strict)
    strict: bool = False


def _device(acc: Accelerator, gib: int) -> DeviceSpec:
    return replace(DeviceSpec.of(acc), hbm_bytes=float(gib * GiB))


_DP_MEMO: dict = {}  # per worker: chips with identical layer times share one plan optimization
# Entries kept before the memo starts again: it grows by one entry per distinct (chip layer times, HBM size,
# cutoff), so over a long search it is cleared at this size to bound a worker's memory (chips with equal layer
# times are found close together in bound order, so a cleared memo loses little).
DP_MEMO_MAX_ENTRIES = 200_000


@dataclass
class ChipMemo:
    """What one chip's plan searches for one model share (``evaluate_chip``): each setting's costs per distinct
    layer times, one object each (kept alive, so ``rows`` can key by identity), and the per-device rows of
    ``best_device_modes`` (one cluster, batch and device but for its HBM capacity, as it asks)."""

    costs: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)

    def costs_of(self, mt: "ModelTask", idx, times) -> dict:
        """{setting: costs} of settings ``idx`` of ``mt`` with layer times ``times(i)``."""
        out = {}
        for i in idx:
            t = np.asarray(times(i), np.float64)
            key = (i, t.tobytes())
            c = self.costs.get(key)
            if c is None:
                c = self.costs[key] = with_times(mt.memory[i], t)
            out[mt.memory[i].setting] = c
        return out


def _best(costs: dict, task: ChipTask, mt: ModelTask, gib: int, cutoff_s: float = math.inf,
          memo: ChipMemo | None = None):
    key = (mt.model, mt.plan_space, gib, cutoff_s, task.cluster, task.global_batch, task.devices,
           float(task.accelerator.hbm_bandwidth_Bps * task.accelerator.memory_efficiency),
           lane_ops_per_s(task.accelerator),
           tuple((c.setting, c.embedding.fwd_s, c.embedding.bwd_s, c.block.fwd_s, c.block.bwd_s, c.head.fwd_s,
                  c.head.bwd_s) for c in costs.values()))
    if key not in _DP_MEMO:
        if len(_DP_MEMO) > DP_MEMO_MAX_ENTRIES:
            _DP_MEMO.clear()
        _DP_MEMO[key] = _best_uncached(costs, task, mt, gib, cutoff_s, memo)
    return _DP_MEMO[key]


def _best_uncached(costs: dict, task: ChipTask, mt: ModelTask, gib: int, cutoff_s: float,
                   memo: ChipMemo | None = None):
    """The partition search per chip in the search's plan space (``mt.plan_space``: its interleavings, ZeRO
    stages, per-stage recompute; the microbatch sizes, widths, sequence parallelism and recompute modes are in
    the settings costed, ``SearchSpec.settings``). ``memo``: the chip's, for this model (``ChipMemo``)."""
    return best_plan_from_costs(costs, mt.model.num_layers, task.cluster, task.global_batch,
                                _device(task.accelerator, gib), mt.plan_space, devices=task.devices,
                                cutoff_s=cutoff_s, device_rows=None if memo is None else memo.rows)


# the layer problems of the chip being evaluated (3 kinds x 2 directions per setting) are each needed up to
# three times (bound, short solve, full solve); 256 keeps all of one chip's for the settings of a search
PROBLEM_CACHE_SIZE = 256


@functools.lru_cache(maxsize=PROBLEM_CACHE_SIZE)
def _problem(model, setting, kind: str, direction: str, accelerator: Accelerator, tier):
    """The schedule problem of one layer on one chip (built once for the bound, short and full solves)."""
    return build_problem(layer_graph(model, setting, kind, direction), accelerator, tier)


def setting_times(task: ChipTask, mt: ModelTask, i: int, counter: list[int], exact: bool) -> np.ndarray:
    """[slot] layer times of setting ``i`` on this chip where the vectorized bounds differ: exact=False gives
    the per-layer solver's (stronger) lower bound without CP-SAT; exact=True the optimal makespans."""
    out = (mt.upper_s if exact else mt.lower_s)[i].copy()
    s = mt.memory[i].setting
    tier = task.cluster.tier_for_group(s.tp) if s.tp > 1 else None
    for j, (kind, direction) in enumerate(SLOTS):
        if mt.upper_s[i, j] <= mt.lower_s[i, j] * (1 + TIGHT_RTOL):
            continue
        problem = _problem(mt.model, s, kind, direction, task.accelerator, tier)
        hits = _CACHE.hits
        sched = solve_cached(problem, _CACHE, task.schedule_time_limit_s, exact=exact,
                             num_workers=task.schedule_subsolvers)
        if exact:
            counter[0] += 1
            counter[1] += not sched.proven_optimal
            counter[2] += _CACHE.hits > hits
            out[j] = sched.makespan_s
        else:
            out[j] = max(out[j], sched.lower_bound_s)
    return out


def unit_best(task: ChipTask, mt: ModelTask, gib: int, idx: tuple[int, ...], beat_s: float, times_cache: dict,
              counter: list[int], memo: ChipMemo | None = None):
    """The best plan of the unit's settings ``idx`` on exact layer times if it runs an iteration in under
    ``beat_s``, else None; with as few exact layer schedules as that takes. Each setting's layer times start
    at the per-layer solver's lower bound (exact where ``times_cache`` has them). While the best plan on these
    times (``_best``) beats ``beat_s`` and one of its stages runs a setting (a recompute mode) not scheduled
    exactly yet, those settings are scheduled exactly (into ``times_cache``) and the plan searched again.
    Every time is at most the exact one and an iteration's time never falls as a layer's rises, so a best
    plan at or above ``beat_s`` proves every plan of the unit there, and a best plan on exact times only is
    the best on exact times of every setting (each other plan's time here is no more than its exact time).
    So the modes no best plan uses are never scheduled: on the demo, most of the selective-recompute block
    backwards, the slowest layer problem to schedule (docs/changes.md, session 27)."""
    memo = ChipMemo() if memo is None else memo
    times = {i: times_cache[i] if i in times_cache else setting_times(task, mt, i, counter, exact=False)
             for i in idx}
    while True:
        found = _best(memo.costs_of(mt, idx, times.__getitem__), task, mt, gib, beat_s, memo)
        if found is None or found.iteration_time_s >= beat_s:  # (a plan at or above the cutoff: none below)
            return None
        used = set(found.plan.recompute.per_stage)
        todo = [i for i in idx if i not in times_cache and mt.memory[i].setting.recompute in used]
        if not todo:
            return found
        for i in todo:
            times_cache[i] = times[i] = setting_times(task, mt, i, counter, exact=True)


def model_best(task: ChipTask, mt: ModelTask, gib: int, threshold_seq_per_s: float, times_cache: dict,
               counter: list[int], memo: ChipMemo | None = None):
    """The best plan of one model on this chip with ``gib`` of HBM, scheduling layers exactly only for the
    plan units (one setting, or the settings differing only in recompute, ``mt.units``) whose plan under
    lower-bound layer times can reach ``threshold_seq_per_s`` (0: all units), and in a unit only the settings
    its best plans use (``unit_best``).
    Returns (candidate or None, throughput, exact, probed): exact is False when the chip provably stays
    below the threshold (its throughput is then only known to be lower); probed counts the units that
    needed exact layer times."""
    B = task.global_batch
    cutoff = B / threshold_seq_per_s * (1 + TIE_RTOL) if threshold_seq_per_s > 0 else math.inf
    units = mt.unit_settings

    memo = ChipMemo() if memo is None else memo
    ub = []
    for u, idx in enumerate(units):
        if mt.setting_ub[gib][u] < threshold_seq_per_s * (1 - TIE_RTOL):
            ub.append(0.0)  # the vectorized bound already rules this unit out
            continue
        cand = _best(memo.costs_of(mt, idx, lambda i: mt.lower_s[i]), task, mt, gib, cutoff, memo)
        ub.append(B / cand.iteration_time_s if cand else 0.0)  # 0: nothing fits, or cut off
    best, best_tput, probed = None, 0.0, 0
    for u in sorted(range(len(ub)), key=lambda u: (-ub[u], u)):
        if ub[u] <= 0 or ub[u] < max(threshold_seq_per_s, best_tput) * (1 - TIE_RTOL):
            break
        probed += 1
        # only a plan that beats both the threshold and this chip's best unit so far changes the answer
        beat_s = min(cutoff, best.iteration_time_s) if best is not None else cutoff
        cand = unit_best(task, mt, gib, units[u], beat_s, times_cache, counter, memo)
        if cand is not None:
            best, best_tput = cand, B / cand.iteration_time_s
    return best, best_tput, best_tput >= threshold_seq_per_s * (1 - TIE_RTOL), probed


def _plan_memory_bytes(task: ChipTask, mt: ModelTask, cand, gib: int) -> float:
    """Peak memory per device of a solved plan (the largest stage)."""
    ev = evaluate_costs(cand.plan, cand.costs, task.cluster, task.global_batch, _device(task.accelerator, gib),
                        num_blocks=mt.model.num_layers)
    return float(ev.memory_bytes_per_device)


def _outcome(task: ChipTask, mt: ModelTask, cand) -> ModelOutcome:
    if cand is None:
        return ModelOutcome(mt.model.name, 0.0, math.inf, 0.0, "", None)
    it = cand.iteration_time_s
    flops = 3.0 * model_forward_flops_per_sequence(mt.model) * task.global_batch
    mfu = flops / (it * cand.plan.devices * task.accelerator.peak_matrix_flops)
    return ModelOutcome(mt.model.name, task.global_batch / it, it, mfu, cand.plan.describe(), cand.plan.to_dict())


def _model_threshold(incumbent: float, known: list[float], k: int) -> float:
    """The normalized throughput model k must reach for the chip's mean score to reach the incumbent, given
    ``known`` (per model: the exact normalized throughput, or an upper bound where not yet known):
    n x incumbent minus what the other models can at most contribute (0: no threshold). The incumbent
    carries the tie tolerance, so candidates within it of the incumbent are never cut."""
    need = len(known) * incumbent * (1 - TIE_RTOL) - (sum(known) - known[k])
    return max(0.0, need)


def evaluate_chip(task: ChipTask) -> list[ChipResult]:
    """Exact (or provably dominated) results of one chip for each of its HBM sizes, largest first.

    More HBM only adds feasible plans (layer times do not depend on capacity), so the throughput can only
    shrink with a smaller HBM: once the score is below the incumbent, it is at every smaller size whose
    objective weight is no smaller (always, but under perf-per-dollar, where a smaller HBM costs less and is
    evaluated on its own). The incumbent prunes settings inside the chip: with several models through a
    per-model threshold (``_model_threshold``)."""
    counter = [0, 0, 0]  # layer schedules solved, of them not proven optimal, of them reused from the cache
    times_cache: list[dict] = [{} for _ in task.models]
    memos = [ChipMemo() for _ in task.models]  # shared by the chip's HBM sizes and plan units
    results = []
    single = len(task.models) == 1
    weights = task.weight_by_hbm or {}
    dominated_by: float | None = None
    dominated_w = math.inf  # the weight at the size that fell below the incumbent
    bound_only = strict = False
    carry = None  # (result, per-model peak memory of its plans) at a larger HBM

    def score_of(outcomes, gib) -> float:
        return float(np.mean([o.throughput_seq_per_s / (mt.reference_seq_per_s * weights.get(gib, 1.0))
                              for o, mt in zip(outcomes, task.models)]))

    for gib in sorted(task.hbm_gib, reverse=True):
        w = weights.get(gib, 1.0)
        if dominated_by is not None and w >= dominated_w:
            results.append(ChipResult(task.index, gib, "bounded", dominated_by, (), counter[0], counter[1],
                                      bound_only, counter[2], strict))
            continue
        if carry is not None and all(mem <= gib * GiB for mem in carry[1]):
            # the larger HBM's best plans fit this one too, and a smaller HBM cannot do better
            score = score_of(carry[0].outcomes, gib)
            results.append(replace(carry[0], hbm_gib=gib, score=score, schedules_solved=counter[0],
                                   schedules_not_optimal=counter[1], schedules_reused=counter[2]))
            if score < task.incumbent_score * (1 - TIE_RTOL):
                dominated_by, dominated_w, bound_only, strict = score, w, False, False
            continue
        carry = None
        outcomes, exact, mems, probed = [], True, [], 0
        refs = [mt.reference_seq_per_s * w for mt in task.models]  # the score's divisors at this HBM size
        known = [max(mt.setting_ub[gib]) / r for mt, r in zip(task.models, refs)]  # normalized
        for k, mt in enumerate(task.models):
            threshold = (task.incumbent_score * refs[k] if single
                         else _model_threshold(task.incumbent_score, known, k) * refs[k])
            cand, tput, ok, n = model_best(task, mt, gib, threshold, times_cache[k], counter, memos[k])
            exact &= ok
            probed += n
            if not ok:  # this model alone keeps the chip below the incumbent: the others need no work
                break
            known[k] = tput / refs[k]
            outcomes.append(_outcome(task, mt, cand))
            mems.append(_plan_memory_bytes(task, mt, cand, gib) if cand is not None else math.inf)
        if not exact:  # one model below its threshold: the chip cannot reach the incumbent
            # (probed == 0: decided by lower-bound layer times alone, so by the chip's lower bounds)
            dominated_by, dominated_w, bound_only, strict = task.incumbent_score, w, probed == 0, True
            results.append(ChipResult(task.index, gib, "bounded", dominated_by, (), counter[0], counter[1],
                                      bound_only, counter[2], strict))
            continue
        score = score_of(outcomes, gib)
        status = "exact" if all(o.throughput_seq_per_s > 0 for o in outcomes) else "infeasible"
        results.append(ChipResult(task.index, gib, status, score, tuple(outcomes), counter[0], counter[1],
                                  schedules_reused=counter[2]))
        if status == "exact":
            carry = (results[-1], mems)
        if status == "exact" and score < task.incumbent_score * (1 - TIE_RTOL):
            dominated_by, dominated_w, strict = score, w, False
    return results


def evaluate_chips(tasks: tuple[ChipTask, ...]) -> list[list[ChipResult]]:
    """``evaluate_chip`` of several chips in one call, in order: one round trip to a worker for a batch of
    chips (most chips deep in the bound order are ruled out in milliseconds, so a round trip per chip would
    cost more than the work on a loaded machine).

    With a network axis the batch holds a chip's candidates together, fastest network first, and a candidate
    whose chip was already evaluated on a network at least as fast (``at_least_as_fast``: no plan is slower
    there) is bounded by that result at each HBM size (``sibling_bounds``): one evaluation rules out a chip on
    all its slower networks. A strict bound (the chip on the faster network stayed below an incumbent) rules
    it out whenever the incumbent is no lower now; an upper bound when it is below the incumbent."""
    out: list[list[ChipResult]] = []
    seen: list[tuple[ChipTask, list[ChipResult]]] = []
    for t in tasks:
        bound = sibling_bounds(t, seen)
        inc = t.incumbent_score
        cut = tuple(g for g in t.hbm_gib if g in bound
                    and (bound[g][0] <= inc if bound[g][1] else bound[g][0] < inc * (1 - TIE_RTOL)))
        rest = tuple(g for g in t.hbm_gib if g not in cut)
        results = (evaluate_chip(replace(t, hbm_gib=rest)) if rest else []) \
            + [ChipResult(t.index, g, "bounded", bound[g][0], (), 0, 0, strict=bound[g][1]) for g in cut]
        results.sort(key=lambda r: -r.hbm_gib)
        out.append(results)
        if t.network is not None:
            seen.append((t, results))
    return out


def sibling_bounds(task: ChipTask, seen) -> dict:
    """Per HBM size of ``task``, (bound, strict) of its score from the results ``seen`` of the same chip on a
    network at least as fast: its throughput there is no lower, so its score is at most that result's score
    (exact, or the upper bound of a bounded one) times the ratio of the two candidates' objective weights, and
    below that times (1 - TIE_RTOL) when the result is strict (``ChipResult.strict``); the least bound wins,
    strict on a tie."""
    out: dict = {}
    if task.network is None:
        return out
    mine = task.weight_by_hbm or {}
    for other, results in seen:
        if other.base_chip != task.base_chip or not at_least_as_fast(other.network, task.network):
            continue
        theirs = other.weight_by_hbm or {}
        for r in results:
            if r.hbm_gib in task.hbm_gib:
                b = (r.score * theirs.get(r.hbm_gib, 1.0) / mine.get(r.hbm_gib, 1.0), r.strict)
                out[r.hbm_gib] = min(out.get(r.hbm_gib, (math.inf, False)), b, key=lambda x: (x[0], not x[1]))
    return out
