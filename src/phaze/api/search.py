"""The public API's search-stage calls: the co-search, the Spotlight-style baseline, the paper's comparison
(reproduce), a store's results and what a search assumes. A search's setting is the fields of ``SearchSpec``
(devices, global_batch, microbatch_sizes, tp_values, hbm_gib, recompute_modes, cluster, pareto, objective,
tdp_w) and the plan space (``plan_space``: "full" or "paper"), given by name and checked once in ``search_spec``."""
from __future__ import annotations

from phaze.api.resolve import check_html_path, check_ranges, resolve_model, with_seq
from phaze.errors import ConfigError, PhazeError, StoreError
from phaze.workload.config import ModelConfig


# the SearchSpec fields a caller may set by name (the rest is derived)
SETTING_FIELDS = ("devices", "global_batch", "microbatch_sizes", "tp_values", "hbm_gib", "recompute_modes", "cluster",
                  "pareto", "objective", "tdp_w")


def reference_tdp_w(space) -> float | None:
    """The default power cap of a co-search (issue 34): the reference chip's (TPUv4-like) peak power under the
    space's power model, so a winner is not credited with power the reference does not draw; None (no cap) for
    the paper's template, which has no power model."""
    import math

    from phaze.hardware.power import peak_power_w

    if space.template != "chip":
        return None
    p = float(peak_power_w(space.reference))
    if space.reference_network is not None:  # its network's PHY too (issue 34 item 5)
        from phaze.hardware.chip_network import network_power_w
        p += float(network_power_w(space.reference_network))
    return p if math.isfinite(p) else None


def search_spec(models, space: str = "default", budget_mm2: float | None = None, seq_len: int | None = None,
                plan_space: str | None = None, **setting):
    """The SearchSpec ``search`` runs (every input checked; no work done). ``setting``: ``SETTING_FIELDS`` by
    name (defaults: ``SearchSpec``'s, the paper's setting). ``seq_len``: every model's training sequence length
    replaced by it (default: each model's own). ``plan_space``: "full" (what ``plan`` searches on GPUs, where a
    designed chip can run it: ``phaze.search.spec.CHIP_RUNTIME``) or "paper" (``PAPER_PLAN_SPACE``); default:
    the paper's for ``space="paper"``, else full. ``recompute_modes`` None: the plan space's default (every
    mode in the full space, none/full in the paper's)."""
    from phaze.errors import InfeasibleError
    from phaze.hardware.presets import get_cluster
    from phaze.hardware.space import enumerate_space, resolve_space
    from phaze.search import SearchSpec
    from phaze.search.spec import PLAN_SPACES, default_plan_space

    check_ranges(seq=seq_len)
    unknown = sorted(set(setting) - set(SETTING_FIELDS))
    if unknown:
        raise ConfigError(f"search: unknown setting {', '.join(unknown)}; use {', '.join(SETTING_FIELDS)}")
    setting = {k: v for k, v in setting.items() if v is not None or k in ("tdp_w", "tp_values")}
    tdp = setting.pop("tdp_w", "reference")
    for k in ("microbatch_sizes", "hbm_gib", "recompute_modes", "tp_values"):
        if setting.get(k) is not None:
            setting[k] = tuple(setting[k])
    check_ranges(budget_mm2=budget_mm2, devices=setting.get("devices"), global_batch=setting.get("global_batch"))
    ds = resolve_space(space, budget_mm2)
    if plan_space is not None and plan_space not in PLAN_SPACES:
        raise ConfigError(f"--plan-space: unknown plan space {plan_space!r}; use {' or '.join(PLAN_SPACES)}")
    spec = SearchSpec(models=tuple(with_seq(resolve_model(m), seq_len) for m in models), space=ds,
                      space_name=str(space), tdp_w=reference_tdp_w(ds) if tdp == "reference" else tdp,
                      plan_space_name=plan_space or default_plan_space(ds), **setting)
    get_cluster(spec.cluster, spec.devices)  # an unknown cluster fails here, before any work
    cands = enumerate_space(ds)
    if len(cands) == 0:
        raise InfeasibleError(f"the design space has no chip with {ds.min_fraction:g} x budget <= area <= budget "
                              f"({ds.min_fraction * cands.budget_mm2:.2f} to {cands.budget_mm2:.2f} mm^2); "
                              f"raise --budget-mm2 (see `phaze arch`)")
    for m in spec.models:
        spec.settings(m)  # a model with no valid (microbatch, tp) fails here, before any work
    return spec


