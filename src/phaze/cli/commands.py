"""One handler per `phaze` subcommand: call the API, print a table or JSON. Errors propagate as PhazeError."""
from __future__ import annotations

import argparse
import sys

from phaze import api
from phaze.errors import ConfigError
from phaze.jsonable import dumps, to_jsonable
from phaze.report.tables import gib, print_tables, si, table
from phaze.api import PlanSpace, Runtime


def _out(args: argparse.Namespace, data, *tables) -> int:
    if args.json:
        print(dumps(data))
    else:
        print_tables(*tables)
    return 0


def cmd_models(args) -> int:
    zoo = api.models()
    data = [dict(to_jsonable(z.model), params=z.params) for z in zoo]
    rows = [(m.name, m.num_layers, m.hidden, m.heads, m.num_kv_heads, m.ffn, m.vocab, m.seq_len, m.mlp,
             m.max_tp, si(z.params)) for z, m in ((z, z.model) for z in zoo)]
    return _out(args, data, table("model zoo", ["name", "layers", "hidden", "heads", "kv", "ffn", "vocab", "seq",
                                                "mlp", "max tp", "params"], rows))


def cmd_show_model(args) -> int:
    s = api.show_model(args.model, args.mbs, args.seq, args.tp, args.sequence_parallel, args.recompute)
    head = table(f"{s.model.name}: {si(s.params)} parameters, {si(s.train_flops_per_token, 'FLOP')} training FLOPs/token",
                 ["layer", "count", "fwd FLOPs", "bwd FLOPs", "params/dev", "weights", "grads", "optimizer",
                  "activations/mb"],
                 [(l.layer, l.count, si(l.fwd_flops), si(l.bwd_flops), si(l.params), gib(l.weight_bytes),
                   gib(l.grad_bytes), gib(l.optimizer_bytes), gib(l.activation_bytes)) for l in s.layers])
    ops = table("forward ops per layer kind", ["layer", "ops"], [(l.layer, " ".join(l.ops)) for l in s.layers])
    tables = [head, ops]
    if s.moe:
        tables.insert(0, table(f"{s.model.name}: Mixture-of-Experts", ["field", "value"],
                               [("parameters (total)", f"{s.params:,} ({si(s.params)})"),
                                ("parameters (active per token)", f"{s.active_params:,} ({si(s.active_params)})")]
                               + [(k, v) for k, v in s.moe], left=True))
    if not args.check_torch:
        return _out(args, s, *tables)
    chk = api.check_torch(s.model, args.mbs, args.seq)
    return _out(args, {"model": s, "torch_check": _check_data(chk)}, *tables, _check_table(chk))


def _check_data(chk) -> dict:
    return {"hf_family": chk.hf_family, "microbatch_size": chk.microbatch_size, "seq_len": chk.seq_len,
            "counted_ops": list(chk.counted_ops),
            "rows": [{"quantity": r.quantity, "ours": r.ours, "torch": r.torch, "rel_error": r.rel_error}
                     for r in chk.rows]}


def _check_table(chk):
    return table(f"{chk.model} against PyTorch ({chk.hf_family} in transformers, meta device, mbs {chk.microbatch_size}, "
                 f"seq {chk.seq_len}; FLOPs: GEMMs only on both sides, PyTorch counts {', '.join(chk.counted_ops)})",
                 ["quantity", "phaze", "PyTorch", "difference"],
                 [(r.quantity, f"{r.ours:,.0f}", f"{r.torch:,.0f}", f"{r.rel_error:+.4%}") for r in chk.rows])


