"""Terminal tables of a co-search's explanation: why the winner wins (``wins_because``), what each chip costs
(``tco``) and the Pareto fronts of throughput against area, peak power and cost (``fronts``)."""
from __future__ import annotations

from phaze.report.tables import table
from phaze.units import MiB

# how a changed field reads in a table
_UNITS = {"glb_bytes": ("MiB", MiB), "hbm_bytes": ("GiB", 2**30), "tc_operand_bytes": ("KiB", 1024),
          "tc_acc_bytes": ("KiB", 1024), "hbm_bandwidth_Bps": ("GB/s", 1e9), "freq_hz": ("MHz", 1e6)}
FRONT_AXES = {"area_mm2": "area", "peak_power_w": "peak W", "tco_usd": "TCO"}
# each front's axis in words (the keys of ``SearchResult.fronts``: phaze.search.fronts.AXES)
AXIS_LABELS = {"area_mm2": "area (mm^2)", "peak_power_w": "peak power (W)", "tco_usd": "TCO at peak power (USD)"}


def order_text(steps: list[dict]) -> str:
    """The order of a decomposition's steps, in words (the list's order is the order they were taken in)."""
    return " -> ".join(s["resource"] for s in steps)


def changed_text(changed: dict) -> str:
    """{field: [from, to]} as 'field from -> to, ...' in readable units."""
    parts = []
    for k, (a, b) in changed.items():
        unit, div = _UNITS.get(k, ("", 1))
        fmt = (lambda v: f"{v / div:g}") if div != 1 else str  # noqa: E731
        parts.append(f"{k} {fmt(a)} -> {fmt(b)}{' ' + unit if unit else ''}")
    return ", ".join(parts) or "-"


def why_tables(res) -> list:
    """One table per reference: each step's speedup, the running product, the chip after it."""
    out = []
    models = [m["name"] for m in res.spec["models"]]
    what = "throughput" if len(models) == 1 else "throughput score (mean over models)"
    for name, steps in (res.wins_because or {}).items():
        total = steps[-1]["cumulative"] if steps else 1.0
        rows = [(i + 1, s["resource"], changed_text(s["changed"]), f"{s['speedup']:.3f}x",
                 f"{s['cumulative']:.3f}x", ", ".join(f"{t:.1f}" for t in s["seq_per_s"]), f"{s['area_mm2']:.1f}",
                 f"{s['peak_power_w']:.0f}" if s["peak_power_w"] is not None else "-", s["note"] or "")
                for i, s in enumerate(steps)]
        out.append(table(
            f"why the winner wins against {name}: its {what} ratio {total:.3f}x = the product of these steps "
            f"(the reference changed into the winner one resource at a time, in this order; each chip's best plan "
            f"searched again): {order_text(steps)}",
            ["step", "resource", "changed", "speedup", "cumulative", "seq/s after", "area mm^2", "peak W", "note"],
            rows))
    return out


def tco_tables(res) -> list:
    """The TCO parts of the winner and each reference chip."""
    if not res.tco:
        return []
    from phaze.hardware.cost import SERVICE_LIFE_YEARS
    rows = []
    for name, t in res.tco.items():
        seq = _seq_per_s(res, name)
        per_k = f"{seq / t['total_usd'] * 1000:.2f}" if seq else "-"
        rows.append((name, f"{t['area_mm2']:.1f}", f"{t['die_usd']:,.0f}", f"{t['hbm_usd']:,.0f}",
                     f"{t['package_usd']:,.0f}", f"{t['network_usd']:,.0f}", f"{t['power_w']:.0f}",
                     f"{t['energy_usd']:,.0f}", f"{t['total_usd']:,.0f}", f"{t['tco_at_peak_usd']:,.0f}", per_k))
    return [table(f"cost of ownership per chip, USD over {SERVICE_LIFE_YEARS:g} years (docs/cost-model.md): die from "
                  f"wafer price and yield, HBM, package and assembly, network (each chip's own switch "
                  f"ports, optics and cables, docs/network-axis.md; none on the paper's shared cluster), energy at the average power of the best plan; 'at peak' prices the energy "
                  f"at peak power (what --objective perf-per-dollar divides by)",
                  ["chip", "area mm^2", "die", "HBM", "package", "network", "avg W", "energy", "TCO", "TCO at peak",
                   "seq/s per k$"], rows)]


def _seq_per_s(res, name: str) -> float | None:
    """The first model's throughput of the winner or of the named reference chip (its best plan)."""
    if name == "winner":
        return res.best.outcomes[0].throughput_seq_per_s if res.best and res.best.outcomes else None
    for r in (*res.references, *(res.real_references or ())):
        if r.chip_name == name:
            return r.best_seq_per_s or None
    return None


def front_tables(res) -> list:
    """The chips on any front (throughput against area, peak power or TCO at peak power), marked per front."""
    fr = res.fronts or {}
    if not fr:
        return []
    seen: dict[tuple, dict] = {}
    on: dict[tuple, list[str]] = {}
    for key, pts in fr.items():
        for p in pts:
            k = (p["chip"], p["hbm_gib"])
            seen[k] = p
            on.setdefault(k, []).append(FRONT_AXES.get(key, key))
    order = sorted(seen, key=lambda k: -seen[k]["throughput_x"])
    rows = [(seen[k]["chip"], seen[k]["hbm_gib"], f"{seen[k]['throughput_x']:.3f}x",
             f"{seen[k]['area_mm2']:.1f}", _num(seen[k]["peak_power_w"], "{:.0f}"), _num(seen[k]["tco_usd"], "{:,.0f}"),
             ", ".join(on[k])) for k in order[:MAX_FRONT_ROWS]]
    more = f"; {len(rows)} of {len(order)} shown, all in --json" if len(order) > MAX_FRONT_ROWS else ""
    return [table(f"Pareto fronts among the exactly evaluated chips: throughput (x the TPUv4-like chip) against "
                  f"area, peak power and TCO at peak power; a chip is listed when no other has at least its "
                  f"throughput for less of one of them{more}",
                  ["chip", "HBM GiB", "throughput", "area mm^2", "peak W", "TCO at peak $", "on the front of"],
                  rows)]


MAX_FRONT_ROWS = 20


def _num(v, fmt: str) -> str:
    return fmt.format(v) if isinstance(v, (int, float)) else "-"