def search(models, store: str = "phaze-results.db", space: str = "default", budget_mm2: float | None = None, *,
           workers: int = 2, backend: str = "local", address: str | None = None, resume: bool = False,
           prune: bool = True, quiet: bool = False, **setting):
    """Co-search chips of ``space`` (under ``budget_mm2``) and their best plans for ``models`` (``setting``:
    ``SETTING_FIELDS`` by name). With ``pareto`` the Pareto front of score against area is exact over the
    whole space (slower); otherwise it is the front among the exactly evaluated candidates."""
    from phaze.search import run_search

    check_ranges(workers=workers)
    spec = search_spec(models, space, budget_mm2, **setting)
    return run_search(spec, store, workers=workers, backend=backend, address=address, resume=resume,
                      prune=prune, quiet=quiet)


def _check_seed(seed: int) -> None:
    check_ranges(seed=seed)


def spotlight(model, space: str = "default", budget_mm2: float | None = None, *, seed: int = 0, samples: int = 100,
              objective: str = "latency", workers: int = 2, quiet: bool = False, **setting):
    """The Spotlight-style baseline for one model: Bayesian optimisation of one chip of ``space`` for the
    forward + backward latency of the model's layers (``phaze.search.spotlight``), then that chip's best plan
    and the paper's fixed plan in the given setting (``setting``: ``SETTING_FIELDS`` by name; a
    ``SpotlightBaseline``)."""
    from phaze.search.reproduce import spotlight_baseline

    models = [model] if isinstance(model, (str, ModelConfig)) else list(model)
    spec = search_spec(models, space, budget_mm2, **setting)
    _check_seed(seed)
    check_ranges(samples=samples, workers=workers)
    return spotlight_baseline(spec, seed=seed, samples=samples, objective=objective, workers=workers, quiet=quiet)


def reproduce(models=None, store: str = "phaze-reproduce.db", resume: bool = False, workers: int = 2, seed: int = 0,
              samples: int = 100, quiet: bool = False, out: str | None = None, html: str | None = None,
              space: str = "default", budget_mm2: float | None = None, seq_len: int | None = None, **setting):
    """The paper's comparison: for each model (default: the paper's 8), in the paper's setting, the co-search
    winner, the TPUv4-like chip and the Spotlight-style chip, each under its best plan and (the two fixed
    chips) the paper's plan. Resumable from ``store``; writes OUT.md/.csv/.json and ``html`` when given.
    ``setting``: SearchSpec fields to change (devices, global_batch, hbm_gib, microbatch_sizes, ...); ``seq_len``:
    every model's training sequence length replaced by it (default: each model's own)."""
    from phaze.hardware.space import resolve_space
    from phaze.report.reproduce import check_output_prefix, write_outputs
    from phaze.search.reproduce import PAPER_MODELS, run_reproduce

    names = list(models) if models else list(PAPER_MODELS)
    if len(set(map(str, names))) != len(names):
        raise ConfigError(f"--models lists a model twice: {', '.join(map(str, names))}")
    _check_seed(seed)
    check_ranges(samples=samples, workers=workers)
    check_ranges(seq=seq_len)
    resolved = [with_seq(resolve_model(m), seq_len) for m in names]
    if out:
        check_output_prefix(out)
    check_html_path(html)
    overrides = dict(setting)
    ds = resolve_space(space, budget_mm2)
    if space != "default" or budget_mm2 is not None:
        overrides.update(space=ds, space_name=str(space))
    res = run_reproduce(resolved, store, resume=resume, workers=workers, seed=seed, samples=samples, quiet=quiet,
                        spec_overrides=overrides)
    written = write_outputs(res, out) if out else []
    if html:
        from phaze.jsonable import to_jsonable
        from phaze.report.html import write_reproduce_report
        from phaze.report.setting import search_setting as setting_rows

        rows = setting_rows({**res.setting, "models": [to_jsonable(m) for m in resolved]})
        rows.append(("Spotlight-style search", f"{res.samples} samples (10 random warm-up, then rounds ranking 1,000 "
                                               f"random chips by mean - std of a Gaussian process and evaluating "
                                               f"the best 10), seed {res.seed}; objective: forward + backward "
                                               f"latency of every layer on one chip at microbatch 1"))
        written.append(write_reproduce_report([to_jsonable(r) for r in res.rows], html, rows))
    return res, written


