"""The page of a reproduce run: each configuration (phaze's chip, the TPUv4-like chip, Spotlight-style search)
against the TPUv4-like chip, and against area and power when the rows have them."""
from __future__ import annotations

from phaze.errors import ConfigError
from phaze.report.html_page import Section, kv_table, note, page, table
from phaze.report.svg import BLUE, GREY, ORANGE, VERMILLION, Series, hbars, scatter

_ROLE_STYLE = {"phaze": (ORANGE, "star"), "tpuv4-like": (BLUE, "square"), "spotlight": (VERMILLION, "diamond")}


def reproduce_report_html(rows: list[dict], setting: list[tuple[str, str]] | None = None) -> str:
    if not rows:
        raise ConfigError("the reproduce result has no rows; nothing to report")
    models = list(dict.fromkeys(r.get("model", "?") for r in rows))
    cols = ["model", "role", "plan_kind", "throughput_seq_per_s", "ratio_to_tpuv4_like", "area_mm2", "power_w",
            "plan", "search_wall_s", "evaluated"]
    cols += [k for k in sorted({k for r in rows for k in r}) if k not in cols]
    answer = []
    for m in models:
        mine = [r for r in rows if r.get("model") == m]
        best = max(mine, key=lambda r: r.get("ratio_to_tpuv4_like") or 0.0)
        answer.append(f"{m}: best is <b>{best.get('role')}</b> ({best.get('plan_kind')} plan) at "
                      f"{best.get('throughput_seq_per_s', 0):.4g} seq/s, {best.get('ratio_to_tpuv4_like') or 0:.2f}x "
                      f"the TPUv4-like chip")
    bars = [(f"{r.get('model')}: {r.get('role')} ({r.get('plan_kind')})"[:40],
             [(r.get("ratio_to_tpuv4_like") or 0.0, _ROLE_STYLE.get(r.get("role"), (GREY, ""))[0],
               f"{r.get('role')} {r.get('plan_kind')}: {r.get('plan')}: {r.get('throughput_seq_per_s')} seq/s")])
            for r in rows]
    legend = [(c, role) for role, (c, _) in _ROLE_STYLE.items()]
    body = hbars(bars, title="Throughput relative to the TPUv4-like chip (its best plan = 1)",
                 xlabel="throughput / TPUv4-like best plan", label_px=300, legend_items=legend,
                 vline=(1.0, "TPUv4-like = 1"))
    figs = []
    for key, xlabel in (("area_mm2", "chip area (mm^2)"), ("power_w", "chip power (W)")):
        series = []
        for role, (color, shape) in _ROLE_STYLE.items():
            pts = tuple((float(r[key]), float(r.get("ratio_to_tpuv4_like") or 0.0),
                         f"{r.get('model')}, {role} ({r.get('plan_kind')}): {key} {r[key]:.4g}, "
                         f"ratio {r.get('ratio_to_tpuv4_like') or 0:.3g}; {r.get('plan')}")
                        for r in rows if r.get("role") == role and r.get(key) is not None)
            series.append(Series(role, pts, color, shape, 5))
        if any(s.points for s in series):
            figs.append(scatter(series, title=f"Throughput ratio against {xlabel.split(' (')[0]}", xlabel=xlabel,
                                ylabel="throughput / TPUv4-like best"))
        elif key == "power_w":
            figs.append(note("No row has a power figure (power_w), so there is no chart against power."))
    sections = [Section("answer", "The answer", '<div class="answer">' + "<br>".join(answer) + "</div>")]
    if setting:
        sections.append(Section("assumptions", "Assumptions", kv_table(setting)))
    sections += [Section("versus", "Every configuration against the TPUv4-like chip", body + "".join(figs)),
                 Section("rows", "All rows", table(cols, [[r.get(c) for c in cols] for r in rows]))]
    return page("phaze reproduce: the paper's comparison", ", ".join(models), sections)
