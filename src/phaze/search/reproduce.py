"""The paper's comparison in one run: for each model, in the paper's setting, the co-search winner, the
TPUv4-like chip (its best plan and the paper's fixed plan at its own 32 GiB, and its best plan at the HBM size
of the sweep that serves it best, so a winner's gain from more HBM is not read as the architecture's) and the
Spotlight-style chip (its best plan and the paper's fixed plan).

One SQLite store holds everything: each model's co-search in its own namespace (``Store.open``), and each
finished model's rows under the "reproduce" namespace, so a killed run resumes where it stopped and a
finished model is never recomputed.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from phaze.errors import InfeasibleError, StoreError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.area import area_mm2
from phaze.hardware.presets import get_cluster
from phaze.hardware.accelerator import chip_text  # noqa: F401 (re-exported)
from phaze.hardware.space import enumerate_space
from phaze.placement.baseline_plans import PAPER_PLANS
from phaze.progress import Progress
from phaze.schedule import ScheduleCache
from phaze.search.run import fixed_chip_plan, references, run_search
from phaze.search.spec import SearchSpec
from phaze.search.spotlight import SAMPLES, spotlight_search
from phaze.search.store import Store
from phaze.units import GiB

PAPER_MODELS = tuple(PAPER_PLANS)  # the paper's 8 models, in its order
ROLES = ("phaze", "tpuv4-like", "spotlight")
ROWS_REVISION = 2  # what one model's rows are (``run_reproduce``'s store fingerprint)


@dataclass(frozen=True)
class ReproduceRow:
    """One model x chip x plan. ``evaluated``: candidates evaluated exactly (phaze), samples (spotlight);
    ``search_wall_s``: the chip search's wall time (None for the fixed TPUv4-like chip)."""

    model: str
    role: str  # phaze | tpuv4-like | spotlight
    plan_kind: str  # best | paper | best-hbm (the TPUv4-like chip's best plan at the HBM size, of the sweep's
    #                                     and its own, that serves it best)
    throughput_seq_per_s: float  # 0 when no plan fits
    ratio_to_tpuv4_like: float  # throughput / the TPUv4-like chip's under its best plan
    area_mm2: float
    power_w: float | None  # None: the chip model has no power
    hbm_gib: float | None
    chip: str
    plan: str
    iteration_time_s: float | None
    search_wall_s: float | None
    evaluated: int | None
    schedules_solved: int | None  # layer schedules the chip search solved (proofs counted below)
    schedules_not_optimal: int | None
    bound_by: str | None = None  # the largest share of the plan's iteration: compute, glb, hbm, network,
    #                              bubble or optimizer (``phaze.placement.power``); None without a plan
    area_split: str | None = None  # where the chip's area goes (compute, core SRAM, GLB, network)


@dataclass(frozen=True)
class ReproduceResult:
    store: str
    setting: dict  # the search setting every model shares (the spec's fingerprint without the model)
    rows: tuple[ReproduceRow, ...]
    model_wall_s: dict  # model -> wall seconds of the run that finished it (co-search + spotlight + plans)
    wall_time_s: float
    resumed: tuple[str, ...]  # models whose rows came from the store
    seed: int = 0  # of the Spotlight-style search
    samples: int = SAMPLES
    # model -> CPU seconds of the run that finished it (this process and its pool workers; None: not measured,
    # e.g. rows from a store written before this was kept)
    model_cpu_s: dict = field(default_factory=dict)
    # model -> the co-search's counts (exact, bounded, pruned, chips evaluated this run, layer schedules
    # solved / not proven optimal / reused from the workers' caches)
    model_counts: dict = field(default_factory=dict)


