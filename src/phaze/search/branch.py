"""Branch and bound over the chips of a co-search: which chip to evaluate next, the incumbent, what is done.

Chips are visited in order of their vectorized score upper bound (or, for an exact Pareto front, smallest
area first) and skipped once their bound cannot matter; finished results come back through ``absorb_many``.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from phaze.hardware.space import CandidateSet
from phaze.search.bounds import ModelBounds
from phaze.search.exact import TIE_RTOL, ChipResult, ChipTask, ModelTask
from phaze.search.spec import SearchSpec
from phaze.search.store import Store


def chip_fields(cands: CandidateSet, i: int) -> dict:
    a, j = cands.row_of(i)
    return {"chip": int(i), "area_mm2": float(cands.area_mm2[i]), "num_tc": int(a.num_tc[j]),
            "tc_rows": int(a.tc_rows[j]), "tc_cols": int(a.tc_cols[j]), "num_vc": int(a.num_vc[j]),
            "vc_width": int(a.vc_width[j]), "glb_bytes": int(a.glb_bytes[j])}


def _better(a: ChipResult, b: ChipResult | None, area: np.ndarray) -> bool:
    """Higher score wins; ties go to the smaller chip, then the smaller HBM, then the lower index."""
    if b is None:
        return True
    return (-a.score, area[a.index], a.hbm_gib, a.index) < (-b.score, area[b.index], b.hbm_gib, b.index)


class BranchAndBound:
    """State of the exact phase: chips in bound order, the incumbent, what is done, what is pending."""

    def __init__(self, spec: SearchSpec, cands: CandidateSet, bounds: list[ModelBounds], ref_tput: list[float],
                 cluster, done: dict, prune: bool, schedule_time_limit_s: float, weights=None, clusters=()) -> None:
        self.spec, self.cands, self.bounds, self.ref_tput, self.cluster = spec, cands, bounds, ref_tput, cluster
        # with a network axis: each network's cluster (a candidate is evaluated on its own network's)
        self.clusters = tuple(clusters)
        # per-candidate objective weight [HBM size, chip] (phaze.search.objective): score = throughput /
        # (reference x weight); a 1-D weight is the same at every HBM size
        w = np.ones(len(cands)) if weights is None else np.asarray(weights, np.float64)
        self.w = np.tile(w, (len(spec.hbm_gib), 1)) if w.ndim == 1 else w
        self.prune, self.limit_s = prune, schedule_time_limit_s
        self.plan_spaces = [spec.plan_space_for(b.model) for b in bounds]
        self.pareto = spec.pareto
        # score upper bound per (hbm, chip): mean over models of throughput bound / reference throughput
        self.ub = np.mean([b.throughput_ub / r for b, r in zip(bounds, ref_tput)], axis=0) / self.w
        self.chip_ub = self.ub.max(axis=0)
        area = cands.area_mm2
        # best bound first; for an exact Pareto front, smallest area first (what is smaller is then known)
        # with a network axis (and not Pareto): a chip's candidates of equal bound side by side, fastest network
        # first, so a batch carries them together and the first bounds the rest (``evaluate_chips``)
        keys = (np.arange(len(cands)),)
        if self.clusters and not self.pareto:
            keys += (_network_rank(cands.networks)[cands.network_index], cands.chip_index)
        self.order = np.lexsort(keys + (area if self.pareto else -self.chip_ub,))
        self.sorted_ub = self.chip_ub[self.order]
        self.pos = 0
        self.done = done
        self.best: ChipResult | None = None
        self.n_exact = 0
        self.front = _Front()
        for r in done.values():
            self._consider(r)
        self.sigs: dict[int, bytes] = {}
        self.bounded_sigs: dict[bytes, float] = {}
        self.counters = {"schedules_solved": 0, "schedules_not_optimal": 0, "schedules_reused": 0,
                         "chips_evaluated_this_run": 0}

    @property
    def incumbent(self) -> float:
        return self.best.score if self.best else 0.0

    def threshold(self, chip: int | None = None) -> float:
        """Scores below this cannot matter: below the incumbent, or (Pareto mode) below the best exact
        score of a chip no larger than ``chip`` (such a candidate is dominated, so off the front)."""
        if not self.prune:
            return -np.inf
        best = self.incumbent if not self.pareto else self.front.best_up_to(float(self.cands.area_mm2[chip]))
        return best * (1 - TIE_RTOL)

    def _consider(self, r: ChipResult) -> None:
        self.n_exact += r.status == "exact"
        if r.status == "exact":
            self.front.add(float(self.cands.area_mm2[r.index]), r.score)
            if _better(r, self.best, self.cands.area_mm2):
                self.best = r

    def next_tasks(self, store: Store, n: int = 1) -> list[ChipTask]:
        """Up to ``n`` next chips worth an exact evaluation, in bound order (empty when every remaining chip
        is pruned). Chips whose lower-bound layer times equal an already bounded chip's are recorded as
        bounded on the way (one transaction for all of them)."""
        tasks: list[ChipTask] = []
        shared: list[ChipResult] = []
        try:
            while len(tasks) < n or self._sibling_next(tasks):
                task = self._next_task(shared)
                if task is None:
                    break
                tasks.append(task)
        finally:
            if shared:
                store.add(shared, {r.index: chip_fields(self.cands, r.index) for r in shared})
        return tasks

    def _sibling_next(self, tasks: list[ChipTask]) -> bool:
        """True when the next candidate in order is the last task's chip on another network (a batch keeps a
        chip's candidates together)."""
        return bool(tasks) and self.clusters != () and self.pos < len(self.order) \
            and tasks[-1].base_chip == int(self.cands.chip_index[self.order[self.pos]])

    def _next_task(self, shared: list[ChipResult]) -> ChipTask | None:
        while self.pos < len(self.order):
            c = int(self.order[self.pos])
            threshold = self.threshold(c)
            if self.chip_ub[c] < threshold and not self.pareto:
                self.pos = len(self.order)  # sorted by bound: every remaining chip is pruned
                return None
            self.pos += 1
            hbms = tuple(g for h, g in enumerate(self.spec.hbm_gib)
                         if (c, g) not in self.done and self.ub[h, c] >= threshold)
            if not hbms:
                continue
            # chips share a bounded result only with equal lower-bound layer times AND equal weights (a chip of
            # equal times but a smaller weight, e.g. less area under perf-per-area, could score higher)
            # ... and the same network: a bound found on one network never stands for a chip on another (a slower
            # network's bounded chip says nothing of the same chip on a faster one)
            net = [np.array([float(self.cands.network_index[c])])] if self.clusters else []
            times = [b.times(c) for b in self.bounds]  # per model: (lower, upper) [setting, slot]
            sig = np.concatenate([lo.ravel() for lo, _ in times] + [self.w[:, c]] + net).tobytes()
            if sig in self.bounded_sigs:
                results = [ChipResult(c, g, "bounded", self.bounded_sigs[sig], (), 0, 0) for g in hbms]
                shared.extend(results)
                self.done.update({(c, g): r for g, r in zip(hbms, results)})
                continue
            self.sigs[c] = sig
            hbm_index = dict((g, h) for h, g in enumerate(self.spec.hbm_gib))
            models = tuple(ModelTask(b.model, b.memory, lo, up, r,
                                     {g: tuple(b.setting_ub[:, hbm_index[g], c]) for g in self.spec.hbm_gib},
                                     b.units, self.plan_spaces[k])
                           for k, (b, (lo, up), r) in enumerate(zip(self.bounds, times, self.ref_tput)))
            cluster = self.clusters[int(self.cands.network_index[c])] if self.clusters else self.cluster
            # named by its design alone: a chip's network siblings share its costed ops and layer problems
            # (``schedule.build``'s op memo and ``exact._problem`` are keyed by the accelerator, name included)
            name = f"chip{int(self.cands.chip_index[c])}" if self.clusters else f"cand{c}"
            return ChipTask(c, replace(self.cands.accelerator(c), name=name), hbms, models, cluster,
                            self.spec.global_batch, self.spec.devices, max(threshold, 0.0) / (1 - TIE_RTOL),
                            self.limit_s, weight_by_hbm={g: float(self.w[hbm_index[g], c]) for g in hbms},
                            base_chip=int(self.cands.chip_index[c]) if self.clusters else -1,
                            network=self.cands.network(c) if self.clusters else None)
        return None

    def absorb_many(self, finished: list[tuple[int, list[ChipResult]]], store: Store) -> None:
        """Commit several chips' results in one transaction and update the incumbent."""
        every = [r for _, results in finished for r in results]
        store.add(every, {c: chip_fields(self.cands, c) for c, _ in finished})
        for c, results in finished:
            self.counters["chips_evaluated_this_run"] += 1
            if results and all(r.bound_only for r in results):
                # Its plan under lower-bound times cannot reach the incumbent at its largest HBM, so neither can
                # any chip with the same lower bounds (the incumbent only grows).
                self.bounded_sigs[self.sigs[c]] = max(r.score for r in results)
            for r in results:
                self.done[(r.index, r.hbm_gib)] = r
                self._consider(r)
            # each result carries the chip's running count; the chip's total is the largest
            for key in ("schedules_solved", "schedules_not_optimal", "schedules_reused"):
                self.counters[key] += max((getattr(r, key) for r in results), default=0)

    def resolved(self) -> int:
        """Candidates evaluated, bounded or already known to be pruned (for the progress bar)."""
        n_hbm = len(self.spec.hbm_gib)
        cut = (int(np.searchsorted(-self.sorted_ub, -self.threshold(), side="right")) if self.prune
               and not self.pareto else len(self.order))
        return min(len(self.order) * n_hbm, self.pos * n_hbm + (len(self.order) - max(cut, self.pos)) * n_hbm)

    def counts(self) -> dict:
        total = len(self.cands) * len(self.spec.hbm_gib)
        counts = {"candidates": total, "chips": len(self.cands), "hbm_sizes": len(self.spec.hbm_gib)}
        for status in ("exact", "bounded", "infeasible"):
            counts[status] = sum(r.status == status for r in self.done.values())
        counts["pruned"] = total - counts["exact"] - counts["bounded"] - counts["infeasible"]
        counts.update(self.counters)
        return counts


def _network_rank(networks) -> np.ndarray:
    """Each network's place when a chip's candidates are visited: most PHY bandwidth first (a network at least
    as fast as another has at least its bandwidth on both tiers), then the larger domain, a switch before a
    torus (``phaze.hardware.chip_network.at_least_as_fast`` never holds the other way round)."""
    order = sorted(range(len(networks)), key=lambda i: (-(networks[i].scale_up_Bps + networks[i].scale_out_Bps),
                                                        -networks[i].scale_up_chips, networks[i].topology != "switch"))
    rank = np.empty(len(networks), np.int64)
    rank[order] = np.arange(len(networks))
    return rank


class _Front:
    """Exact (area, score) points; the best score among chips no larger than a given area."""

    def __init__(self) -> None:
        self.area: list[float] = []
        self.score: list[float] = []

    def add(self, area_mm2: float, score: float) -> None:
        self.area.append(area_mm2)
        self.score.append(score)

    def best_up_to(self, area_mm2: float) -> float:
        if not self.area:
            return 0.0
        a, s = np.asarray(self.area), np.asarray(self.score)
        sel = s[a <= area_mm2]
        return float(sel.max()) if sel.size else 0.0
