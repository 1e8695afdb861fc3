"""A Spotlight-style accelerator search: Bayesian optimisation of ONE chip for the sum of its layer delays.

What Spotlight does (Sakhuja et al., "SPOTLIGHT: Enhancing Hardware Design Space Exploration with
Domain-Aware Bayesian Optimization", HPCA 2023; its public code is built on MAESTRO): a Gaussian process over
hand-built features of the hardware parameters, 10 random warm-up samples, then rounds that draw 1,000
random candidates, rank them by the lower confidence bound mean - 1.0 x std of the predicted objective and
evaluate the best 10, each pick replaced by a random one with probability 10%; the objective is the sum of
the layer delays (or the energy-delay product) of one accelerator. Here: the same template, candidate list
and area budget as the co-search, our cost model, and the objective of ``phaze.search.one_chip`` (forward
+ backward latency of every layer at a fixed microbatch; no placement, memory capacity or network), or with
``objective="edp"`` that latency times the energy of the same pass (``phaze.cost.energy``).

The Gaussian process is scikit-learn's ``GaussianProcessRegressor`` (Matern 5/2 with one length scale
per feature, plus a white-noise term), fitted to log latency; every random draw comes from one
``numpy.random.Generator`` seeded by ``seed``, so a run repeats exactly.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.space import CandidateSet
from phaze.schedule import ScheduleCache
from phaze.search.one_chip import OneChipLatency, energy_j, latency_bounds, one_chip_latency, one_chip_setting
from phaze.workload.config import ModelConfig

# Spotlight's settings (HPCA 2023, Sec. V "Methodology" / its released configuration): warm-up samples,
# hardware samples in all, random candidates ranked per round, picks evaluated per round, the chance a pick
# is replaced by a random candidate, and the exploration weight of the lower confidence bound.
WARMUP_SAMPLES = 10
SAMPLES = 100
POOL_SIZE = 1000
PICKS_PER_ROUND = 10
RANDOM_PICK_PROBABILITY = 0.10
LCB_KAPPA = 1.0
OBJECTIVES = ("latency", "edp")
# The per-layer solver's budget per sample (a deterministic node/work budget, see phaze.schedule.solve): 5 s,
# where the co-search's 1 s left one GPT-3 175B layer on one of the 100 sampled chips unproven in the
# reproduce run of the README; a layer the bounds settle costs nothing either way.
SCHEDULE_TIME_LIMIT_S = 5.0


def chip_features(cands: CandidateSet) -> np.ndarray:
    """[chip, feature] Spotlight-style hand-built features, standardized over the candidate list: compute
    size (MACs over all tensor cores, lanes over all vector cores, MACs per tensor core), buffer sizes and
    bandwidths (every template field in bytes or B/s that varies across the candidates, e.g. the GLB), the
    tensor-core aspect ratio (rows / columns) and each varying core count and shape; all in log2, plus the
    area as a fraction of the budget."""
    a = cands.arch
    cols = {
        "log2_macs": np.log2(a.num_tc * a.tc_rows * a.tc_cols),
        "log2_lanes": np.log2(a.num_vc * a.vc_width),
        "log2_macs_per_core": np.log2(a.tc_rows * a.tc_cols),
        "log2_aspect": np.log2(a.tc_rows / a.tc_cols),
        "area_fraction": cands.area_mm2 / cands.budget_mm2,
    }
    for name in a.__dataclass_fields__:
        v = np.asarray(getattr(a, name), dtype=float)
        if name in cols or v.size == 0 or np.all(v == v[0]) or np.any(v <= 0):
            continue  # a field every candidate shares carries no information
        cols[f"log2_{name}"] = np.log2(v)
    x = np.stack(list(cols.values()), axis=1)
    sd = x.std(axis=0)
    keep = sd > 0
    return (x[:, keep] - x[:, keep].mean(axis=0)) / sd[keep]


@dataclass(frozen=True)
class Sample:
    index: int  # position in the candidate list
    latency_s: float
    how: str  # "warm-up", "model" (ranked by the GP) or "random" (the 10% random pick)
    energy_j: float | None = None  # with objective "edp"
    value: float = 0.0  # the objective: latency_s, or energy_j x latency_s (J s)


@dataclass(frozen=True)
class SpotlightResult:
    """The best chip of the samples (lowest objective; ties: smaller area, then lower index) and every sample."""

    model: str
    objective: str
    microbatch_size: int
    seed: int
    index: int
    accelerator: Accelerator
    area_mm2: float
    latency_s: float
    energy_j: float | None
    value: float  # the objective of the best chip (latency s, or EDP J s)
    samples: tuple[Sample, ...]
    wall_time_s: float
    schedules_solved: int
    schedules_not_optimal: int
    evaluated: int  # chips evaluated exactly (= len(samples))


# a one-block model to probe whether a space's chips model energy (NaN: they do not)
_PROBE = ModelConfig(name="probe", num_layers=1, hidden=64, heads=1, ffn=64, vocab=64, seq_len=8, max_tp=1)
_PROBE_SETTING = one_chip_setting(_PROBE, 1)
_CACHE = ScheduleCache()  # per process: identical layer problems met on several chips are solved once


def _latency(model: ModelConfig, acc: Accelerator, mbs: int, lower: np.ndarray, upper: np.ndarray,
             time_limit_s: float, with_energy: bool = False) -> OneChipLatency:
    return one_chip_latency(model, acc, mbs, cache=_CACHE, time_limit_s=time_limit_s, bounds=(lower, upper),
                            with_energy=with_energy)


class _Evaluator:
    """Evaluates batches of candidates exactly (vectorized bounds for the batch, then the per-layer solver
    where they differ), on ``executor`` when given."""

    def __init__(self, model: ModelConfig, cands: CandidateSet, microbatch_size: int, executor,
                 time_limit_s: float, with_energy: bool = False) -> None:
        self.model, self.cands, self.mbs, self.executor, self.limit = model, cands, microbatch_size, executor, \
            time_limit_s
        self.with_energy = with_energy
        self.setting = one_chip_setting(model, microbatch_size)
        self.results: dict[int, OneChipLatency] = {}

    def run(self, idx: list[int]) -> list[OneChipLatency]:
        todo = [i for i in dict.fromkeys(idx) if i not in self.results]
        if todo:
            lo, up = latency_bounds(self.model, self.setting, self.cands.arch.select(np.asarray(todo)))
            args = [(self.model, self.cands.accelerator(i, name=f"cand{i}"), self.mbs, lo[:, k], up[:, k],
                     self.limit, self.with_energy) for k, i in enumerate(todo)]
            if self.executor is None:
                outs = [_latency(*a) for a in args]
            else:
                outs = [f.result() for f in [self.executor.submit(_latency, *a) for a in args]]
            self.results.update(zip(todo, outs))
        return [self.results[i] for i in idx]


def _fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_pool: np.ndarray, seed: int):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
    from threadpoolctl import threadpool_limits

    kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * Matern(np.ones(x_train.shape[1]), (1e-2, 1e2), nu=2.5)
              + WhiteKernel(1e-4, (1e-8, 1e-1)))
    gp = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=2, random_state=seed)
    # One BLAS thread: the fit's ~100x100 Cholesky solves are far too small to share, and OpenBLAS's second
    # thread only spins against the search's own worker processes (measured on this shared 2-core machine,
    # 100 samples, 1,000 candidates: 2.10 s -> 0.51 s CPU per fit, the same predictions bit for bit)
    with threadpool_limits(1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(x_train, y_train)
        return gp.predict(x_pool, return_std=True)


def _check(cands: CandidateSet, samples: int, warmup: int, objective: str) -> None:
    if objective not in OBJECTIVES:
        raise ConfigError(f"--objective {objective!r}: use latency or edp")
    if objective == "edp" and len(cands) and np.isnan(energy_j(_PROBE, _PROBE_SETTING, cands.arch.select([0]))[0]):
        raise ConfigError("--objective edp needs the energy of each layer, which the chips of this space do not "
                          "model (the paper's template has no SRAM or network description); use the default "
                          "space or --objective latency")
    if len(cands) == 0:
        raise ConfigError("the design space has no candidate under its area budget; raise --budget-mm2")
    if not (isinstance(samples, int) and samples > 0 and isinstance(warmup, int) and 0 < warmup <= samples):
        raise ConfigError(f"spotlight: need 0 < warm-up samples ({warmup}) <= samples ({samples})")


def _sample(i: int, out: OneChipLatency, how: str, objective: str) -> Sample:
    value = out.edp_js if objective == "edp" else out.latency_s
    return Sample(int(i), out.latency_s, how, out.energy_j, float(value))


def _result(model, objective, mbs, seed, cands, ev: _Evaluator, samples: list[Sample], t0: float) -> SpotlightResult:
    best = min(samples, key=lambda s: (s.value, float(cands.area_mm2[s.index]), s.index))
    outs = [ev.results[s.index] for s in samples]
    return SpotlightResult(model.name, objective, mbs, seed, best.index,
                           cands.accelerator(best.index, name=f"spotlight-{model.name}"),
                           float(cands.area_mm2[best.index]), best.latency_s, best.energy_j, best.value,
                           tuple(samples),
                           time.perf_counter() - t0, sum(o.schedules_solved for o in outs),
                           sum(o.schedules_not_optimal for o in outs), len(samples))


@dataclass(frozen=True)
class BoRecipe:
    """The Bayesian optimisation's knobs (the module doc gives each value's source): random warm-up samples,
    the random pool each round ranks, the picks per round, the chance a pick is random instead, and the
    lower-confidence-bound weight of the prediction's standard deviation."""

    warmup: int = WARMUP_SAMPLES
    pool_size: int = POOL_SIZE
    picks: int = PICKS_PER_ROUND
    random_pick_probability: float = RANDOM_PICK_PROBABILITY
    kappa: float = LCB_KAPPA


