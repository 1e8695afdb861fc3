"""One self-contained HTML report of a co-search, a plan, or a reproduce run (inline SVG, no network).

Entry points (each writes one file and returns its path):
- ``write_search_report(result, path)``: a ``SearchResult`` (or one rebuilt from a store by
  ``phaze.api.report``);
- ``write_plan_report(result, path, ...)``: a ``PlanResult`` of ``phaze plan``;
- ``write_reproduce_report(rows, path)`` (page built in ``html_reproduce.py``): the rows of ``phaze reproduce`` (model, role, plan_kind,
  throughput_seq_per_s, ratio_to_tpuv4_like, area_mm2, power_w, plan, search_wall_s, evaluated).
Fields added later (power, what bounds a chip, devices used) are shown when present, never required.
"""
from __future__ import annotations

import os
from pathlib import Path

from phaze.errors import ConfigError, PhazeError
from phaze.report.details import iteration_parts
from phaze.report.html_figures import pareto_chart, plan_figures, schedule_figures, si_s
from phaze.report.html_page import Section, kv_table, note, page, pct, table, times
from phaze.report.html_why import fronts_html, tco_html, why_html
from phaze.report.svg import BLUE, GREY, ORANGE, SKY, hbars
from phaze.units import MiB

# an explained outcome's scalar facts, shown after its plan (sorted by name, as the report always listed them)
_OUTCOME_FACTS = ("bound_by", "energy_j", "glb_demand_Bps", "power_w")


def check_output_path(path: str, option: str = "--html") -> Path:
    """Fail before any work: the file must end in .html/.htm and its directory must exist and be writable."""
    p = Path(path)
    if p.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"{option} {path}: the report is HTML; give a file name ending in .html")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"{option} {path}: directory {parent} does not exist; create it or pick another path")
    from phaze.report.plots import writable_dir

    if not writable_dir(parent) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"{option} {path}: not writable; pick a writable path")
    return p


def _write(path: str, html: str) -> str:
    p = check_output_path(path)
    tmp = p.with_name(p.name + ".part")
    try:
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(p)  # never a half-written report
    except OSError as err:
        raise PhazeError(f"cannot write the report to {p}: {err.strerror}; pick a writable path") from None
    return str(p)


def chip_text(r) -> str:
    """A search's chip row (``ChipRow``, read by attribute) in words."""
    return (f"{r.num_tc} tensor cores of {r.tc_rows}x{r.tc_cols}, {r.num_vc} vector cores of "
            f"{r.vc_width} lanes, GLB {r.glb_bytes // MiB} MiB, HBM {r.hbm_gib} GiB")


def _extra(o) -> str:
    """An explained outcome's facts ('; power_w 123.4; ...'); nothing for an unexplained one."""
    return "".join(f"; {k} {getattr(o, k)}" for k in _OUTCOME_FACTS) if o.explained else ""


# ---- a plan's pictures (shared by the search and plan reports) ------------------------------------------

def _plan_sections(details: list, who: str) -> list[Section]:
    plan_body, sched_body = [], []
    for d in details:
        ev = d.evaluation
        used = ev["pp"] * ev["tp"] * ev["dp"]
        big = max(iteration_parts(ev), key=lambda kv: kv[1])
        limit = f" The largest share of the iteration is {big[0]}: {big[1] / ev['iteration_time_s']:.0%}."
        stored = (f" The search stored {d.stored_seq_per_s:.4g} seq/s for this plan; evaluated again here: "
                  f"{ev['throughput_seq_per_s']:.4g} seq/s." if d.stored_seq_per_s is not None else "")
        plan_body.append(f"<h3>{d.model} on {who}</h3>" + note(
            f"p={ev['pp']} pipeline stages x t={ev['tp']} tensor-parallel x d={ev['dp']} data-parallel = {used} of "
            f"{d.devices_given} devices; microbatch {ev['microbatch_size']} x {ev['num_microbatches']} per iteration; "
            f"iteration {si_s(ev['iteration_time_s'])}, {ev['throughput_seq_per_s']:.4g} seq/s, MFU {ev['mfu']:.1%}; "
            f"peak memory {ev['memory_bytes_per_device'] / 2**30:.2f} of {ev['memory_capacity_bytes'] / 2**30:.0f} GiB."
            + limit + stored) + "".join(plan_figures(d)))
        if d.schedules:
            sched_body.append(f"<h3>{d.model}</h3>" + "".join(schedule_figures(d)))
        else:
            sched_body.append(f"<h3>{d.model}</h3>" + note(
                f"{d.accelerator.name} is costed as kernels one after another (how Megatron-LM runs on GPUs), "
                f"so there is no per-layer schedule to draw."))
    return [Section("plan", "The plan as a picture", note(
                "Stages over devices, the layers and time of each stage, memory per stage against the HBM "
                "capacity, and each stage's busy and idle (bubble) time in one iteration.") + "".join(plan_body)),
            Section("schedule", "Per-layer schedule (Gantt per core kind)", note(
                "One transformer block on the chip: each lane is a kind of core; ops that run at once get their "
                "own row; a bar's shade is the share of that kind's cores it uses.") + "".join(sched_body))]


