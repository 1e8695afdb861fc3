"""Tables of a co-search result: the winner, the TPUv4-like and TPU v4 comparisons, the Pareto front, the counts."""
from __future__ import annotations

from phaze.report.tables import si, table
from phaze.units import MiB



def chip_text(r) -> str:
    """One chip row (a search's ``ChipRow``, read by attribute) as one line."""
    glb = f"GLB {r.glb_bytes // MiB} MiB"
    if r.glb_banks:
        glb += f" ({r.glb_banks} x {r.glb_bank_width_bytes} B, {r.noc or ''})"
    return f"{r.num_tc}x TC {r.tc_rows}x{r.tc_cols}, {r.num_vc}x VC {r.vc_width}, {glb}"


def watts(v) -> str:
    return f"{v:.0f}" if isinstance(v, (int, float)) else "-"


def glb_bw(r) -> str:
    v = r.glb_bandwidth_Bps
    return si(v, "B/s") if isinstance(v, (int, float)) else "-"


def results_rows(r) -> dict:
    """One stored candidate (a ``ChipRow``) as a flat row (CSV export, tables): its columns by name."""
    row = {"chip": r.chip, "hbm_gib": r.hbm_gib, "score": round(r.score, 6), "area_mm2": round(r.area_mm2, 3),
           "num_tc": r.num_tc, "tc_rows": r.tc_rows, "tc_cols": r.tc_cols, "num_vc": r.num_vc,
           "vc_width": r.vc_width, "glb_mib": r.glb_bytes // MiB}
    for o in r.outcomes:
        row[f"{o.model}_seq_per_s"] = round(o.throughput_seq_per_s, 4)
        row[f"{o.model}_plan"] = o.plan
    return row


def _bound(x) -> str:
    """What bounds an explained outcome or reference ("-" when it was not explained)."""
    return x.bound_by if x.explained else "-"


def search_tables(res) -> list:
    out = []
    c = res.counts
    out.append(table("search", ["quantity", "value"], [
        ("candidates (chips x HBM sizes)", f"{c['candidates']} ({c['chips']} x {c['hbm_sizes']})"),
        ("evaluated exactly", c["exact"]), ("bounded out after a per-chip plan bound", c["bounded"]),
        ("pruned by the vectorized bound", c["pruned"]), ("infeasible", c["infeasible"]),
        ("layer schedules solved (not proven optimal)",
         f"{c['schedules_solved']} ({c['schedules_not_optimal']})" if "schedules_solved" in c
         else "not recorded in the store (a live search reports it)"),
        ("wall time", si(res.wall_time_s, "s")), ("store", res.store)]))
    b = res.best
    if b is None:
        out.append(table("best", ["result"], [("no candidate fits any plan",)]))
        return out
    rows = []
    for o, ref in zip(b.outcomes, res.references):
        devices = (o.plan_json or {}).get("devices")  # the stored plan (``Plan.to_dict()``)
        used = f"{devices} of {res.spec['devices']}" if devices is not None else "-"
        tput, best_ref = o.throughput_seq_per_s, ref.best_seq_per_s
        rows.append((o.model, "best chip", f"{b.area_mm2:.1f}", b.hbm_gib, o.plan, f"{tput:.2f}",
                     f"{tput / b.area_mm2:.3f}", f"{tput / best_ref:.2f}x" if best_ref else "-",
                     f"{o.mfu:.1%}", used, watts(o.power_w), watts(b.peak_power_w), glb_bw(b), _bound(o)))
        rows.append((ref.model, "TPUv4-like, best plan", f"{ref.area_mm2:.1f}", f"{ref.hbm_gib:g}",
                     ref.best_plan, f"{best_ref:.2f}", f"{best_ref / ref.area_mm2:.3f}", "1.00x",
                     f"{ref.best_mfu:.1%}" if ref.best_mfu is not None else "-", "-",
                     watts(ref.power_w), watts(ref.peak_power_w), glb_bw(ref), _bound(ref)))
        at = ref.at_best_hbm
        if at:  # the winner has another HBM size: the reference given the same (HBM is outside the area budget)
            at_tput = at.best_seq_per_s
            rows.append((ref.model, "TPUv4-like, winner's HBM", f"{ref.area_mm2:.1f}",
                         f"{at.hbm_gib:g}", at.best_plan, f"{at_tput:.2f}" if at_tput else "-",
                         f"{at_tput / ref.area_mm2:.3f}" if at_tput else "-",
                         f"{at_tput / best_ref:.2f}x" if at_tput and best_ref else "-",
                         "-", "-", "-", watts(ref.peak_power_w), glb_bw(ref), "-"))
        real = _by_model(res.real_references).get(ref.model)
        if real is not None:  # the second reference, the real TPU v4 (its ratio, too, over the TPUv4-like chip's)
            rt = real.best_seq_per_s
            rows.append((real.model, "TPU v4, best plan", f"{real.area_mm2:.1f}", f"{real.hbm_gib:g}", real.best_plan,
                         f"{rt:.2f}" if rt else "-", f"{rt / real.area_mm2:.3f}" if rt else "-",
                         f"{rt / best_ref:.2f}x" if rt and best_ref else "-",
                         f"{real.best_mfu:.1%}" if real.best_mfu is not None else "-", "-",
                         watts(real.power_w), watts(real.peak_power_w), glb_bw(real), _bound(real)))
            rat = real.at_best_hbm
            if rat:
                at_t = rat.best_seq_per_s
                rows.append((real.model, "TPU v4, winner's HBM", f"{real.area_mm2:.1f}", f"{rat.hbm_gib:g}",
                             rat.best_plan, f"{at_t:.2f}" if at_t else "-",
                             f"{at_t / real.area_mm2:.3f}" if at_t else "-",
                             f"{at_t / best_ref:.2f}x" if at_t and best_ref else "-",
                             "-", "-", "-", watts(real.peak_power_w), glb_bw(real), "-"))
        paper = ref.paper_seq_per_s
        rows.append((ref.model, "TPUv4-like, paper's plan", f"{ref.area_mm2:.1f}", f"{ref.hbm_gib:g}",
                     ref.paper_plan + " (balanced stages)" if ref.paper_fits
                     else f"does not fit: {ref.paper_reason or ref.paper_plan}",
                     f"{paper:.2f}" if paper else "-", f"{paper / ref.area_mm2:.3f}" if paper else "-",
                     f"{paper / best_ref:.2f}x" if paper and best_ref else "-", "-", "-",
                     "-", watts(ref.peak_power_w), glb_bw(ref), "-"))
    what = {"throughput": "mean throughput", "perf-per-area": "mean throughput per mm^2",
            "perf-per-watt": "mean throughput per W of peak power",
            "perf-per-dollar": "mean throughput per dollar of TCO at peak power"}[res.spec.get("objective", "throughput")]
    net = f", network {res.network['name']}" if res.network else ""  # its own (docs/network-axis.md)
    out.append(table(f"best chip: {chip_text(b)}{net}, {b.area_mm2:.2f} mm^2"
                     f"{' with its PHY' if res.network else ''}, HBM {b.hbm_gib} GiB "
                     f"(score {b.score:.3f} = {what} over the TPUv4-like chip's best){per_watt_text(b, res)}",
                     ["model", "chip", "area mm^2", "HBM GiB", "plan", "seq/s", "seq/s/mm^2", "vs TPUv4-like best",
                      "MFU", "devices used", "power W", "peak W", "GLB BW", "bound by"], rows))
    gains = res.gains()
    if gains and res.real_references:
        out.append(table("gain of the best chip over each reference under its best plan; at equal HBM: the reference "
                         "given the winner's HBM capacity (HBM is outside the area budget: the chip's design alone)",
                         ["model", "winner HBM GiB", "vs TPUv4-like", "vs TPUv4-like, equal HBM", "vs TPU v4",
                          "vs TPU v4, equal HBM"],
                         [(g["model"], g["hbm_gib"]) + tuple(_ratio(g[k].get(name)) for name in ("tpuv4-like", "tpuv4")
                                                             for k in ("vs", "vs_equal_hbm")) for g in gains]))
    from phaze.report.why import front_tables, tco_tables, why_tables
    out += why_tables(res) + tco_tables(res)
    if res.per_model:
        refs = {r.model: r for r in res.references}
        out.append(table("best chip per model, each model searched alone (the joint winner above maximizes the mean)",
                         ["model", "chip", "area mm^2", "HBM GiB", "plan", "seq/s", "seq/s/mm^2", "vs TPUv4-like best",
                          "power W"],
                         [_alone_row(r, refs[r.model]) for r in res.per_model]))
    scope = ("exact over the whole space" if res.spec.get("pareto")
             else "among the exactly evaluated candidates; --pareto makes it exact")
    front = res.pareto
    shown = thin(front, MAX_FRONT_ROWS)
    more = f"; {len(shown)} of {len(front)} points shown, all in --json" if len(shown) < len(front) else ""
    out.append(table(f"Pareto front of score against area ({scope}{more})",
                     ["area mm^2", "score", "HBM GiB", "power W", "peak W", "chip"],
                     [(f"{r.area_mm2:.2f}", f"{r.score:.3f}", r.hbm_gib, watts(r.power_w),
                       watts(r.peak_power_w), chip_text(r)) for r in shown]))
    return out + front_tables(res)


MAX_FRONT_ROWS = 25


def _by_model(rows) -> dict:
    return {r.model: r for r in rows}


def _ratio(x) -> str:
    return f"{x:.2f}x" if isinstance(x, (int, float)) else "-"


def per_watt_text(best, res) -> str:
    """Perf/W beside throughput (issue 34): the winner's and the reference's sequences per second per watt of
    average power, per model ("" without a power model)."""
    parts = [f"{o.model} {o.throughput_seq_per_s / o.power_w:.1f} vs TPUv4-like {r.best_seq_per_s / r.power_w:.1f}"
             for o, r in zip(best.outcomes, res.references) if o.power_w and r.power_w]
    return f"; seq/s per W of average power: {', '.join(parts)}" if parts else ""


def _alone_row(r, ref) -> tuple:
    o = r.outcomes[0]
    tput = o.throughput_seq_per_s
    return (r.model, chip_text(r), f"{r.area_mm2:.1f}", r.hbm_gib, o.plan, f"{tput:.2f}",
            f"{tput / r.area_mm2:.3f}", f"{tput / ref.best_seq_per_s:.2f}x" if ref.best_seq_per_s else "-",
            watts(o.power_w))


def thin(rows: list, k: int) -> list:
    """At most ``k`` rows, evenly spaced by position, always keeping the first and the last."""
    if len(rows) <= k:
        return list(rows)
    idx = sorted({round(i * (len(rows) - 1) / (k - 1)) for i in range(k)})
    return [rows[i] for i in idx]