def spotlight_search(model: ModelConfig, cands: CandidateSet, *, seed: int = 0, samples: int = SAMPLES,
                     recipe: BoRecipe = BoRecipe(), objective: str = "latency", microbatch_size: int = 1,
                     executor=None, time_limit_s: float = SCHEDULE_TIME_LIMIT_S, on_sample=None) -> SpotlightResult:
    """Spotlight-style Bayesian optimisation over ``cands`` (see the module doc) with ``recipe``'s knobs;
    ``samples`` chips are evaluated exactly in all (fewer if the list is shorter). ``on_sample(n)`` is called
    as samples land."""
    warmup, pool_size, picks = recipe.warmup, recipe.pool_size, recipe.picks
    random_pick_probability, kappa = recipe.random_pick_probability, recipe.kappa
    _check(cands, samples, warmup, objective)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n = len(cands)
    budget = min(samples, n)
    feats = chip_features(cands)
    ev = _Evaluator(model, cands, microbatch_size, executor, time_limit_s, objective == "edp")
    tick = on_sample or (lambda k: None)
    done: list[Sample] = []
    seen = np.zeros(n, dtype=bool)

    def take(idx: list[int], how: list[str]) -> None:
        for i, h, out in zip(idx, how, ev.run(idx)):
            done.append(_sample(i, out, h, objective))
            seen[i] = True
        tick(len(done))

    first = rng.choice(n, size=min(warmup, budget), replace=False)
    take([int(i) for i in first], ["warm-up"] * len(first))
    while len(done) < budget:
        free = np.flatnonzero(~seen)
        pool = rng.choice(free, size=min(pool_size, free.size), replace=False)
        x = feats[[s.index for s in done]]
        y = np.log([s.value for s in done])
        mu, sd = _fit_predict(x, y, feats[pool], seed)
        ranked = pool[np.lexsort((pool, mu - kappa * sd))]
        k = min(picks, budget - len(done))
        chosen, how = [int(i) for i in ranked[:k]], ["model"] * k
        for j in range(k):  # each pick: with probability 10% a random candidate not yet chosen instead
            if rng.random() < random_pick_probability:
                rest = np.setdiff1d(free, chosen)
                if rest.size:
                    chosen[j], how[j] = int(rng.choice(rest)), "random"
        take(chosen, how)
    return _result(model, objective, microbatch_size, seed, cands, ev, done, t0)


def random_search(model: ModelConfig, cands: CandidateSet, *, seed: int = 0, samples: int = SAMPLES,
                  microbatch_size: int = 1, executor=None, time_limit_s: float = SCHEDULE_TIME_LIMIT_S) -> SpotlightResult:
    """Uniform random sampling with the same budget and objective (the fair check that the BO helps)."""
    _check(cands, samples, 1, "latency")
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    ev = _Evaluator(model, cands, microbatch_size, executor, time_limit_s)
    idx = [int(i) for i in rng.choice(len(cands), size=min(samples, len(cands)), replace=False)]
    done = [_sample(i, out, "random", "latency") for i, out in zip(idx, ev.run(idx))]
    return _result(model, "latency", microbatch_size, seed, cands, ev, done, t0)