# ---- search -------------------------------------------------------------------------------------------

def _search_answer(res) -> str:
    b = res.best
    if b is None:
        return '<p class="answer">No candidate chip fits any plan for this setting.</p>'
    lines = [f"<b>Best chip</b>: {chip_text(b)}; {b.area_mm2:.1f} mm<sup>2</sup>; score "
             f"<b>{b.score:.3f}</b> (throughput over the TPUv4-like chip's under its own best plan)."]
    gains = {g["model"]: g for g in res.gains()}
    for o, ref in zip(b.outcomes, res.references):
        ratio = (f", {o.throughput_seq_per_s / ref.best_seq_per_s:.2f}x the TPUv4-like chip "
                 f"({ref.best_seq_per_s:.4g} seq/s)" if ref.best_seq_per_s else "")
        g = gains.get(o.model, {})
        if g.get("vs", {}).get("tpuv4"):
            ratio += f", {g['vs']['tpuv4']:.2f}x the TPU v4"
        eq = g.get("vs_equal_hbm", {})
        if b.hbm_gib != ref.hbm_gib and any(eq.values()):
            ratio += " (at the winner's HBM: " + ", ".join(
                f"{v:.2f}x {'the TPUv4-like chip' if k == 'tpuv4-like' else 'the TPU v4'}"
                for k, v in eq.items() if v) + ")"
        devices = (o.plan_json or {}).get("devices")  # the stored plan (``Plan.to_dict()``)
        used = f"; {devices} devices used" if devices is not None else ""
        lines.append(f"{o.model}: <b>{o.throughput_seq_per_s:.4g} seq/s</b>{ratio}; plan {o.plan}; "
                     f"MFU {o.mfu:.1%}{used}{_extra(o)}.")
    return '<div class="answer">' + "<br>".join(lines) + "</div>"