def area_split(acc: Accelerator) -> str | None:
    """Shares of the chip's area: compute (MACs and lanes), core SRAM (operand buffers, accumulators), GLB,
    on-chip network (chips with the hierarchy; None for the paper's template)."""
    if not acc.has_hierarchy:
        return None
    from phaze.hardware.chip_area import chip_area_breakdown_mm2

    parts = {k: float(v[0]) for k, v in chip_area_breakdown_mm2(acc.as_arrays()).items()}
    return ", ".join(f"{k.replace('_', ' ')} {parts[k] / parts['total']:.0%}" for k in ("compute", "core_sram", "glb", "noc", "control"))


def paper_spec(model, **overrides) -> SearchSpec:
    """The paper's setting (``SearchSpec`` defaults: 1024 devices, batch 4096, flat 4 GiB/s network, HBM
    32/64/80 GiB, microbatch 1/2/4/8; the paper's plan space: recompute none/full, v = 1, no sequence
    parallelism, no ZeRO) for one model; ``overrides`` change fields (``plan_space_name="full"`` too)."""
    overrides.setdefault("plan_space_name", "paper")
    return SearchSpec(models=(model,), **overrides)


def chip_plans(model, accelerator: Accelerator, spec: SearchSpec, cluster, hbm_gib: tuple[int, ...],
               cache: ScheduleCache | None = None, *, paper_plan: bool = True) -> tuple[dict, dict]:
    """A fixed chip's best plan (the co-search's plan space, exact) and the paper's fixed plan, each at the
    HBM size of ``hbm_gib`` that serves it best (ties: the smaller HBM). Returns two dicts with
    throughput_seq_per_s (0: nothing fits), iteration_time_s, plan, hbm_gib (``paper_plan`` False: the
    paper's plan is not evaluated and its dict says so)."""
    from phaze.placement.baseline_plans import paper_baseline

    best = {"throughput_seq_per_s": 0.0, "iteration_time_s": None, "plan": "", "hbm_gib": None, "power_w": None}
    paper = dict(best)
    best_ev = paper_ev = None
    reasons = []
    for gib in sorted(hbm_gib):
        acc = replace(accelerator, hbm_bytes=int(gib * GiB))
        try:
            res = fixed_chip_plan(model, acc, spec, cluster, cache)
            if res.best.throughput_seq_per_s > best["throughput_seq_per_s"]:
                best.update(throughput_seq_per_s=res.best.throughput_seq_per_s,
                            iteration_time_s=res.best.iteration_time_s, plan=res.best.plan.describe(), hbm_gib=gib)
                best_ev = (acc, res.best)
        except InfeasibleError as err:
            reasons.append(str(err))
        if not paper_plan:
            paper["plan"] = "not evaluated"
            continue
        b = paper_baseline(model, acc, cluster, spec.global_batch, spec.paper_plan_runtime, schedule_cache=cache)
        if b.fits and b.evaluation.throughput_seq_per_s > paper["throughput_seq_per_s"]:
            paper.update(throughput_seq_per_s=b.evaluation.throughput_seq_per_s,
                         iteration_time_s=b.evaluation.iteration_time_s, plan=b.plan.describe(), hbm_gib=gib)
            paper_ev = (acc, b.evaluation)
        elif not b.fits and not paper["plan"]:
            paper["plan"] = b.reason
    if not best["plan"]:
        best["plan"] = f"none fits: {reasons[-1] if reasons else 'no plan'}"
    for d, found in ((best, best_ev), (paper, paper_ev)):
        d["bound_by"] = None
        if found is not None:
            pw = _power(model, found[0], found[1], cluster)
            d["power_w"], d["bound_by"] = pw["power_w"], pw["bound"]
    return best, paper


def plan_power_w(model, accelerator: Accelerator, evaluation, cluster) -> float | None:
    """Average chip power over an iteration of an evaluated plan (None where the chip model has none)."""
    return _power(model, accelerator, evaluation, cluster)["power_w"]


def _power(model, accelerator: Accelerator, evaluation, cluster) -> dict:
    from phaze.placement.power import plan_power

    tp = evaluation.plan.tp
    return plan_power(model, accelerator, evaluation, cluster.tier_for_group(tp) if tp > 1 else None)