def cmd_import_model(args) -> int:
    res = api.import_model(args.config, args.output, args.torch, args.mbs, args.seq)
    if args.torch is None:
        if args.json:
            print(dumps(res))
        elif args.output:
            print(f"{res.name}: written to {args.output} (use it as --model {args.output})")
        else:
            print(api.model_file_text(res), end="")
        return 0
    layers = table(f"{res.source}: traced forward (mbs {res.microbatch_size}, seq {res.seq_len})",
                   ["layer", "count", "ops", "GEMMs", "GEMM FLOPs", "vector FLOPs", "edges"],
                   [(l.kind, l.count, len(l.graph.ops), len(l.graph.gemms),
                     si(l.graph.gemm_flops), si(l.graph.flops - l.graph.gemm_flops), len(l.graph.edges))
                    for l in res.layers])
    gemms = table("GEMMs per layer kind (batch x M x N x K)", ["layer", "op", "batch", "M", "N", "K"],
                  [(l.kind, o.name, o.batch, o.m, o.n, o.k) for l in res.layers for o in l.graph.gemms])
    unmapped = table("unmapped ATen ops", ["op", "count", "FLOPs", "share of FLOPs"],
                     [(u.aten_op, u.count, si(u.flops), f"{u.flops_share:.4%}") for u in res.unmapped])
    plannable = (f"yes: --model {args.output}" if args.output and args.output.lower().endswith(".json")
                 else f"yes: --model torch:{res.source} or -o FILE.json" if res.traced_model
                 else f"no: {res.not_plannable}")
    tables = [layers, gemms, unmapped, table("planning", ["field", "value"], [("plannable", plannable)] + (
        [("written to", args.output)] if args.output else []))]
    if res.model is not None:
        tables.append(table("Hugging Face config found", ["field", "value"],
                            [("model", res.model.name),
                             ("block GEMM FLOPs: traced / analytic",
                              f"{si(max(l.graph.gemm_flops for l in res.layers if l.kind == 'block'))} / "
                              f"{si(res.analytic_block_gemm_flops)}")]))
    return _out(args, res, *tables)


def cmd_arch(args) -> int:
    if args.chip:  # one chip in the chip-file format (docs/chip-file.md): save it, edit it, pass --accelerator
        name, chip = api.chip_file(args.chip)
        if args.json:
            print(dumps(chip))
            return 0
        return _out(args, chip, table(f"{name} as a chip file (--json prints it to save)", ["field", "value"],
                                      list(chip.items()), left=True))
    data = api.arch(args.space, args.budget_mm2)
    presets = data["presets"]
    summary = {k: v for k, v in data.items() if k != "presets"}
    t1 = table("accelerator presets (area from the Phaze template's 22 nm model)",
               ["name", "TC", "VC", "GLB", "HBM", "HBM BW", "area mm^2", "matrix peak", "vector peak"],
               [(p["name"], f"{p['num_tc']} x {p['tc']}", f"{p['num_vc']} x {p['vc_width']}", gib(p["glb_bytes"]),
                 gib(p["hbm_bytes"]), si(p["hbm_bandwidth_Bps"], "B/s"), f"{p['area_mm2']:.2f}",
                 si(p["peak_matrix_flops"], "FLOP/s"), si(p["peak_vector_flops"], "FLOP/s")) for p in presets])
    t2 = table("design space", ["field", "value"], [(k, v) for k, v in summary.items() if k != "axes"])
    ax = summary["axes"]
    t3 = table("design-space axes (every combination is a chip; the area window below filters them)",
               ["axis", "values"], [(k, ", ".join(map(str, v))) for k, v in ax.items()], left=True)
    lo = summary["min_fraction"] * summary["budget_mm2"]
    t4 = table("what the area budget filters", ["rule"], [
        (f"a chip is kept when {summary['min_fraction']:g} x budget <= area <= budget, i.e. {lo:.2f} to "
         f"{summary['budget_mm2']:.2f} mm^2",),
        ("the lower bound keeps the search on chips that use the budget; it is waived for chips with one tensor "
         "core or one vector core",),
        ("a larger --budget-mm2 raises the lower bound too, so it can keep FEWER chips: small chips drop out",),
        (f"{summary['candidates']:,} of {summary['raw_points']:,} raw points kept",)], left=True)
    return _out(args, data, t1, t2, t3, t4)


def cmd_estimate(args) -> int:
    api.check_ranges(mbs=args.mbs, seq=args.seq, tp=args.tp)
    e = api.estimate(args.model, args.accelerator, args.mbs, args.seq, args.tp, args.sequence_parallel,
                     args.recompute, args.cluster)
    ops = table(f"{e.model} on {e.accelerator.name}: per-op latency", ["layer", "dir", "op", "unit", "FLOPs", "bytes",
                                                                       "1 core", "all cores"],
                [(o.layer, o.direction, o.name, o.resource, si(o.flops), si(o.bytes_moved, "B"),
                  si(o.latency_one_core_s, "s"), si(o.latency_all_cores_s, "s")) for o in e.ops])
    totals = table("per-layer totals (ops one after another on all cores)", ["layer", "direction", "time"],
                   [(k[0], k[1], si(v, "s")) for k, v in e.layer_totals_s.items()])
    data = {"model": e.model, "accelerator": e.accelerator.name, "setting": e.setting, "ops": e.ops,
            "layer_totals_s": [{"layer": k[0], "direction": k[1], "time_s": v} for k, v in e.layer_totals_s.items()]}
    return _out(args, data, ops, totals)