def _search_versus(res) -> str:
    b = res.best
    if b is None:
        return note("nothing to compare")
    rows, bars = [], []
    for o, ref in zip(b.outcomes, res.references):
        best_ref = ref.best_seq_per_s or 0.0
        tput = o.throughput_seq_per_s
        rows.append([o.model, "searched chip (winner)", round(b.area_mm2, 2), b.hbm_gib, o.plan,
                     tput, tput / b.area_mm2, times(tput / best_ref if best_ref else None), pct(o.mfu)])
        rows.append([ref.model, "TPUv4-like, its best plan", round(ref.area_mm2, 2), ref.hbm_gib,
                     ref.best_plan, best_ref, best_ref / ref.area_mm2, times(1.0 if best_ref else None),
                     pct(ref.best_mfu)])
        at = ref.at_best_hbm
        if at:  # the winner has another HBM size: the reference given the same
            at_tput = at.best_seq_per_s or 0.0
            rows.append([ref.model, "TPUv4-like, its best plan at the winner's HBM", round(ref.area_mm2, 2),
                         at.hbm_gib, at.best_plan, at_tput or None, at_tput / ref.area_mm2 if at_tput else None,
                         times(at_tput / best_ref if at_tput and best_ref else None), None])
        real = {r.model: r for r in res.real_references}.get(ref.model)
        if real is not None:  # the second reference, the real TPU v4
            rt = real.best_seq_per_s or 0.0
            rows.append([real.model, "TPU v4, its best plan", round(real.area_mm2, 2), real.hbm_gib, real.best_plan,
                         rt or None, rt / real.area_mm2 if rt else None,
                         times(rt / best_ref if rt and best_ref else None), pct(real.best_mfu)])
            rat = real.at_best_hbm
            if rat:
                at_t = rat.best_seq_per_s or 0.0
                rows.append([real.model, "TPU v4, its best plan at the winner's HBM", round(real.area_mm2, 2),
                             rat.hbm_gib, rat.best_plan, at_t or None, at_t / real.area_mm2 if at_t else None,
                             times(at_t / best_ref if at_t and best_ref else None), None])
        paper = ref.paper_seq_per_s or 0.0
        rows.append([ref.model, "TPUv4-like, the paper's plan", round(ref.area_mm2, 2), ref.hbm_gib,
                     ref.paper_plan if ref.paper_fits else f"does not fit: {ref.paper_reason}",
                     paper or None, paper / ref.area_mm2 if paper else None,
                     times(paper / best_ref if paper and best_ref else None), None])
        bars += [(f"{o.model}: winner", [(tput, ORANGE, f"winner {tput:.4g} seq/s")]),
                 (f"{ref.model}: TPUv4-like best", [(best_ref, BLUE, f"TPUv4-like, best plan {best_ref:.4g} seq/s")]),
                 (f"{ref.model}: TPUv4-like paper", [(paper, SKY, f"TPUv4-like, paper's plan {paper:.4g} seq/s")])]
    hi = {i for i, r in enumerate(rows) if r[1] == "searched chip (winner)"}
    return (table(["model", "chip", "area mm^2", "HBM GiB", "plan", "seq/s", "seq/s per mm^2", "vs TPUv4-like best",
                   "MFU"], rows, hi)
            + hbars(bars, title="Training throughput: the winner against the TPUv4-like chip", xlabel="sequences / s",
                    label_px=220, legend_items=[(ORANGE, "winner"), (BLUE, "TPUv4-like, best plan"),
                                                (SKY, "TPUv4-like, paper's plan")]))


def _search_front(res, all_rows: list) -> str:
    refs = [(r.area_mm2, 1.0, "TPUv4-like chip, best plan (score 1)") for r in res.references[:1]]
    front_ids = {(r.chip, r.hbm_gib) for r in res.pareto}
    others = [r for r in all_rows if (r.chip, r.hbm_gib) not in front_ids]
    scope = ("exact over the whole design space" if res.spec.get("pareto") else
             "among the exactly evaluated candidates (pruned chips are provably not the best but could sit on "
             "the front; --pareto makes it exact)")
    n = len(res.pareto)
    out = note(f"Pareto front of score against area, {scope}. {n} point{'s' if n != 1 else ''} on the front, "
               f"{len(all_rows)} candidates evaluated exactly.")
    out += pareto_chart(res.pareto, others, res.best, refs, x_key="area_mm2", xlabel="chip area (mm^2)",
                        title="Score against chip area")
    if res.best is not None and res.best.power_w is not None:
        with_power = [r for r in all_rows if r.power_w is not None]
        front, best = [], -1.0
        for r in sorted(with_power, key=lambda r: (r.power_w, -r.score)):
            if r.score > best:
                front.append(r)
                best = r.score
        pf = {(r.chip, r.hbm_gib) for r in front}
        refs_p = [(r.power_w, 1.0, "TPUv4-like chip, best plan") for r in res.references[:1] if r.power_w]
        out += pareto_chart(front, [r for r in with_power if (r.chip, r.hbm_gib) not in pf], res.best, refs_p,
                            x_key="power_w", xlabel="chip power (W)", title="Score against chip power")
    else:
        out += note("This chip model has no power figure, so there is no front against power.")
    if res.pareto:
        cols = ["area mm^2", "score", "chip", "plans"]
        out += table(cols, [[round(r.area_mm2, 2), r.score, chip_text(r),
                             "; ".join(f"{o.model}: {o.plan}" for o in r.outcomes)] for r in res.pareto])
    return out