def _rows_for_model(model, spec: SearchSpec, store_path: str, workers: int, seed: int, samples: int,
                    quiet: bool, executor, prog: Progress) -> tuple[list[ReproduceRow], dict]:
    from phaze.search.objective import search_candidates
    from phaze.search.run import reference_cluster

    # the fixed chips (TPUv4-like, Spotlight-style) are on the reference's network (TPU v4's ICI with a network axis)
    cluster = reference_cluster(spec, get_cluster(spec.cluster, spec.devices))
    res = run_search(spec, store_path, workers=workers, resume=True, quiet=quiet, namespace=f"cosearch/{model.name}",
                     executor=executor, why=False)
    ref = res.references[0]
    ref_tput = ref.best_seq_per_s
    ratio = (lambda x: x / ref_tput) if ref_tput > 0 else (lambda x: 0.0)
    rows = []
    b = res.best
    cands = search_candidates(spec.space, spec.tdp_w, spec.objective)  # the winner's numbering
    if b is not None:
        o = b.outcomes[0]
        acc = cands.accelerator(b.chip, name=f"phaze-{model.name}")
        net = cands.network(b.chip)  # its own network (a space with a network axis): named beside the chip
        rows.append(ReproduceRow(model.name, "phaze", "best", o.throughput_seq_per_s,
                                 ratio(o.throughput_seq_per_s), b.area_mm2, o.power_w, b.hbm_gib,
                                 chip_text(acc) + (f"; network {net.name}" if net is not None else ""),
                                 o.plan, o.iteration_time_s, res.wall_time_s, res.counts["exact"],
                                 res.counts.get("schedules_solved"), res.counts.get("schedules_not_optimal"),
                                 o.bound_by, area_split(acc)))
    tpu = spec.space.reference  # the TPUv4-like chip of the space's template
    # areas with the network's PHY where the chips have networks (the winner's is in its row; the fixed chips are
    # on the reference's network, TPU v4's ICI)
    phy_mm2 = spec.space.reference_phy_mm2
    tpu_area = float(area_mm2(tpu)) + phy_mm2
    tpu_gib = tpu.hbm_bytes / GiB
    rows.append(ReproduceRow(model.name, "tpuv4-like", "best", ref_tput, ratio(ref_tput), tpu_area, ref.power_w,
                             tpu_gib, chip_text(tpu), ref.best_plan, spec.global_batch / ref_tput if ref_tput else None,
                             None, None, None, None, ref.bound_by, area_split(tpu)))
    sizes = tuple(sorted({*spec.hbm_gib, int(tpu_gib)}))  # the co-search's sweep and its own size
    prog.note(f"{model.name}: the TPUv4-like chip's best plan at HBM {'/'.join(map(str, sizes))} GiB")
    swept, _ = chip_plans(model, tpu, spec, cluster, sizes, ScheduleCache(), paper_plan=False)
    rows.append(ReproduceRow(model.name, "tpuv4-like", "best-hbm", swept["throughput_seq_per_s"],
                             ratio(swept["throughput_seq_per_s"]), tpu_area, swept["power_w"], swept["hbm_gib"],
                             chip_text(tpu), swept["plan"], swept["iteration_time_s"], None, None, None, None,
                             swept["bound_by"], area_split(tpu)))
    pt = ref.paper_seq_per_s
    pp = _paper_power(model, tpu, spec, cluster) if pt > 0 else {"power_w": None, "bound": None}
    rows.append(ReproduceRow(model.name, "tpuv4-like", "paper", pt, ratio(pt), tpu_area, pp["power_w"], tpu_gib,
                             chip_text(tpu), ref.paper_plan, spec.global_batch / pt if pt else None,
                             None, None, None, None, pp["bound"], area_split(tpu)))
    prog.note(f"{model.name}: Spotlight-style search ({samples} samples, seed {seed})")
    prog.stage(f"spotlight {model.name}", samples, "samples")
    sp = spotlight_search(model, enumerate_space(spec.space.without_network()), seed=seed, samples=samples,
                          executor=executor, on_sample=lambda n: prog.update(n))
    prog.done(f"best {sp.value:.4g} {'J s' if sp.objective == 'edp' else 's'} per pass, chip {sp.index}")
    prog.note(f"{model.name}: best and paper plans of the Spotlight-style chip on HBM "
              f"{'/'.join(map(str, spec.hbm_gib))} GiB")
    best, paper = chip_plans(model, sp.accelerator, spec, cluster, spec.hbm_gib, ScheduleCache())
    for kind, d in (("best", best), ("paper", paper)):
        rows.append(ReproduceRow(model.name, "spotlight", kind, d["throughput_seq_per_s"], ratio(d["throughput_seq_per_s"]),
                                 sp.area_mm2 + phy_mm2, d["power_w"], d["hbm_gib"], chip_text(sp.accelerator), d["plan"],
                                 d["iteration_time_s"], sp.wall_time_s, sp.evaluated, sp.schedules_solved,
                                 sp.schedules_not_optimal, d["bound_by"], area_split(sp.accelerator)))
    return rows, dict(res.counts)


