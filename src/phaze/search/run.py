"""The co-search loop: vectorized bounds for every chip, then exact evaluation in bound order until no
remaining candidate can beat the incumbent (branch and bound; the answer equals brute force)."""
from __future__ import annotations

import concurrent.futures as cf
import sys
import time
from dataclasses import dataclass, replace

import numpy as np

from phaze.errors import InfeasibleError
from phaze.hardware.presets import TPUV4_LIKE, get_cluster
from phaze.hardware.space import CandidateSet, enumerate_space
from phaze.search.bounds import ModelBounds, model_bounds
from phaze.search.exact import TIE_RTOL, ChipResult, ChipTask, ModelTask, evaluate_chip
from phaze.search.executor import make_executor
from phaze.search.spec import GiB, SearchSpec
from phaze.search.store import Store


@dataclass(frozen=True)
class SearchResult:
    """Plain data: the best chip and its plans, the TPUv4-like comparison, the Pareto front, counts."""

    store: str
    spec: dict
    counts: dict  # candidates, exact, bounded, pruned, infeasible, schedules_solved, schedules_not_optimal
    best: dict | None
    references: list[dict]  # per model: TPUv4-like with its best plan and with the paper's plan
    pareto: list[dict]  # (area, score) front: exact with spec.pareto, else among exactly evaluated candidates
    wall_time_s: float


def _chip_fields(cands: CandidateSet, i: int) -> dict:
    a = cands.arch
    return {"chip": int(i), "area_mm2": float(cands.area_mm2[i]), "num_tc": int(a.num_tc[i]),
            "tc_rows": int(a.tc_rows[i]), "tc_cols": int(a.tc_cols[i]), "num_vc": int(a.num_vc[i]),
            "vc_width": int(a.vc_width[i]), "glb_bytes": int(a.glb_bytes[i])}


def references(spec: SearchSpec, cluster) -> list[dict]:
    """TPUv4-like chip (its own 32 GiB HBM) under its best plan and under the paper's fixed plan."""
    from phaze.placement import optimize
    from phaze.placement.baseline_plans import paper_baseline
    from phaze.hardware.area import area_mm2

    out = []
    for m in spec.models:
        ref = {"model": m.name, "area_mm2": float(area_mm2(TPUV4_LIKE)), "hbm_gib": TPUV4_LIKE.hbm_bytes / GiB}
        try:
            res = optimize(m, TPUV4_LIKE, cluster, spec.global_batch, devices=spec.devices,
                           microbatch_sizes=spec.microbatch_sizes, recompute_modes=spec.recompute_modes,
                           tp_values=spec.tp_values, interleave_values=(1,), sequence_parallel=(False,),
                           top_k=0, baselines=False, optimizer=spec.optimizer)
            ref.update(best_seq_per_s=res.best.throughput_seq_per_s, best_plan=res.best.plan.describe(),
                       best_mfu=res.best.mfu)
        except InfeasibleError as err:
            ref.update(best_seq_per_s=0.0, best_plan=f"none fits: {err}", best_mfu=0.0)
        b = paper_baseline(m, TPUV4_LIKE, cluster, spec.global_batch)
        ev = b.evaluation
        ref.update(paper_seq_per_s=ev.throughput_seq_per_s if b.fits else 0.0,
                   paper_plan=b.plan.describe() if b.plan is not None else b.reason,
                   paper_fits=b.fits, paper_reason=b.reason)
        out.append(ref)
    return out