def cmd_schedule(args) -> int:
    api.check_ranges(mbs=args.mbs, seq=args.seq, tp=args.tp, time_limit=args.time_limit)
    if args.gantt:
        from phaze.report.gantt import check_gantt_path
        check_gantt_path(args.gantt)
    res = api.schedule_layers(args.model, args.accelerator, args.mbs, args.seq, args.tp, args.sequence_parallel,
                              args.recompute, tuple(args.layer) if args.layer else None, args.time_limit, args.cluster)
    if args.gantt:
        from phaze.report.gantt import write_gantt
        pick = next((r for r in res if r.layer == "block" and r.direction == "bwd"), res[-1])
        written = write_gantt(pick.ops, args.gantt, f"{args.model}: {pick.layer} {pick.direction} on {args.accelerator}")
        if not args.json:
            print(f"Gantt chart of {pick.layer} {pick.direction} written to {written}")
    data = [{"layer": r.layer, "direction": r.direction, "makespan_s": r.makespan_s, "lower_bound_s": r.lower_bound_s,
             "status": r.status, "gap": r.gap, "solve_time_s": r.solve_time_s, "utilization": r.utilization,
             "ops": [{"name": o.name, "kind": o.kind, "start_s": o.start_s, "end_s": o.end_s, "cores": list(o.cores)}
                     for o in r.ops]} for r in res]
    t = table(f"{args.model} on {args.accelerator}: per-layer schedules",
              ["layer", "dir", "ops", "makespan", "lower bound", "status", "gap", "solve time", "TC util", "VC util",
               "net util"],
              [(r.layer, r.direction, len(r.ops), si(r.makespan_s, "s"), si(r.lower_bound_s, "s"), r.status,
                f"{r.gap:.2%}", si(r.solve_time_s, "s"), f"{r.utilization['tc']:.0%}", f"{r.utilization['vc']:.0%}",
                f"{r.utilization['net']:.0%}") for r in res])
    return _out(args, data, t)


def _runtime(args) -> Runtime:
    """The runtime flags as one Runtime (its own checks: one line each)."""
    kw = dict(attention=args.attention, precision=args.precision, tp_overlap=args.tp_overlap,
              tp_overlap_config=args.tp_overlap_config, grad_dtype=args.grad_dtype,
              optimizer_state=args.optimizer_state, deterministic=args.deterministic,
              grad_accum_fusion=not args.no_grad_accum_fusion, moe_dispatcher=args.moe_dispatcher,
              moe_routing=args.moe_routing, moe_a2a_overlap=args.moe_a2a_overlap)
    if args.dp_overlap is not None:
        kw["dp_overlap"] = args.dp_overlap
    if args.memory_reserve_gib is not None:
        kw["memory_reserve_bytes"] = args.memory_reserve_gib * 2**30  # GiB
    return Runtime(**kw)


def _plan_space(args) -> PlanSpace:
    """``phaze plan``'s space: PlanSpace() with the flags given."""
    kw = {}
    if args.mbs:
        kw["microbatch_sizes"] = tuple(args.mbs)
    if args.recompute:
        kw["recompute_modes"] = tuple(args.recompute)
    if args.cp:
        kw["cp_values"] = tuple(args.cp)
    if args.ep:
        kw["ep_values"] = tuple(args.ep)
    if args.etp:
        kw["etp_values"] = tuple(args.etp)
    if args.zero:
        kw["zero"] = tuple(args.zero)
    return PlanSpace(**kw)


def _mfu(e) -> str:
    """The MFU cell: an FP8 plan's says its peak is the BF16 one (MFU_HELP)."""
    return f"{e.mfu:.1%}" + (" of BF16 peak" if e.plan.precision == "fp8" else "")


