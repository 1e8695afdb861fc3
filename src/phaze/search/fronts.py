"""Pareto fronts of throughput against area, peak power and cost over a search's exactly evaluated chips, and the
TCO breakdown of the winner and the references (``phaze.hardware.cost``).

A chip's throughput here is the throughput score whatever the objective: the mean over models of its
throughput / the TPUv4-like chip's under its best plan ("x reference"). Area, peak power and TCO at peak power
are chip-only figures (the TCO with the candidate's HBM size); a chip is on the front of an axis when no other
chip has at least its throughput at no more of that axis, and is strictly better in one of the two (of chips
equal in both, the one with the smaller HBM, then the lower chip number, stands for them).
"""
from __future__ import annotations

import numpy as np

from phaze.units import GiB

# (key, label) of each axis a front is drawn against (smaller is better)
AXES = (("area_mm2", "area (mm^2)"), ("peak_power_w", "peak power (W)"),
        ("tco_usd", "TCO at peak power (USD)"))


def front_2d(xs: list[float], ys: list[float]) -> list[int]:
    """Indices of the points (x, y) on the front, in order of x: a point is off it when another has x no larger
    and y no smaller with one of them strictly better, or is equal in both and comes first (of points equal in
    both, the first is kept: callers list candidates by HBM size, then chip number). Sort by x, then keep a
    point when it is its x-group's first point of the group's largest y and that y beats every smaller x's."""
    order = sorted(range(len(xs)), key=lambda i: (xs[i], -ys[i], i))
    out, best_before = [], -np.inf
    k = 0
    while k < len(order):
        n = 1
        while k + n < len(order) and xs[order[k + n]] == xs[order[k]]:
            n += 1
        first = order[k]  # the group's largest y, first in the callers' order among equals
        if ys[first] > best_before:
            out.append(first)
            best_before = ys[first]
        k += n
    return out


def point_rows(rows, references, cands) -> list[dict]:
    """One dict per exactly evaluated row (``ChipRow``): chip, hbm_gib, throughput_x (score against the
    references' best plans), seq_per_s (per model), area_mm2, peak_power_w and tco_usd (TCO at peak power)."""
    from phaze.hardware.cost import tco_parts

    if not rows:
        return []
    rows = sorted(rows, key=lambda r: (r.hbm_gib, r.chip))  # the order ties are kept in (front_2d)
    idx = np.asarray([r.chip for r in rows])
    sub = cands.select(idx)  # with a network axis: each chip's network PHY power and price
    peak = sub.peak_power_w()
    tco = np.asarray(tco_parts(np.asarray([r.area_mm2 for r in rows], np.float64),
                               np.asarray([r.hbm_gib * GiB for r in rows], np.float64), peak,
                               sub.network_usd())["total_usd"])
    out = []
    for i, r in enumerate(rows):
        tputs = [o.throughput_seq_per_s for o in r.outcomes]
        x = float(np.mean([t / ref.best_seq_per_s for t, ref in zip(tputs, references)])) if all(
            ref.best_seq_per_s for ref in references) else float("nan")
        out.append({"chip": r.chip, "hbm_gib": r.hbm_gib, "throughput_x": x, "seq_per_s": tputs,
                    "area_mm2": float(r.area_mm2), "peak_power_w": float(peak[i]) if np.isfinite(peak[i]) else None,
                    "tco_usd": float(tco[i]) if np.isfinite(tco[i]) else None})
    return out


def fronts(points: list[dict]) -> dict[str, list[dict]]:
    """{axis key: the points on that axis' front, in order of the axis} (axes with no figure left out)."""
    out = {}
    for key, _ in AXES:
        have = [p for p in points if p[key] is not None and p["throughput_x"] == p["throughput_x"]]
        if have:
            out[key] = [have[i] for i in front_2d([p[key] for p in have], [p["throughput_x"] for p in have])]
    return out


def tco_table(best, best_acc, references, ref_accs: dict, networks: dict | None = None) -> dict[str, dict]:
    """{"winner": its TCO parts, reference chip name: its}: energy at the average power of the best plans (the
    mean over models), with ``tco_at_peak_usd`` (energy at peak power: what perf-per-dollar divides by).
    ``networks``: {"winner" or reference name: ChipNetwork} when the chips have their own networks (priced)."""
    from phaze.hardware.cost import chip_tco

    if not best_acc.has_hierarchy:  # the paper's template has no power model, so no energy figure
        return {}

    nets = networks or {}

    def one(acc, power_w, key) -> dict:
        d = chip_tco(acc, power_w, nets.get(key))
        d["tco_at_peak_usd"] = chip_tco(acc, None, nets.get(key))["total_usd"]
        return d

    out = {"winner": one(best_acc, best.power_w, "winner")}
    for name, acc in ref_accs.items():
        pw = [r.power_w for r in references if r.chip_name == name and r.power_w is not None]
        out[name] = one(acc, sum(pw) / len(pw) if pw else None, name)
    return out