def results(store: str, top: int | None = 10, model: str | None = None) -> list:
    """The best ``top`` exactly evaluated candidates of a search store (``ChipRow``s; ``to_dict()`` is the
    stored row): the joint ranking, or with ``model`` (a multi-model search's model name) that model's own
    ranking. A row with a missing or wrong-typed field is a StoreError."""
    from phaze.search import Store
    from phaze.search.results import chip_rows

    check_ranges(top=top)
    s = Store.open_existing(store)
    try:
        if model is None:
            return list(chip_rows(s.rows(top=top)))
        names = [m["name"] for m in s.fingerprint().get("models", [])]
        if model not in names:
            raise ConfigError(f"--model {model!r} is not in this store's search (models: {', '.join(names)})")
        if len(names) == 1:
            return list(chip_rows(s.rows(top=top)))
        return list(chip_rows(s.scoped(names.index(model), create=False).rows(top=top)))
    finally:
        s.close()


def search_setting(spec) -> list[tuple[str, str]]:
    """What a search assumes, as (field, value) rows (model, devices, batch, cluster tiers, space axes and
    size, budget, plan space, score)."""
    from phaze.report.setting import search_setting as rows
    return rows(spec.fingerprint())


def load_search(store: str):
    """A finished (or interrupted) search rebuilt from its store as a SearchResult (wall time 0: unknown); the
    stored dicts become typed rows here (``phaze.search.results``), a damaged one a StoreError."""
    from dataclasses import replace

    from phaze.search import Store
    from phaze.search.details import stored_candidates
    from phaze.search.results import ChipRow, SearchResult, chip_rows, reference_rows
    from phaze.search.run import pareto_front

    s = Store.open_existing(store)
    try:
        spec = s.fingerprint()
        refs = s.get_meta("references")
        if not spec or refs is None:
            raise ConfigError(f"store {store} holds no finished reference evaluation yet; run or --resume the search")
        refs = reference_rows(refs, f"store {store}: reference")
        reals = reference_rows(s.get_meta("real_references") or [], f"store {store}: TPU v4 reference")
        rows = chip_rows(s.rows(status="exact"), f"store {store}: row")
        statuses = [r.status for r in s.load().values()]
        cands = stored_candidates(spec)
        n_chips = len(cands)
        total = n_chips * len(spec["hbm_gib"])
        counts = {"candidates": total, "chips": n_chips, "hbm_sizes": len(spec["hbm_gib"])}
        for st in ("exact", "bounded", "infeasible"):
            counts[st] = statuses.count(st)
        counts["pruned"] = total - counts["exact"] - counts["bounded"] - counts["infeasible"]
        per_model = []
        if len(spec["models"]) > 1:
            for k, m in enumerate(spec["models"]):
                try:
                    top = s.scoped(k, create=False).rows(top=1)
                except PhazeError:
                    top = []
                if top:
                    per_model.append(replace(ChipRow.from_dict(top[0], f"store {store}: row"), model=m["name"]))
        best, front = (rows[0] if rows else None), pareto_front(rows)
        explained = s.get_meta("explained")  # the finished search's rows with power and bounds
        if explained and best is not None:
            where = f"store {store}: explained"
            if not isinstance(explained, dict) or not all(k in explained for k in ("best", "pareto", "per_model")):
                raise StoreError(f"{where} rows are damaged; rerun the search into a new --store")
            e_best = ChipRow.from_dict(explained["best"], f"{where} best")
            if e_best.chip == best.chip:
                best, front = e_best, chip_rows(explained["pareto"], f"{where} Pareto row")
                per_model = chip_rows(explained["per_model"], f"{where} per-model row")
        why = {k: s.get_meta(k) or {} for k in ("wins_because", "tco", "fronts")} if explained else {}
    finally:
        s.close()
    nets = {}
    if cands.networks:
        from phaze.hardware.space import stored_design_space
        nets = {"network": cands.network(best.chip).to_dict() if best is not None else None,
                "reference_network": stored_design_space(spec["space"]).reference_network.to_dict()}
    return SearchResult(store, spec, counts, best, refs, tuple(front), 0.0, tuple(per_model),
                        real_references=reals, **why, **nets)