def _eval_rows(evs) -> list[tuple]:
    return [(e.plan.describe() if hasattr(e.plan, "describe") else "",
             f"{e.devices_used}/{e.devices_given}" if e.devices_given else f"{e.devices_used}",
             si(e.iteration_time_s, "s"),
             f"{e.throughput_seq_per_s:.2f}", f"{e.tokens_per_s_per_device:,.0f}", f"{e.model_tflops_per_device:.1f}",
             _mfu(e),
             f"{gib(e.memory_bytes_per_device)} of {gib(e.memory_capacity_bytes)}",
             "yes" if e.fits else f"no (+{gib(e.memory_excess_bytes)} on stage {e.oom_stage})") for e in evs]


_EVAL_COLS = ["plan", "devices used/given", "iteration", "seq/s", "tokens/s/GPU", "model TFLOP/s/GPU", "MFU",
              "memory/dev of usable", "fits"]


def _figures(args, e) -> dict | None:
    """--tokens / --usd-per-gpu-hour figures of ``e`` (None without --tokens)."""
    if args.tokens is None and args.usd_per_gpu_hour is None:
        return None
    return api.training_figures(e, args.accelerator, args.tokens, args.usd_per_gpu_hour)


def _check_figure_args(args) -> None:
    """Bad --tokens / --usd-per-gpu-hour fail before any work."""
    if args.tokens is not None:
        api.parse_count(args.tokens)
    if args.usd_per_gpu_hour is not None:
        api.check_price(args.usd_per_gpu_hour)
        if args.tokens is None:
            raise ConfigError("--usd-per-gpu-hour prices the GPU-hours of --tokens; give --tokens too")


def _figures_table(f: dict, e) -> object:
    rows = [("tokens", f"{f['tokens']:.4g}"), ("tokens/s/GPU", f"{f['tokens_per_s_per_device']:,.0f}"),
            ("time to train", f"{f['train_days']:,.2f} days"), ("GPU-hours (devices used x hours)",
                                                               f"{f['gpu_hours']:,.0f}"),
            ("energy", f"{f['energy_mwh']:,.1f} MWh ({f['energy_basis']})")]
    if "cost_usd" in f:
        rows.append(("cost", f"${f['cost_usd']:,.0f} at ${f['usd_per_gpu_hour']:g} per GPU-hour"))
    rows.append(("MFU definition", f["mfu_definition"]))
    return table(f"training run of the plan on {e.devices_used} devices", ["figure", "value"], rows, left=True)


def _write_emit(args, text: str) -> None:
    from pathlib import Path

    try:
        Path(args.emit_file).write_text(text, encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"--emit-file {args.emit_file}: cannot write: {err.strerror}") from None


def _breakdown_table(e) -> object:
    return table("per-stage breakdown (per microbatch unless noted)",
                 ["stage", "layers", "recompute", "fwd", "bwd", "p2p", "memory", "in flight",
                  "DP sync (exposed + compute lost)", "optimizer"],
                 [(s.stage, " ".join(f"{a}-{b - 1}" for a, b in s.layers), s.recompute, si(s.fwd_s, "s"),
                   si(s.bwd_s, "s"),
                   si(s.p2p_s, "s"), gib(s.memory_bytes), f"{s.in_flight_microbatches:g}",
                   si(s.dp_exposed_s, "s"), si(s.optimizer_step_s, "s")) for s in e.stages])


def _setting_table(title: str, rows) -> object:
    return table(title, ["assumption", "value"], rows, left=True)