class _Progress:
    """A rich progress bar on a terminal; a line every few seconds otherwise; nothing when quiet."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet or False
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.bar = None

    def phase(self, text: str) -> None:
        if not self.quiet:
            print(f"phaze search: {text}", file=sys.stderr, flush=True)

    def start(self, total: int) -> None:
        if self.quiet or not self.tty:
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                            TimeElapsedColumn(), TimeRemainingColumn(), transient=True)
        self.bar.start()
        self.task = self.bar.add_task("candidates", total=total)

    def update(self, resolved: int, total: int, incumbent: float, exact: int) -> None:
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.update(self.task, completed=resolved,
                            description=f"candidates (exact {exact}, best score {incumbent:.4g})")
        elif time.monotonic() - self.last > 5:
            self.last = time.monotonic()
            print(f"phaze search: {resolved}/{total} candidates resolved, {exact} evaluated exactly, best score "
                  f"{incumbent:.4g}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _better(a: ChipResult, b: ChipResult | None, area: np.ndarray) -> bool:
    """Higher score wins; ties go to the smaller chip, then the smaller HBM, then the lower index."""
    if b is None:
        return True
    return (-a.score, area[a.index], a.hbm_gib, a.index) < (-b.score, area[b.index], b.hbm_gib, b.index)


class _BranchAndBound:
    """State of the exact phase: chips in bound order, the incumbent, what is done, what is pending."""

    def __init__(self, spec: SearchSpec, cands: CandidateSet, bounds: list[ModelBounds], ref_tput: list[float],
                 cluster, done: dict, prune: bool, schedule_time_limit_s: float) -> None:
        self.spec, self.cands, self.bounds, self.ref_tput, self.cluster = spec, cands, bounds, ref_tput, cluster
        self.prune, self.limit_s = prune, schedule_time_limit_s
        self.pareto = spec.pareto
        # score upper bound per (hbm, chip): mean over models of throughput bound / reference throughput
        self.ub = np.mean([b.throughput_ub / r for b, r in zip(bounds, ref_tput)], axis=0)
        self.chip_ub = self.ub.max(axis=0)
        area = cands.area_mm2
        # best bound first; for an exact Pareto front, smallest area first (what is smaller is then known)
        self.order = np.lexsort((np.arange(len(cands)), area if self.pareto else -self.chip_ub))
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
        self.counters = {"schedules_solved": 0, "schedules_not_optimal": 0, "chips_evaluated_this_run": 0}

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

    def next_task(self, store: Store) -> ChipTask | None:
        """The next chip worth an exact evaluation (None when every remaining chip is pruned). Chips whose
        lower-bound layer times equal an already bounded chip's are recorded as bounded on the way."""
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
            sig = np.concatenate([b.lower_s[:, :, c].ravel() for b in self.bounds]).tobytes()
            if sig in self.bounded_sigs:
                results = [ChipResult(c, g, "bounded", self.bounded_sigs[sig], (), 0, 0) for g in hbms]
                store.add(results, {c: _chip_fields(self.cands, c)})
                self.done.update({(c, g): r for g, r in zip(hbms, results)})
                continue
            self.sigs[c] = sig
            hbm_index = dict((g, h) for h, g in enumerate(self.spec.hbm_gib))
            models = tuple(ModelTask(b.model, b.memory, b.lower_s[:, :, c], b.upper_s[:, :, c], r,
                                     {g: tuple(b.setting_ub[:, hbm_index[g], c]) for g in self.spec.hbm_gib})
                           for b, r in zip(self.bounds, self.ref_tput))
            return ChipTask(c, replace(self.cands.arch.accelerator(c), name=f"cand{c}"), hbms, models, self.cluster,
                            self.spec.global_batch, self.spec.devices, max(threshold, 0.0) / (1 - TIE_RTOL),
                            self.limit_s)
        return None

    def absorb(self, c: int, results: list[ChipResult], store: Store) -> None:
        """Commit one chip's results and update the incumbent."""
        self.counters["chips_evaluated_this_run"] += 1
        store.add(results, {c: _chip_fields(self.cands, c)})
        if results and all(r.bound_only for r in results):
            # Its plan under lower-bound times cannot reach the incumbent at its largest HBM, so neither can
            # any chip with the same lower bounds (the incumbent only grows).
            self.bounded_sigs[self.sigs[c]] = max(r.score for r in results)
        for r in results:
            self.done[(r.index, r.hbm_gib)] = r
            self._consider(r)
        # each result carries the chip's running count; the chip's total is the largest
        self.counters["schedules_solved"] += max((r.schedules_solved for r in results), default=0)
        self.counters["schedules_not_optimal"] += max((r.schedules_not_optimal for r in results), default=0)

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


def _pareto(rows: list[dict]) -> list[dict]:
    """Rows no smaller-or-equal-area row beats in score."""
    out, best = [], -np.inf
    for row in sorted(rows, key=lambda r: (r["area_mm2"], -r["score"], r["hbm_gib"], r["chip"])):
        if row["score"] > best:
            out.append(row)
            best = row["score"]
    return out


def run_search(spec: SearchSpec, store_path: str = "phaze-results.db", *, workers: int = 2, backend: str = "local",
               address: str | None = None, resume: bool = False, prune: bool = True, quiet: bool = False,
               schedule_time_limit_s: float = 1.0) -> SearchResult:
    """Search ``spec``; every finished chip is committed to ``store_path`` as it completes."""
    t0 = time.perf_counter()
    store = Store.open(store_path, spec.fingerprint(), resume)
    prog = _Progress(quiet)
    try:
        cluster = get_cluster(spec.cluster, spec.devices)
        cands = enumerate_space(spec.space)
        if len(cands) == 0:
            raise InfeasibleError("the design space has no candidate under its area budget; raise --budget-mm2")
        refs = store.get_meta("references")
        if refs is None:
            prog.phase("evaluating the TPUv4-like reference chip")
            refs = references(spec, cluster)
            store.put_meta("references", refs)
        executor = make_executor(backend, workers, address)
        pending: dict[cf.Future, int] = {}
        try:
            bounds = []
            for m in spec.models:
                prog.phase(f"bounding {m.name} on {len(cands)} chips (vectorized, settings over {workers} workers)")
                bounds.append(model_bounds(m, spec, cands.arch, cluster, executor))
            bb = _BranchAndBound(spec, cands, bounds, [r["best_seq_per_s"] or 1.0 for r in refs], cluster,
                                 store.load(), prune, schedule_time_limit_s)
            prog.phase(f"exact evaluation in bound order ({workers} worker{'s' if workers > 1 else ''})")
            prog.start(len(cands) * len(spec.hbm_gib))
            while True:
                while len(pending) < max(2, 2 * workers):
                    task = bb.next_task(store)
                    if task is None:
                        break
                    pending[executor.submit(evaluate_chip, task)] = task.index
                if not pending:
                    break
                finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                for f in sorted(finished, key=lambda f: pending[f]):
                    c = pending.pop(f)
                    bb.absorb(c, f.result(), store)
                prog.update(bb.resolved(), len(cands) * len(spec.hbm_gib), bb.incumbent, bb.n_exact)
        except BaseException:
            for f in pending:
                f.cancel()
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        executor.shutdown(wait=True)
        rows = store.rows(status="exact")
    finally:
        prog.stop()
        store.close()
    return SearchResult(store_path, spec.fingerprint(), bb.counts(), rows[0] if rows else None, refs, _pareto(rows),
                        time.perf_counter() - t0)