def _paper_power(model, chip: Accelerator, spec: SearchSpec, cluster) -> dict:
    """Power and bound of the reference chip under the paper's plan (evaluated again: the references keep
    numbers only)."""
    from phaze.placement.baseline_plans import paper_baseline

    b = paper_baseline(model, chip, cluster, spec.global_batch, spec.paper_plan_runtime)
    return _power(model, chip, b.evaluation, cluster) if b.fits else {"power_w": None, "bound": None}


def check_store(store_path: str, resume: bool) -> None:
    """Refuse, before any work, an existing store without ``resume`` (nothing stored is overwritten)."""
    p = Path(store_path)
    if p.exists() and p.stat().st_size > 0 and not resume:
        raise StoreError(f"store {store_path} already exists; continue it with --resume or choose another --store")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise StoreError(f"--store {store_path}: directory {parent} does not exist; create it or pick another path")


def run_reproduce(models, store_path: str = "phaze-reproduce.db", *, resume: bool = False, workers: int = 2,
                  seed: int = 0, samples: int = SAMPLES, quiet: bool = False, spec_overrides: dict | None = None
                  ) -> ReproduceResult:
    """Every model of ``models`` (ModelConfigs) in the paper's setting (``spec_overrides`` change it, e.g.
    a smaller space in tests); rows committed per model as each finishes."""
    from phaze.search.executor import abort, cpu_time_s, make_executor

    check_store(store_path, resume)
    t0 = time.perf_counter()
    specs = [paper_spec(m, **(spec_overrides or {})) for m in models]
    for s in specs:
        s.settings(s.models[0])  # an impossible setting fails here, before any work
    setting = {k: v for k, v in specs[0].fingerprint().items() if k != "models"}
    # rows: the row set's revision (2: the TPUv4-like chip's best plan at its best HBM size); a store with
    # other rows is refused on --resume rather than mixing row sets
    fp = {"setting": setting, "seed": seed, "samples": samples, "rows": ROWS_REVISION}
    prog = Progress(quiet, prefix="phaze reproduce")
    rows, walls, resumed, cpus, counts = [], {}, [], {}, {}
    executor = None
    try:
        for k, (m, spec) in enumerate(zip(models, specs)):
            meta = Store.open(store_path, fp, resume=True, namespace="reproduce")
            try:
                done = meta.get_meta(f"rows/{m.name}")
            finally:
                meta.close()
            if done is not None:
                rows += [ReproduceRow(**r) for r in done["rows"]]
                walls[m.name] = done["wall_s"]
                cpus[m.name], counts[m.name] = done.get("cpu_s"), done.get("counts", {})
                resumed.append(m.name)
                prog.note(f"{m.name}: finished before, taken from the store ({k + 1}/{len(models)})")
                continue
            prog.note(f"{m.name}: co-search in the paper's setting ({k + 1}/{len(models)})")
            if executor is None:
                executor = make_executor("local", workers)
            t_m, c_m = time.perf_counter(), cpu_time_s(executor)
            mine, counts[m.name] = _rows_for_model(m, spec, store_path, workers, seed, samples, quiet, executor,
                                                   prog)
            walls[m.name] = time.perf_counter() - t_m
            cpus[m.name] = cpu_time_s(executor) - c_m
            meta = Store.open(store_path, fp, resume=True, namespace="reproduce")
            try:
                meta.put_meta(f"rows/{m.name}", {"rows": [asdict(r) for r in mine], "wall_s": walls[m.name],
                                                 "cpu_s": cpus[m.name], "counts": counts[m.name]})
            finally:
                meta.close()
            rows += mine
    except BaseException:  # an error, Ctrl-C or SIGTERM: stop the workers now, not after their current tasks
        if executor is not None:
            abort(executor)
            executor = None
        raise
    finally:
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        prog.close()
    return ReproduceResult(store_path, setting, tuple(rows), walls, time.perf_counter() - t0, tuple(resumed), seed,
                           samples, cpus, counts)