def cmd_plan(args) -> int:
    api.check_html_path(args.html)
    api.check_emit_file(args.emit_file)
    if args.emit_file and not args.emit:
        raise ConfigError("--emit-file writes the --emit settings; give --emit megatron|nemo|torchtitan too")
    _check_figure_args(args)
    # The plan first, then any output: bad input (or no possible plan) leaves stdout empty, not half a result.
    where = (args.model, args.accelerator, args.devices, args.global_batch, args.cluster)
    res = api.plan(*where, runtime=_runtime(args), space=_plan_space(args), seq_len=args.seq, top_k=args.top)
    launch = api.launch_settings(res.best, args.emit, args.model, args.seq) if args.emit else None
    figures = _figures(args, res.best)
    if not args.json:
        print_tables(_setting_table("setting", api.plan_setting(res, *where, seq_len=args.seq)))
    if args.html:
        written = api.plan_report(res, args.html, *where, seq_len=args.seq, framework=args.emit or "megatron")
        if not args.quiet:
            print(f"phaze plan: HTML report written to {written}", file=sys.stderr)
    text = None
    if launch is not None:
        from phaze.report.launch import launch_text
        text = launch_text(launch, args.emit)
        if args.emit_file:
            _write_emit(args, text)
            if not args.quiet:
                print(f"phaze plan: {args.emit} launch settings written to {args.emit_file}", file=sys.stderr)
    base_rows = [(b.name,) + (_eval_rows([b.evaluation])[0] if b.evaluation is not None else
                              ("-",) * (len(_EVAL_COLS) - 1) + (f"not built: {b.reason}",))
                 + (b.note or b.reason or "",) for b in res.baselines]
    t1 = table("best plan and alternatives", _EVAL_COLS, _eval_rows((res.best,) + tuple(res.alternatives)))
    t2 = table("baselines (evaluated separately)", ["baseline"] + _EVAL_COLS + ["note"], base_rows)
    if args.json:
        data = res.to_dict()
        for d, ev in zip([data["best"], *data["alternatives"]], (res.best, *res.alternatives)):
            d["evaluate_args"] = api.evaluate_args(ev.plan)
        if figures:
            data["best"].update(figures)
        if launch is not None:
            data["launch"] = {args.emit: {k: v for k, v in launch.items() if k != "comments"}}
        print(dumps(data))
        return 0
    tables = [t1, _breakdown_table(res.best), t2] + ([_figures_table(figures, res.best)] if figures else [])
    print_tables(*tables)
    if text is not None and not args.emit_file:
        print(f"\n# {args.emit} launch settings of the best plan\n" + text, end="")
    return 0


def _zero_stage(args) -> int:
    """``--zero N``, or 1 for its alias ``--zero1``."""
    if args.zero1 and args.zero not in (None, 1):
        raise ConfigError(f"--zero1 is --zero 1 but --zero {args.zero} was given too; keep one of them")
    return 1 if args.zero1 else (args.zero or 0)


def cmd_evaluate(args) -> int:
    _check_figure_args(args)
    if args.tp_overlap and args.tp > 1 and not args.sequence_parallel:  # asked for, not the default
        raise ConfigError("--tp-overlap needs sequence parallelism (Transformer Engine overlaps the all-gather / "
                          "reduce-scatter pairs of SP); add --sequence-parallel")
    shape = api.PlanShape(args.tp, args.pp, args.dp, args.mbs, args.interleave, args.recompute,
                          args.sequence_parallel, _zero_stage(args), args.cp, args.ep, args.etp,
                          tuple(args.stage_layers) if args.stage_layers else None)
    e = api.evaluate_plan(args.model, args.accelerator, args.devices, args.global_batch, shape, args.cluster,
                          _runtime(args), args.seq)
    figures = _figures(args, e)
    t1 = table("plan", _EVAL_COLS, _eval_rows([e]))
    t2 = table("iteration breakdown", ["part", "time"],
               [(k, si(getattr(e, k), "s")) for k in ("pipeline_s", "steady_s", "bubble_s", "p2p_s",
                                                      "dp_allreduce_s", "optimizer_step_s", "iteration_time_s")])
    data = e.to_dict()
    if figures:
        data.update(figures)
    return _out(args, data, t1, t2, _breakdown_table(e), *([_figures_table(figures, e)] if figures else []))


