"""The public API's report calls: what a search or plan assumes, and the HTML reports of a search (live or
from its store), a plan and a reproduce run. Re-exported by ``phaze.api``."""
from __future__ import annotations

from phaze.api import check_ranges, resolve_accelerator, resolve_cluster, resolve_model
from phaze.errors import ConfigError, PhazeError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE, DEFAULT_TP_OVERLAP_CONFIG, ModelConfig


def search_setting(spec) -> list[tuple[str, str]]:
    """What a search assumes, as (field, value) rows (model, devices, batch, cluster tiers, space axes and
    size, budget, plan space, score)."""
    from phaze.report.setting import search_setting as rows
    return rows(spec.fingerprint())


def load_search(store: str):
    """A finished (or interrupted) search rebuilt from its store as a SearchResult (wall time 0: unknown)."""
    from phaze.hardware.space import DesignSpace, enumerate_space
    from phaze.search import Store
    from phaze.search.run import SearchResult, pareto_front

    s = Store.open_existing(store)
    try:
        spec = s.fingerprint()
        refs = s.get_meta("references")
        if not spec or refs is None:
            raise ConfigError(f"store {store} holds no finished reference evaluation yet; run or --resume the search")
        rows = s.rows(status="exact")
        statuses = [r.status for r in s.load().values()]
        known = {f for f in DesignSpace.__dataclass_fields__}
        from phaze.search.objective import apply_tdp
        n_chips = len(apply_tdp(enumerate_space(DesignSpace(**{k: v for k, v in spec["space"].items() if k in known})),
                                spec.get("tdp_w")))
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
                    per_model.append({"model": m["name"], **top[0]})
        best, front = (rows[0] if rows else None), pareto_front(rows)
        explained = s.get_meta("explained")  # the finished search's rows with power and bounds
        if explained and best is not None and explained["best"]["chip"] == best["chip"]:
            best, front, per_model = explained["best"], explained["pareto"], explained["per_model"]
    finally:
        s.close()
    return SearchResult(store, spec, counts, best, refs, front, 0.0, per_model)


def exact_rows(store: str) -> list[dict]:
    """Every exactly evaluated candidate of a store, best first."""
    from phaze.search import Store

    s = Store.open_existing(store)
    try:
        return s.rows(status="exact")
    finally:
        s.close()


def check_html_path(path: str | None, option: str = "--html") -> None:
    """Fail before work when an HTML report cannot be written where asked."""
    if path:
        from phaze.report.html import check_output_path
        check_output_path(path, option)


def search_report(result, path: str) -> str:
    """Write the HTML report of a co-search result; returns the path."""
    from phaze.report.html import write_search_report
    return write_search_report(result, path, exact_rows(result.store))


def plan_setting(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
                 cluster=None, microbatch_sizes=None, recompute_modes=None,
                 seq_len: int | None = None, attention: str = "flash", precision: str = "bf16",
                 tp_overlap: bool = False, dp_overlap: bool = False,
                 memory_reserve_gib: float | None = None,
                 tp_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG,
                 grad_dtype: str = DEFAULT_GRAD_DTYPE,
                 optimizer_state: str = DEFAULT_OPTIMIZER_STATE,
                 deterministic: bool = False, grad_accum_fusion: bool = True) -> list[tuple[str, str]]:
    """What ``plan`` assumes, as (field, value) rows."""
    from phaze.api_plan import _check_deterministic, _check_flag, _runtime, check_tp_overlap_config
    from phaze.report.setting import plan_setting as rows

    check_ranges(devices=devices, global_batch=global_batch, seq=seq_len)
    reserve = _runtime(attention, precision, memory_reserve_gib, grad_dtype, optimizer_state)
    check_tp_overlap_config(tp_overlap_config)
    _check_deterministic(deterministic, tp_overlap)
    _check_flag("grad_accum_fusion", grad_accum_fusion)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    runtime = dict(attention=attention, precision=precision, tp_overlap=tp_overlap, dp_overlap=dp_overlap,
                   tp_overlap_config=tp_overlap_config, grad_dtype=grad_dtype, optimizer_state=optimizer_state,
                   deterministic=deterministic, grad_accum_fusion=grad_accum_fusion,
                   memory_reserve_bytes=reserve, usable_bytes=acc.hbm_bytes - reserve)
    return rows(m, acc, resolve_cluster(cluster, acc, devices), devices, global_batch, seq_len, microbatch_sizes,
                recompute_modes, runtime)


def plan_report(result, path: str, model: str | ModelConfig, accelerator: str | Accelerator, devices: int,
                global_batch: int, cluster=None, microbatch_sizes=None, recompute_modes=None,
                seq_len: int | None = None, **runtime) -> str:
    """Write the HTML report of a ``plan`` result; returns the path. ``runtime``: the runtime features the
    plan was searched with (``plan``'s attention, precision, tp_overlap, dp_overlap, memory_reserve_gib,
    tp_overlap_config, grad_dtype, optimizer_state, deterministic, grad_accum_fusion)."""
    from phaze.report.html import write_plan_report

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    setting = plan_setting(m, acc, devices, global_batch, cluster, microbatch_sizes, recompute_modes, seq_len,
                           **runtime)
    return write_plan_report(result, path, model=m, accelerator=acc, cluster=resolve_cluster(cluster, acc, devices),
                             global_batch=global_batch, devices=devices, setting=setting)


def load_reproduce_rows(path: str) -> list[dict]:
    """The rows of a ``phaze reproduce`` JSON file ({"rows": [...]}, or a bare list)."""
    from phaze.fileio import read_data_file

    data = read_data_file(path, "reproduce file", fmt="json")
    rows = data.get("rows") if isinstance(data, dict) else data
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{path}: expected {{\"rows\": [{{...}}, ...]}} as `phaze reproduce` writes it")
    for i, r in enumerate(rows):
        for key in ("model", "role", "throughput_seq_per_s"):
            if key not in r:
                raise ConfigError(f"{path}: row {i} has no field {key!r}")
    return rows


def report(html: str, store: str | None = None, reproduce: str | None = None) -> str:
    """Write one self-contained HTML report from a search store or a reproduce JSON; returns the path."""
    from phaze.report.html import write_reproduce_report

    if (store is None) == (reproduce is None):
        raise ConfigError("give exactly one of --store (a search store) or --reproduce (a reproduce JSON)")
    check_html_path(html)
    if reproduce is not None:
        return write_reproduce_report(load_reproduce_rows(reproduce), html)
    return search_report(load_search(store), html)