@dataclass(frozen=True)
class SpotlightBaseline:
    """``phaze search --baseline spotlight``: the Spotlight-style chip, its best plan and the paper's plan,
    and the TPUv4-like reference."""

    search: object  # SpotlightResult
    best: dict
    paper: dict
    reference: object  # the TPUv4-like chip under its best plan and the paper's (a ``ReferenceRow``)
    wall_time_s: float

    def to_dict(self) -> dict:
        """The JSON ``phaze search --baseline spotlight --json`` prints (the reference as the store keeps it)."""
        from phaze.jsonable import to_jsonable

        return {"search": to_jsonable(self.search), "best": self.best, "paper": self.paper,
                "reference": self.reference.to_dict(), "wall_time_s": self.wall_time_s}


def spotlight_baseline(spec: SearchSpec, *, seed: int = 0, samples: int = SAMPLES, objective: str = "latency",
                       workers: int = 2, quiet: bool = False) -> SpotlightBaseline:
    """The Spotlight-style search for the one model of ``spec`` over its space, then its chip's best plan
    (our exact placement and HBM choice) and the paper's fixed plan."""
    from phaze.errors import ConfigError
    from phaze.search.executor import abort, make_executor
    from phaze.search.spotlight import _check

    if len(spec.models) != 1:
        raise ConfigError("--baseline spotlight optimises one chip for one model's layers; give one --model")
    model = spec.models[0]
    from phaze.search.run import reference_cluster

    cands = enumerate_space(spec.space.without_network())  # chips only: it is scored on the reference's network
    _check(cands, samples, min(10, samples), objective)
    t0 = time.perf_counter()
    cluster = reference_cluster(spec, get_cluster(spec.cluster, spec.devices))
    prog = Progress(quiet, prefix="phaze search")
    executor = make_executor("local", workers)
    try:
        prog.stage(f"spotlight {model.name}", samples, "samples")
        sp = spotlight_search(model, cands, seed=seed, samples=samples, objective=objective, executor=executor,
                              on_sample=lambda n: prog.update(n))
        prog.done(f"best {sp.value:.4g} {'J s' if objective == 'edp' else 's'} per pass")
    except BaseException:  # an error, Ctrl-C or SIGTERM: stop the workers now
        abort(executor)
        raise
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
        prog.close()
    prog.note("best and paper plans of the Spotlight-style chip; the TPUv4-like reference")
    best, paper = chip_plans(model, sp.accelerator, spec, cluster, spec.hbm_gib, ScheduleCache())
    ref = references(spec, cluster)[0]
    return SpotlightBaseline(sp, best, paper, ref, time.perf_counter() - t0)