def cmd_validate(args) -> int:
    if sum(bool(x) for x in (args.chip, args.moe, getattr(args, "held_out", None), args.cases)) > 1:
        raise ConfigError("validate: --chip, --moe, --held-out and --cases each choose the cases; give one of them")
    if args.chip:
        return _validate_chip(args)
    if args.moe:
        return _validate_moe(args)
    held = getattr(args, "held_out", None)
    if held and args.cases:
        raise ConfigError("validate: --held-out and --cases each choose the cases; give one of them")
    cases = {"1": "held-out", "2": "held-out-2", "3": "held-out-3", "4": "held-out-4"}[held] if held else args.cases
    r = api.validate(cases, quiet=args.quiet or args.json)
    tables = []
    for g in r.groups:
        rows = [(x.case, x.plan.describe(), f"{x.predicted_s:.3f} s", f"{x.measured_s:.3f} s", f"{x.error_pct:+.2f}%",
                 "yes" if x.fits else f"NO ({x.memory_gib:.1f} > {x.capacity_gib:.1f} GiB)")
                for x in r.time if x.group == g.group]
        rows.append(("mean / max |error|", "", "", "", f"{g.time_mean_abs_pct:.2f}% / {g.time_max_abs_pct:.2f}%",
                     f"{g.fitting} of {g.cases}"))
        tables.append(table(f"iteration time, {g.group}: predicted vs measured",
                            ["case", "plan", "predicted", "measured", "error", "fits"], rows))
    if r.memory:
        tables.append(table("memory per GPU: published first-stage blocks (Korthikanti et al.) or a run's measured "
                            "peak on its last stage",
                            ["case", "quantity", "mode", "predicted", "measured", "error", "our whole stage"],
                            [(x.case, x.quantity, x.mode, f"{x.predicted_gib:.3f} GiB", f"{x.measured_gib:.3f} GiB",
                              f"{x.error_pct:+.2f}%", f"{x.stage_total_gib:.2f} GiB") for x in r.memory]))
    summary = [(f"iteration time, {g.group} ({g.cases})", f"{g.time_mean_abs_pct:.2f}%", f"{g.time_max_abs_pct:.2f}%",
                f"{g.fitting} of {g.cases}") for g in r.groups]
    summary.append((f"iteration time, all ({len(r.time)})", f"{r.time_mean_abs_pct:.2f}%",
                    f"{r.time_max_abs_pct:.2f}%", f"{sum(g.fitting for g in r.groups)} of {len(r.time)}"))
    groups = list(dict.fromkeys(x.group for x in r.memory if x.group))
    for g in groups if len(groups) > 1 else ():
        errs = [abs(x.error_pct) for x in r.memory if x.group == g]
        summary.append((f"memory, {g} ({len(errs)})", f"{sum(errs) / len(errs):.2f}%", f"{max(errs):.2f}%", ""))
    if r.memory:
        summary.append(("memory" + (f", all ({len(r.memory)})" if len(groups) > 1 else ""),
                        f"{r.memory_mean_abs_pct:.2f}%", f"{r.memory_max_abs_pct:.2f}%", ""))
    tables.append(table("summary", ["quantity", "mean |error|", "max |error|", "fits"], summary))
    return _out(args, r.to_dict(), *tables)


def _validate_chip(args) -> int:
    if args.cases or getattr(args, "held_out", False):
        raise ConfigError("validate: --cases and --held-out are for the published measurements; --chip uses the "
                          "shipped GEMM panel (drop one of them)")
    r = api.validate_chip()

    def cyc(v):
        return "-" if v is None else f"{v:,.0f}"

    def pct(v):
        return "-" if v is None else f"{v:+.1f}%"

    t1 = table(f"GEMM cycles on one tensor core: phaze vs ZigZag {r.tools.get('zigzag-dse', '?')} and "
               f"SCALE-Sim {r.tools.get('scalesim', '?')}",
               ["case", "M x K x N", "phaze", "ZigZag", "error", "SCALE-Sim", "error"],
               [(c.name, f"{c.m}x{c.k}x{c.n}", cyc(c.phaze_cycles), cyc(c.zigzag_cycles), pct(c.zigzag_error_pct),
                 cyc(c.scalesim_cycles), pct(c.scalesim_error_pct)) for c in r.cases])
    goal = "met" if r.goal_met else "NOT met"
    rows = [("ZigZag", r.zigzag_cases, f"{r.zigzag_mean_abs_pct:.1f}%", f"{r.zigzag_max_abs_pct:.1f}%",
             r.zigzag_within_goal)]
    if r.zigzag_v3:  # the reference of the script's configuration 3 (a banked GLB's row rule alone)
        v3 = r.zigzag_v3
        rows.append(("ZigZag, configuration v3", v3["cases"], f"{v3['mean_abs_pct']:.1f}%",
                     f"{v3['max_abs_pct']:.1f}%", v3["within_goal"]))
    rows.append(("SCALE-Sim", r.scalesim_cases, f"{r.scalesim_mean_abs_pct:.1f}%", f"{r.scalesim_max_abs_pct:.1f}%",
                 "-"))
    t2 = table("summary (goal: every case within 15% of ZigZag, mean within 5%: " + goal + ")",
               ["tool", "cases", "mean |error|", "max |error|", "within 15%"], rows)
    e = api.validate_chip_energy()
    uj = lambda pj: "-" if pj is None else f"{pj / 1e6:,.3f}"  # noqa: E731  (pJ shown in uJ)
    t3 = table(f"GEMM energy on one tensor core (uJ; MAC + GLB + accumulator + operand buffer): phaze vs "
               f"ZigZag {e.tool} under phaze's per-access energies, on phaze's schedule (or ZigZag's best mapping "
               f"where it cannot take that schedule's loops whole: 'search')",
               ["case", "phaze", "ZigZag", "reference", "error", "acc / ZigZag", "GLB / ZigZag", "vs ZigZag's best"],
               [(c.name, uj(c.phaze_total_pj), uj(c.zigzag_total_pj), c.reference, pct(c.error_pct),
                 _ratio(c, "accumulator"), _ratio(c, "glb"), pct(c.min_error_pct)) for c in e.cases])
    t4 = table("energy summary (goal: every case within 15% of ZigZag, mean within 5%: "
               + ("met" if e.goal_met else "NOT met") + ")",
               ["cases", "mean |error|", "max |error|", "within 15%", "lowest error"],
               [(len(e.cases), f"{e.mean_abs_pct:.1f}%", f"{e.max_abs_pct:.1f}%", e.within_goal,
                 f"{e.lowest_pct:+.1f}%")])
    return _out(args, dict(r.to_dict(), energy=e.to_dict()), t1, t2, t3, t4)


