"""The search report's explanation sections: why the winner wins (``wins_because``), the cost of ownership of the
winner and the references (``tco``) and the Pareto fronts against area, peak power and cost (``fronts``)."""
from __future__ import annotations

from phaze.report.html_page import note, table, times
from phaze.report.svg import BLUE, ORANGE, VERMILLION, Series, scatter
from phaze.report.why import AXIS_LABELS, changed_text, order_text


def why_html(res) -> str:
    if not res.wins_because:
        return note("No decomposition: the search found no winner, or the reference has no plan for every model.")
    first = next(iter(res.wins_because.values()))
    out = note("The reference chip is changed into the winner one resource at a time, in this order: "
               f"{order_text(first)}. Each intermediate chip is evaluated with the search's own machinery (its best "
               "plan searched again in the search's plan space), not interpolated; the steps multiply to the "
               "winner's throughput ratio (several models: its throughput score, the mean ratio). A step measures "
               "its resource with every earlier one already the winner's, so another order would split the gain "
               "differently. Intermediate chips may be over the area budget or the power cap: they are "
               "counterfactuals, not candidates.")
    for name, steps in res.wins_because.items():
        total = steps[-1]["cumulative"] if steps else 1.0
        out += f"<h3>Against {name}: {total:.3f}x</h3>"
        out += table(["step", "resource", "changed", "speedup", "cumulative", "seq/s after", "area mm^2", "peak W",
                      "note"],
                     [[i + 1, s["resource"], changed_text(s["changed"]), times(s["speedup"]), times(s["cumulative"]),
                       ", ".join(f"{t:.4g}" for t in s["seq_per_s"]), round(s["area_mm2"], 1),
                       round(s["peak_power_w"]) if s["peak_power_w"] is not None else None, s["note"]]
                      for i, s in enumerate(steps)],
                     {i for i, s in enumerate(steps) if abs(s["speedup"] - 1.0) > 1e-3})
    return out


def tco_html(res) -> str:
    if not res.tco:
        return note("No cost figure: the paper's template has no power model (drop --space paper).")
    rows = [[name, round(t["area_mm2"], 1), round(t["die_usd"]), round(t["hbm_usd"]), round(t["package_usd"]),
             round(t["network_usd"]), round(t["power_w"], 1), round(t["energy_usd"]), round(t["total_usd"]),
             round(t["tco_at_peak_usd"])] for name, t in res.tco.items()]
    return (note("US dollars per chip over its service life (docs/cost-model.md has every formula and source): the "
                 "die from a 300 mm wafer's price over its good dies (Murphy's yield), HBM per GB, package and "
                 "assembly, network (each chip's own switch ports, optics and cables per GB/s, docs/network-axis.md; on the paper's space: the shared cluster, not priced), energy at the "
                 "average power of the best plan x years x $/kWh x PUE. 'TCO at peak' prices the energy at peak "
                 "power: a chip-only figure, what --objective perf-per-dollar divides by.")
            + table(["chip", "area mm^2", "die $", "HBM $", "package $", "network $", "average W", "energy $",
                     "TCO $", "TCO at peak $"], rows, {0}))


def fronts_html(res) -> str:
    """One chart per axis: the front's chips, the winner and the reference (throughput 1 x)."""
    fr = res.fronts or {}
    if not fr:
        return ""
    ref = _reference_point(res)
    best = (res.best.chip, res.best.hbm_gib) if res.best else None
    out = note("Throughput (x the TPUv4-like chip's under its best plan) against area, peak power and TCO at peak "
               "power, among the exactly evaluated chips: each front holds the chips no other beats in both.")
    for key, label in AXIS_LABELS.items():
        pts = fr.get(key) or []
        if not pts:
            continue

        def tip(p, key=key) -> str:
            return (f"chip {p['chip']}, HBM {p['hbm_gib']} GiB: {p['throughput_x']:.4g}x, area {p['area_mm2']:.1f} "
                    f"mm^2, peak {p['peak_power_w'] or 0:.0f} W, TCO at peak ${p['tco_usd'] or 0:,.0f}")
        series = [Series("Pareto front", tuple((p[key], p["throughput_x"], tip(p)) for p in pts), BLUE, "circle",
                         3.5, line=True)]
        win = [p for p in pts if (p["chip"], p["hbm_gib"]) == best]
        if win:
            series.append(Series("winner", ((win[0][key], win[0]["throughput_x"], tip(win[0])),), ORANGE, "star", 6))
        if ref.get(key) is not None:
            series.append(Series("TPUv4-like chip", ((ref[key], 1.0, f"TPUv4-like: {label} {ref[key]:.4g}"),),
                                 VERMILLION, "square", 5))
        out += scatter(series, title=f"Throughput against {label}", xlabel=label,
                       ylabel="throughput (x TPUv4-like best plan)")
    return out


def _reference_point(res) -> dict:
    if not res.references:
        return {}
    r = res.references[0]
    t = (res.tco or {}).get(r.chip_name) or {}
    return {"area_mm2": r.area_mm2, "peak_power_w": r.peak_power_w, "tco_usd": t.get("tco_at_peak_usd")}