def _search_counts(res) -> str:
    c = dict(res.counts)
    rows = [(k.replace("_", " "), f"{v:,}" if isinstance(v, int) else str(v)) for k, v in c.items()
            if not isinstance(v, dict)]
    if res.wall_time_s:
        rows.append(("wall time", si_s(res.wall_time_s)))
    rows.append(("store", res.store))
    out = kv_table(rows)
    if res.per_model:
        refs = {r.model: r for r in res.references}
        out += "<h3>Best chip per model, each model searched alone</h3>" + table(
            ["model", "chip", "area mm^2", "plan", "seq/s", "vs TPUv4-like best"],
            [[r.model, chip_text(r), round(r.area_mm2, 2), r.outcomes[0].plan, r.outcomes[0].throughput_seq_per_s,
              r.outcomes[0].throughput_seq_per_s / refs[r.model].best_seq_per_s
              if refs[r.model].best_seq_per_s else None] for r in res.per_model])
    return out


def search_report_html(res, all_rows: list | None = None, details: list | None = None) -> str:
    """The page for a co-search result. ``all_rows``: every exactly evaluated candidate (default: the front);
    ``details``: the winner's plans evaluated again (``phaze.search.details.search_details``; none: no plan
    pictures)."""
    from phaze.report.setting import search_setting

    details = details or []
    names = ", ".join(m["name"] for m in res.spec["models"])
    sections = [Section("answer", "The answer", _search_answer(res)),
                Section("assumptions", "Assumptions", kv_table(search_setting(res.spec))),
                Section("versus", "Winner against the references", _search_versus(res)),
                Section("why", "Why the winner wins", why_html(res)),
                Section("cost", "Cost of ownership", tco_html(res)),
                Section("pareto", "Pareto front",
                        _search_front(res, all_rows if all_rows is not None else res.pareto) + fronts_html(res))]
    if details:
        sections += _plan_sections(details, "the winning chip")
    sections.append(Section("counts", "How the search got there", _search_counts(res)))
    return page(f"phaze co-search: {names}", f"{res.spec['devices']} devices, global batch {res.spec['global_batch']}, "
                f"cluster {res.spec['cluster']}", sections)


def write_search_report(res, path: str, all_rows: list | None = None,
                        details: list | None = None) -> str:
    """Write the co-search report to ``path`` (.html); returns the path."""
    check_output_path(path)
    return _write(path, search_report_html(res, all_rows, details))


# ---- plan ---------------------------------------------------------------------------------------------

def _eval_row(label: str, ev: dict | None, describe: str, best_tput: float, reason: str = "") -> list:
    if not ev:
        return [label, describe or "-", None, None, None, None, None, f"not built: {reason}"]
    fits = "yes" if ev["fits"] else f"no (+{ev['memory_excess_bytes'] / 2**30:.2f} GiB on stage {ev['oom_stage']})"
    return [label, describe, ev["pp"] * ev["tp"] * ev["dp"], ev["iteration_time_s"], ev["throughput_seq_per_s"],
            times(ev["throughput_seq_per_s"] / best_tput if best_tput else None), pct(ev["mfu"]), fits]