def _validate_moe(args) -> int:
    r = api.validate_moe()
    d = r.to_dict()
    rows = [(x.case, x.plan, f"{x.predicted_s:.3f} s", f"{x.measured_s:.3f} s", f"{x.error_pct:+.2f}%",
             "yes" if x.fits else f"NO ({x.memory_gib:.1f} > {x.capacity_gib:.1f} GiB)", x.verified) for x in r.runs]
    g = d["goal"]
    rows.append(("mean / max |error|", "", "", "", f"{r.time_mean_abs_pct:.2f}% / {r.time_max_abs_pct:.2f}%",
                 f"{d['fitting']} of {len(r.runs)}", ""))
    t = table(f"MoE iteration time, dev set: predicted vs measured (goal {g['mean_abs_pct']:g}% mean / "
              f"{g['max_abs_pct']:g}% max, every plan fits: {'met' if g['met'] else 'NOT met'})",
              ["run", "plan", "predicted", "measured", "error", "fits", "verified"], rows)
    return _out(args, d, t)


def _ratio(case, part: str) -> str:
    z = (case.zigzag_pj or {}).get(part)
    return "-" if not z else f"{case.phaze_pj[part] / z:.2f}"


def _tdp(value):
    """--tdp-w: 'reference' (the default cap), 'none' (no cap) or a positive finite number of watts."""
    import math

    if value in (None, "reference"):
        return "reference"
    if str(value).lower() == "none":
        return None
    try:
        w = float(value)
    except ValueError:
        w = math.nan
    if not math.isfinite(w) or w <= 0:
        raise ConfigError(f"--tdp-w must be a positive finite number of watts, 'reference' or 'none', got {value!r}")
    return w


def _search_kw(args) -> dict:
    return dict(models=args.model, space=args.space, budget_mm2=args.budget_mm2, devices=args.devices,
                global_batch=args.global_batch, microbatch_sizes=args.mbs, tp_values=args.tp, hbm_gib=args.hbm_gib,
                recompute_modes=args.recompute, cluster=args.cluster, pareto=args.pareto,
                objective=getattr(args, "objective", None) or "throughput", tdp_w=_tdp(getattr(args, "tdp_w", "reference")),
                seq_len=getattr(args, "seq", None), plan_space=getattr(args, "plan_space", None))


def _search_and_report(args, kw: dict, store: str, html: str | None, plot: str | None = None) -> int:
    """Check every output first, print the setting, search, then write the reports and print the tables."""
    api.check_html_path(html)
    export = getattr(args, "export_chip", None)
    api.check_export_path(export)
    if plot:
        from phaze.report.plots import check_plot_dir
        check_plot_dir(plot)
    spec = api.search_spec(**kw)
    if not args.json:
        print_tables(_setting_table("setting (what this search assumes)", api.search_setting(spec)))
        sys.stdout.flush()
    res = api.search(store=store, workers=getattr(args, "workers", 2), backend=getattr(args, "backend", "local"),
                     address=getattr(args, "address", None), resume=getattr(args, "resume", False),
                     prune=not getattr(args, "no_prune", False), quiet=args.json or args.quiet, **kw)
    notes = []
    if plot:
        from phaze.report.plots import search_plots
        notes.append("plots written: " + ", ".join(search_plots(res, plot)))
    if html:
        notes.append(f"HTML report written to {api.search_report(res, html)} (open it in a browser)")
    if export:
        notes.append(f"winning chip written to {api.export_chip(res, export)} (use --accelerator {export})")
    from phaze.report.search import search_tables
    code = _out(args, res.to_dict(), *search_tables(res))
    if not args.json:
        for n in notes:
            print(n)
    return code