def exact_rows(store: str) -> list:
    """Every exactly evaluated candidate of a store, best first (``ChipRow``s)."""
    from phaze.search import Store
    from phaze.search.results import chip_rows

    s = Store.open_existing(store)
    try:
        return list(chip_rows(s.rows(status="exact"), f"store {store}: row"))
    finally:
        s.close()


def search_report(result, path: str) -> str:
    """Write the HTML report of a co-search result; returns the path. The winner's plan details (its plans
    evaluated again, its block's schedules) are computed here by the search stage; the report formats them."""
    from phaze.report.html import write_search_report
    from phaze.search.details import search_details

    return write_search_report(result, path, exact_rows(result.store), search_details(result.spec, result.best))


def check_export_path(path: str | None) -> None:
    """Fail before any work when the winner's chip file cannot be written where asked (.json or .yaml)."""
    if not path:
        return
    from pathlib import Path

    p = Path(path)
    if p.suffix.lower() not in (".json", ".yaml", ".yml"):
        raise ConfigError(f"--export-chip {path}: name a .json or .yaml file (a chip file, docs/chip-file.md)")
    if not p.parent.exists() or not p.parent.is_dir():
        raise ConfigError(f"--export-chip {path}: the folder {p.parent} does not exist; create it or pick another path")
    if p.exists() and p.is_dir():
        raise ConfigError(f"--export-chip {path} is a folder; name a file")


def export_chip(result, path: str) -> str:
    """Write a co-search's winning chip (its HBM size set) as a chip file that ``--accelerator FILE`` takes
    (``evaluate``, ``plan``, ``estimate``, ``schedule``), with its own network (``network``: the result's, when
    the space has a network axis; their default cluster): evaluating its stored plan on that file gives the
    throughput the search reported. Written whole or not at all; returns the path."""
    import json
    import os
    from dataclasses import asdict
    from pathlib import Path

    from phaze.search.details import winner_chip

    check_export_path(path)
    if result.best is None:
        raise ConfigError("--export-chip: the search found no chip to export (no candidate fits)")
    acc = winner_chip(result.spec, result.best)
    fields = asdict(acc)
    fields["name"] = Path(path).stem
    if result.network:  # its own network (issue 34 item 5): evaluate/plan --accelerator FILE run on it by default
        from phaze.hardware.chip_network import ChipNetwork, file_fields
        n = result.network
        fields["network"] = file_fields(ChipNetwork(int(n["scale_up_chips"]), float(n["scale_up_Bps"]), n["topology"],
                                                    float(n["scale_out_Bps"])))
    if Path(path).suffix.lower() == ".json":
        text = json.dumps(fields, indent=1) + "\n"
    else:
        import yaml
        text = yaml.safe_dump(fields, sort_keys=False)
    tmp = f"{path}.part"
    try:
        Path(tmp).write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"--export-chip {path}: cannot write it ({exc.strerror}); pick a writable path") from None
    return path
