"""The public API's search-stage calls: the co-search, the Spotlight-style baseline, the paper's comparison
(reproduce) and a store's results. Re-exported by ``phaze.api``, so the CLI calls only it."""
from __future__ import annotations

from phaze.api import check_ranges, resolve_model
from phaze.api_report import check_html_path
from phaze.errors import ConfigError
from phaze.workload.config import ModelConfig


def search_spec(models, space: str = "default", budget_mm2: float | None = None, devices: int = 1024,
                global_batch: int = 4096, microbatch_sizes=(1, 2, 4, 8), tp_values=None, hbm_gib=(32, 64, 80),
                recompute_modes=("none", "full"), cluster: str = "flat-4gib", pareto: bool = False,
                objective: str = "throughput", tdp_w: float | None = None):
    """The SearchSpec ``search`` runs (every input checked; no work done)."""
    from phaze.hardware.presets import get_cluster
    from phaze.hardware.space import resolve_space
    from phaze.search import SearchSpec

    from phaze.errors import InfeasibleError
    from phaze.hardware.space import enumerate_space

    check_ranges(budget_mm2=budget_mm2, devices=devices, global_batch=global_batch)
    ds = resolve_space(space, budget_mm2)
    get_cluster(cluster, devices)  # an unknown cluster fails here, before any work
    cands = enumerate_space(ds)
    if len(cands) == 0:
        raise InfeasibleError(f"the design space has no chip with {ds.min_fraction:g} x budget <= area <= budget "
                              f"({ds.min_fraction * cands.budget_mm2:.2f} to {cands.budget_mm2:.2f} mm^2); "
                              f"raise --budget-mm2 (see `phaze arch`)")
    spec = SearchSpec(models=tuple(resolve_model(m) for m in models), space=ds, space_name=str(space),
                      hbm_gib=tuple(hbm_gib), microbatch_sizes=tuple(microbatch_sizes),
                      tp_values=tuple(tp_values) if tp_values else None, recompute_modes=tuple(recompute_modes),
                      cluster=cluster, devices=devices, global_batch=global_batch, pareto=pareto,
                      objective=objective, tdp_w=tdp_w)
    for m in spec.models:
        spec.settings(m)  # a model with no valid (microbatch, tp) fails here, before any work
    return spec


def search(models, space: str = "default", budget_mm2: float | None = None, devices: int = 1024,
           global_batch: int = 4096, microbatch_sizes=(1, 2, 4, 8), tp_values=None, hbm_gib=(32, 64, 80),
           recompute_modes=("none", "full"), cluster: str = "flat-4gib", store: str = "phaze-results.db",
           workers: int = 2, backend: str = "local", address: str | None = None, resume: bool = False,
           prune: bool = True, quiet: bool = False, pareto: bool = False, objective: str = "throughput",
           tdp_w: float | None = None):
    """Co-search chips of ``space`` (under ``budget_mm2``) and their best plans for ``models``. With
    ``pareto`` the Pareto front of score against area is exact over the whole space (slower); otherwise
    it is the front among the exactly evaluated candidates."""
    from phaze.search import run_search

    check_ranges(workers=workers)
    spec = search_spec(models, space, budget_mm2, devices, global_batch, microbatch_sizes, tp_values, hbm_gib,
                       recompute_modes, cluster, pareto, objective, tdp_w)
    return run_search(spec, store, workers=workers, backend=backend, address=address, resume=resume,
                      prune=prune, quiet=quiet)


def _check_seed(seed: int) -> None:
    check_ranges(seed=seed)


def spotlight(model, space: str = "default", budget_mm2: float | None = None, devices: int = 1024,
              global_batch: int = 4096, microbatch_sizes=(1, 2, 4, 8), tp_values=None, hbm_gib=(32, 64, 80),
              recompute_modes=("none", "full"), cluster: str = "flat-4gib", seed: int = 0, samples: int = 100,
              objective: str = "latency", workers: int = 2, quiet: bool = False):
    """The Spotlight-style baseline for one model: Bayesian optimisation of one chip of ``space`` for the
    forward + backward latency of the model's layers (``phaze.search.spotlight``), then that chip's best plan
    and the paper's fixed plan in the given setting (a ``SpotlightBaseline``)."""
    from phaze.search.reproduce import spotlight_baseline

    models = [model] if isinstance(model, (str, ModelConfig)) else list(model)
    spec = search_spec(models, space, budget_mm2, devices, global_batch, microbatch_sizes, tp_values, hbm_gib,
                       recompute_modes, cluster)
    _check_seed(seed)
    check_ranges(samples=samples, workers=workers)
    return spotlight_baseline(spec, seed=seed, samples=samples, objective=objective, workers=workers, quiet=quiet)


def reproduce(models=None, store: str = "phaze-reproduce.db", resume: bool = False, workers: int = 2, seed: int = 0,
              samples: int = 100, quiet: bool = False, out: str | None = None, html: str | None = None,
              space: str = "default", budget_mm2: float | None = None, **setting):
    """The paper's comparison: for each model (default: the paper's 8), in the paper's setting, the co-search
    winner, the TPUv4-like chip and the Spotlight-style chip, each under its best plan and (the two fixed
    chips) the paper's plan. Resumable from ``store``; writes OUT.md/.csv/.json and ``html`` when given.
    ``setting``: SearchSpec fields to change (devices, global_batch, hbm_gib, microbatch_sizes, ...)."""
    from phaze.hardware.space import resolve_space
    from phaze.report.reproduce import check_output_prefix, write_outputs
    from phaze.search.reproduce import PAPER_MODELS, run_reproduce

    names = list(models) if models else list(PAPER_MODELS)
    if len(set(map(str, names))) != len(names):
        raise ConfigError(f"--models lists a model twice: {', '.join(map(str, names))}")
    _check_seed(seed)
    check_ranges(samples=samples, workers=workers)
    resolved = [resolve_model(m) for m in names]
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
        from phaze.report.html import write_reproduce_report
        from phaze.jsonable import to_jsonable
        from phaze.report.setting import search_setting as setting_rows

        rows = setting_rows({**res.setting, "models": [to_jsonable(m) for m in resolved]})
        rows.append(("Spotlight-style search", f"{res.samples} samples (10 random warm-up, then rounds ranking 1,000 "
                                               f"random chips by mean - std of a Gaussian process and evaluating "
                                               f"the best 10), seed {res.seed}; objective: forward + backward "
                                               f"latency of every layer on one chip at microbatch 1"))
        written.append(write_reproduce_report([to_jsonable(r) for r in res.rows], html, rows))
    return res, written


def results(store: str, top: int | None = 10, model: str | None = None) -> list[dict]:
    """The best ``top`` exactly evaluated candidates of a search store: the joint ranking, or with ``model``
    (a multi-model search's model name) that model's own ranking."""
    from phaze.search import Store

    check_ranges(top=top)
    s = Store.open_existing(store)
    try:
        if model is None:
            return s.rows(top=top)
        names = [m["name"] for m in s.fingerprint().get("models", [])]
        if model not in names:
            raise ConfigError(f"--model {model!r} is not in this store's search (models: {', '.join(names)})")
        if len(names) == 1:
            return s.rows(top=top)
        return s.scoped(names.index(model), create=False).rows(top=top)
    finally:
        s.close()