def cmd_search(args) -> int:
    if args.baseline == "spotlight":
        return _spotlight(args)
    if args.objective in ("latency", "edp"):
        raise ConfigError(f"--objective {args.objective} is an option of --baseline spotlight; the co-search takes "
                          f"throughput, perf-per-area, perf-per-watt or perf-per-dollar")
    return _search_and_report(args, _search_kw(args), args.store, args.html, args.plot)


def _spotlight(args) -> int:
    from phaze.report.reproduce import spotlight_tables

    for flag in ("html", "plot", "pareto", "resume", "no_prune", "export_chip"):
        if getattr(args, flag):
            raise ConfigError(f"--{flag.replace('_', '-')} is an option of the co-search, not of --baseline "
                                  f"spotlight")
    if args.objective not in (None, "latency", "edp"):
        raise ConfigError(f"--objective {args.objective} is an option of the co-search; --baseline spotlight takes "
                          f"latency or edp")
    if args.tdp_w != "reference":
        raise ConfigError("--tdp-w is an option of the co-search, not of --baseline spotlight")
    kw = {k: v for k, v in _search_kw(args).items() if k not in ("models", "pareto", "objective", "tdp_w")}
    res = api.spotlight(args.model, seed=args.seed, samples=args.samples, objective=args.objective or "latency",
                        workers=args.workers, quiet=args.json or args.quiet, **kw)
    return _out(args, res.to_dict(), *spotlight_tables(res))


def cmd_reproduce(args) -> int:
    from phaze.report.reproduce import reproduce_tables

    res, written = api.reproduce(args.models, args.store, args.resume, args.workers, args.seed, args.samples,
                                 args.json or args.quiet, args.out, args.html, args.space, seq_len=args.seq)
    if args.json:
        from phaze.report.reproduce import json_data
        print(dumps(json_data(res)))
        return 0
    print_tables(*reproduce_tables(res))
    print("written: " + ", ".join(written))
    return 0


def cmd_report(args) -> int:
    written = api.report(args.html, store=args.store, reproduce=args.reproduce)
    if args.json:
        print(dumps({"html": written}))
    else:
        print(f"HTML report written to {written} (open it in a browser)")
    return 0


def cmd_results(args) -> int:
    from phaze.report.search import results_rows

    rows = api.results(args.store, args.top, args.model)
    if args.action == "export":
        if args.format == "csv":
            import csv
            import sys
            flat = [results_rows(r) for r in rows]
            w = csv.DictWriter(sys.stdout, fieldnames=list(flat[0]) if flat else ["chip"])
            w.writeheader()
            w.writerows(flat)
        else:
            print(dumps([r.to_dict() for r in rows]))
        return 0
    flat = [results_rows(r) for r in rows]
    cols = list(flat[0]) if flat else ["chip"]
    scope = f" for {args.model} alone" if args.model else ""
    return _out(args, [r.to_dict() for r in rows], table(f"{args.store}: top {args.top} exactly evaluated candidates{scope}", cols,
                                  [[r[c] for c in cols] for r in flat]))


def cmd_demo(args) -> int:
    """The main job on a built-in default: a co-search of GPT-2 XL over the paper's full design space, then
    its HTML report."""
    import os
    import tempfile

    d = tempfile.mkdtemp(prefix="phaze-demo-")
    if not args.json:
        print("phaze demo: co-search of gpt2-xl over the default space (the paper's setting, each chip's plans in "
              f"the full plan space); its HTML report goes to {os.path.join(d, 'demo.html')}", flush=True)
    kw = dict(models=("gpt2-xl",), space="default", budget_mm2=None, devices=1024, global_batch=4096,
              microbatch_sizes=(1, 2, 4, 8), tp_values=None, hbm_gib=(32, 64, 80), recompute_modes=None,
              cluster="flat-4gib", pareto=False, plan_space="full")
    return _search_and_report(args, kw, os.path.join(d, "demo.db"), os.path.join(d, "demo.html"))
