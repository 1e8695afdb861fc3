"""The outputs of ``phaze reproduce``: the terminal table, and the same rows as Markdown, CSV and JSON
(``{"rows": [...]}``, the shape ``phaze report --reproduce`` reads)."""
from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import asdict
from pathlib import Path

from phaze.errors import ConfigError, PhazeError
from phaze.jsonable import to_jsonable
from phaze.report.tables import table

COLUMNS = ("model", "role", "plan_kind", "throughput_seq_per_s", "ratio_to_tpuv4_like", "area_mm2", "power_w",
           "hbm_gib", "chip", "plan", "iteration_time_s", "search_wall_s", "evaluated", "schedules_solved",
           "schedules_not_optimal", "bound_by", "area_split")
SUFFIXES = (".md", ".csv", ".json")


def _fmt(v, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


# how the table names each plan kind of ``phaze.search.reproduce.ReproduceRow``
KIND_LABELS = {"best": "best plan", "paper": "paper plan", "best-hbm": "best plan, best HBM"}


def display_rows(rows) -> list[list[str]]:
    """Rows as the table shows them: model, chip role and plan kind, seq/s, ratio, area, power, HBM, chip,
    plan, search time, evaluated."""
    out = []
    for r in rows:
        kind = KIND_LABELS.get(r.plan_kind, r.plan_kind)
        out.append([r.model, f"{r.role} ({kind})", f"{r.throughput_seq_per_s:,.2f}",
                    f"{r.ratio_to_tpuv4_like:.2f}x", f"{r.area_mm2:.1f}", _fmt(r.power_w, 3),
                    _fmt(r.hbm_gib), r.chip, r.plan, _fmt(r.bound_by),
                    "-" if r.search_wall_s is None else f"{r.search_wall_s:.1f} s", _fmt(r.evaluated)])
    return out


HEADERS = ["model", "chip (plan)", "seq/s", "vs TPUv4-like", "area mm^2", "power W", "HBM GiB", "chip", "plan",
           "bound by", "search wall", "evaluated"]


def reproduce_tables(result) -> list:
    t1 = table("the paper's comparison: throughput against the TPUv4-like chip under its best plan (evaluated: "
               "candidates evaluated exactly by the co-search, samples of the Spotlight-style search)", HEADERS,
               display_rows(result.rows))
    cpu = getattr(result, "model_cpu_s", {}) or {}
    walls = [(m, f"{w:.1f} s" + (" (from the store)" if m in result.resumed else ""),
              "-" if cpu.get(m) is None else f"{cpu[m]:.1f} s") for m, w in result.model_wall_s.items()]
    t2 = table("time per model (co-search + Spotlight-style search + its plans; CPU: this process and its "
               "workers)", ["model", "wall time", "CPU time"],
               walls + [("this run, in all", f"{result.wall_time_s:.1f} s", ""), ("store", result.store, "")])
    return [t1, t2]


def markdown(rows) -> str:
    align = ["---", "---", "---:", "---:", "---:", "---:", "---:", "---", "---", "---", "---:", "---:"]
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join(align) + "|"]
    for r in display_rows(rows):
        lines.append("| " + " | ".join(x.replace("|", "/") for x in r) + " |")
    return "\n".join(lines) + "\n"


def csv_text(rows) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in asdict(r).items()})
    return buf.getvalue()


def json_data(result) -> dict:
    return {"rows": [to_jsonable(r) for r in result.rows], "setting": to_jsonable(result.setting),
            "model_wall_s": result.model_wall_s, "model_cpu_s": getattr(result, "model_cpu_s", {}),
            "wall_time_s": result.wall_time_s, "store": result.store}


def check_output_prefix(prefix: str) -> None:
    """Fail before any work when PREFIX.md/.csv/.json cannot be written."""
    p = Path(prefix)
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"--out {prefix}: directory {parent} does not exist; create it or pick another prefix")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"--out {prefix}: directory {parent} is not writable; pick another prefix")


def write_outputs(result, prefix: str) -> list[str]:
    """PREFIX.md, PREFIX.csv and PREFIX.json, each written whole (a .part file renamed) or not at all."""
    check_output_prefix(prefix)
    texts = {".md": markdown(result.rows), ".csv": csv_text(result.rows),
             ".json": json.dumps(json_data(result), indent=1) + "\n"}
    out = []
    for suffix, text in texts.items():
        path = Path(prefix + suffix)
        tmp = path.with_name(path.name + ".part")
        try:
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
        except OSError as err:
            raise PhazeError(f"cannot write {path}: {err.strerror}; pick a writable --out") from None
        out.append(str(path))
    return out


def spotlight_tables(res) -> list:
    """``phaze search --baseline spotlight``: the chip found, its plans, the TPUv4-like reference, the search."""
    from phaze.hardware.accelerator import chip_text

    sp, ref = res.search, res.reference
    rt = ref.best_seq_per_s or 0.0

    def ratio(x):
        return f"{x / rt:.2f}x" if rt > 0 else "-"

    t1 = table(f"Spotlight-style chip for {sp.model} (objective: {sp.objective}, forward + backward of every layer "
               f"at microbatch {sp.microbatch_size})", ["field", "value"], [
                   ("chip", chip_text(sp.accelerator)), ("area", f"{sp.area_mm2:.1f} mm^2"),
                   ("latency of one pass over every layer", f"{sp.latency_s:.6g} s"),
                   ("energy of that pass", "-" if sp.energy_j is None else f"{sp.energy_j:.6g} J"),
                   ("samples evaluated", f"{sp.evaluated} (seed {sp.seed})"),
                   ("layer schedules solved (not proven optimal)",
                    f"{sp.schedules_solved} ({sp.schedules_not_optimal})"),
                   ("search wall time", f"{sp.wall_time_s:.1f} s"),
                   ("with its plans, in all", f"{res.wall_time_s:.1f} s")], left=True)
    rows = [("spotlight", "best", f"{res.best['throughput_seq_per_s']:,.2f}", ratio(res.best["throughput_seq_per_s"]),
             _fmt(res.best["power_w"], 3), _fmt(res.best["hbm_gib"]), res.best["plan"]),
            ("spotlight", "paper", f"{res.paper['throughput_seq_per_s']:,.2f}",
             ratio(res.paper["throughput_seq_per_s"]), _fmt(res.paper["power_w"], 3), _fmt(res.paper["hbm_gib"]),
             res.paper["plan"]),
            ("tpuv4-like", "best", f"{rt:,.2f}", ratio(rt), _fmt(ref.power_w, 3), _fmt(ref.hbm_gib),
             ref.best_plan),
            ("tpuv4-like", "paper", f"{ref.paper_seq_per_s:,.2f}", ratio(ref.paper_seq_per_s), "-",
             _fmt(ref.hbm_gib), ref.paper_plan)]
    t2 = table("throughput against the TPUv4-like chip under its best plan",
               ["chip", "plan kind", "seq/s", "vs TPUv4-like", "power W", "HBM GiB", "plan"], rows)
    return [t1, t2]