def plan_report_html(result, setting: list[tuple[str, str]], detail, launch=None) -> str:
    from html import escape

    best = result.best
    bt = best.throughput_seq_per_s
    used = best.devices_used
    fp8 = " of the BF16 dense peak (an FP8 plan)" if best.plan.precision == "fp8" else ""
    answer = (f'<div class="answer"><b>Best plan</b>: {best.plan.describe()}<br>{bt:.4g} seq/s, '
              f'{best.tokens_per_s_per_device:,.0f} tokens/s/GPU, {best.model_tflops_per_device:.1f} model TFLOP/s/GPU, '
              f'iteration {si_s(best.iteration_time_s)}, MFU {best.mfu:.1%}{fp8}, {used} of {detail.devices_given} '
              f'devices, peak memory {best.memory_bytes_per_device / 2**30:.2f} of '
              f'{best.memory_capacity_bytes / 2**30:.0f} GiB per device</div>'
              f'<p>{escape(best.mfu_definition)}.</p>')
    rows = [_eval_row("best", best.to_dict(), best.plan.describe(), bt)]
    rows += [_eval_row(f"alternative {i + 1}", a.to_dict(), a.plan.describe(), bt) for i, a in enumerate(result.alternatives)]
    rows += [_eval_row(f"baseline: {b.name}", b.evaluation.to_dict() if b.evaluation else None,
                       b.plan.describe() if b.plan is not None else "", bt, b.reason) for b in result.baselines]
    cols = ["plan", "description", "devices used", "iteration s", "seq/s", "vs best", "MFU", "fits"]
    bars = [(r[0], [(r[4] or 0.0, ORANGE if r[0] == "best" else (GREY if r[0].startswith("baseline") else BLUE),
                     f"{r[0]}: {r[1]}: {r[4] or 0:.4g} seq/s")]) for r in rows]
    versus = (table(cols, rows, {0}) + hbars(
        bars, title="Throughput: the best plan, the runners-up and the baselines", xlabel="sequences / s",
        label_px=230, legend_items=[(ORANGE, "best"), (BLUE, "alternatives"), (GREY, "baselines")]))
    st = result.stats
    stats = kv_table([(k.replace("_", " "), f"{v:,}" if isinstance(v, int) else f"{v:.4g}")
                      for k, v in (st.__dict__.items() if st else [])])
    sections = [Section("answer", "The answer", answer)]
    if launch is not None:
        sections.append(Section("launch", "Launch settings", launch_html(*launch)))
    sections += [Section("assumptions", "Assumptions", kv_table(setting)),
                 Section("versus", "Best plan, alternatives and baselines side by side", versus)]
    sections += _plan_sections([detail], detail.accelerator.name)
    sections.append(Section("counts", "How the optimizer got there", stats or note("no statistics")))
    return page(f"phaze plan: {detail.model} on {detail.devices_given} x {detail.accelerator.name}",
                f"global batch {setting_value(setting, 'global batch (sequences)')}", sections)


def setting_value(setting: list[tuple[str, str]], key: str) -> str:
    return next((v for k, v in setting if k == key), "")


def write_plan_report(result, path: str, detail, setting: list[tuple[str, str]], launch=None) -> str:
    """Write the ``phaze plan`` report to ``path`` (.html); returns the path. ``detail``: the best plan's
    ``phaze.placement.detail.PlanDetail`` (its evaluation and block schedules); ``launch``: (framework, its
    ``phaze.report.launch`` settings) of the best plan, shown with a copy button."""
    check_output_path(path)
    return _write(path, plan_report_html(result, setting, detail, launch))


# the copy button's script: inline, no network; copies the <pre> of its section
_COPY_SCRIPT = ("<script>function phazeCopy(id){var t=document.getElementById(id).textContent;"
                "if(navigator.clipboard){navigator.clipboard.writeText(t);}else{var r=document.createRange();"
                "r.selectNodeContents(document.getElementById(id));var s=window.getSelection();s.removeAllRanges();"
                "s.addRange(r);document.execCommand('copy');}}</script>")


def launch_html(framework: str, settings: dict) -> str:
    """The launch settings block: the text to paste in a <pre>, a copy button, the warnings listed."""
    from html import escape

    from phaze.report.launch import launch_text

    names = {"megatron": "Megatron-Core 0.15 arguments", "nemo": "NeMo 2 recipe overrides",
             "torchtitan": "TorchTitan TOML"}
    warn = "".join(f"<li>{escape(w)}</li>" for w in settings["warnings"])
    return (f'<p>{names[framework]} of the best plan (<code>phaze plan --emit {framework}</code>; the others: '
            f'<code>--emit megatron|nemo|torchtitan</code>). <button type="button" onclick="phazeCopy(\'launch-{framework}\')">'
            f'Copy</button></p><pre id="launch-{framework}">{escape(launch_text(settings, framework))}</pre>'
            + (f"<p>What {framework} cannot express of the plan:</p><ul>{warn}</ul>" if warn else "")
            + _COPY_SCRIPT)


# ---- reproduce ----------------------------------------------------------------------------------------

def write_reproduce_report(rows: list[dict], path: str, setting: list[tuple[str, str]] | None = None) -> str:
    """Write the reproduce report (rows as ``phaze reproduce`` writes them under "rows") to ``path``."""
    from phaze.report.html_reproduce import reproduce_report_html

    check_output_path(path)
    return _write(path, reproduce_report_html(list(rows), setting))
