"""The report's pictures of one plan (devices, layers, memory, bubble, time breakdown), its layer schedules
(a Gantt chart per core kind) and the Pareto front, as inline SVG strings."""
from __future__ import annotations

from phaze.report.details import iteration_parts
from phaze.report.svg import (BLUE, GREEN, GREY, ORANGE, PURPLE, SKY, VERMILLION, YELLOW, Axes, Frame, Series, esc,
                              hbars, scatter, svg)
from phaze.units import GiB

STAGE_COLORS = (BLUE, ORANGE)  # alternate so neighbouring stages are told apart
TIME_COLORS = (BLUE, SKY, GREEN, VERMILLION, PURPLE, YELLOW)
MEM_PARTS = (("weight_bytes", "weights", BLUE), ("grad_bytes", "gradients", SKY),
             ("optimizer_bytes", "optimizer state", GREEN), ("activation_bytes", "stashed activations", ORANGE),
             ("working_bytes", "recompute working set", PURPLE))
KIND_COLORS = {"tc": BLUE, "vc": ORANGE, "net": GREEN}
KIND_NAMES = {"tc": "tensor cores", "vc": "vector cores", "net": "network (TP collectives)"}


def si_s(v: float) -> str:
    a = abs(v)
    if a >= 1:
        return f"{v:.3g} s"
    if a >= 1e-3:
        return f"{v * 1e3:.3g} ms"
    return f"{v * 1e6:.3g} us"


def time_unit(max_s: float) -> tuple[float, str]:
    """(factor, unit) so that times up to ``max_s`` read as plain numbers on an axis."""
    if max_s >= 1:
        return 1.0, "s"
    if max_s >= 1e-3:
        return 1e3, "ms"
    return 1e6, "us"


def _scaled(rows, f: float):
    return [(lbl, [(v * f, c, t) for v, c, t in parts]) for lbl, parts in rows]


def layer_text(ranges, n_layers: int) -> str:
    """Stage layer ranges as 'embedding, blocks 1-12' (layer 0 = embedding, n_layers-1 = head)."""
    parts = []
    for a, b in ranges:
        bits = []
        if a == 0:
            bits.append("embedding")
        lo, hi = max(a, 1), min(b, n_layers - 1)
        if hi > lo:
            bits.append(f"block {lo}" if hi - lo == 1 else f"blocks {lo}-{hi - 1}")
        if b == n_layers:
            bits.append("head")
        parts.append(", ".join(bits))
    return "; ".join(parts)


def _row_px(n: int) -> int:
    return 22 if n <= 16 else 14


def device_map(ev: dict, devices_given: int) -> str:
    """Which devices each pipeline stage occupies (t x d each; Megatron's tp-dp-pp order) and which idle."""
    group = ev["tp"] * ev["dp"]
    n_layers = ev["stages"][-1][1]
    parts = []
    for s in ev["stage_breakdown"]:
        i = s["stage"]
        parts.append((group, STAGE_COLORS[i % 2],
                      f"stage {i}: devices {i * group}-{(i + 1) * group - 1} (t={ev['tp']} x d={ev['dp']}); "
                      f"{layer_text(s['layers'], n_layers)}"))
    unused = devices_given - ev["pp"] * group
    if unused > 0:
        parts.append((unused, GREY, f"{unused} devices unused (no plan using them is better)"))
    return hbars([("devices", parts)], title=f"Pipeline stages over devices: {ev['pp']} stages x {group} devices "
                 f"= {ev['pp'] * group} of {devices_given} used", xlabel="device index",
                 legend_items=[(BLUE, "even stage"), (ORANGE, "odd stage")] + ([(GREY, "unused")] if unused > 0 else []),
                 row_px=30, label_px=80)


def stage_times(ev: dict) -> str:
    """Per stage and microbatch: forward, backward (with recompute) and sends; the layers in the label."""
    n_layers = ev["stages"][-1][1]
    rows = []
    for s in ev["stage_breakdown"]:
        lbl = f"{s['stage']}: {layer_text(s['layers'], n_layers)}"
        rows.append((lbl[:34], [(s["fwd_s"], BLUE, f"stage {s['stage']} forward {si_s(s['fwd_s'])}"),
                               (s["bwd_s"], SKY, f"stage {s['stage']} backward ({s['recompute']} recompute) "
                                                 f"{si_s(s['bwd_s'])}"),
                               (s["p2p_s"], GREEN, f"stage {s['stage']} sends {si_s(s['p2p_s'])}")]))
    f, u = time_unit(max(sum(v for v, _, _ in p) for _, p in rows))
    return hbars(_scaled(rows, f), title="Layers per stage and time per microbatch (the longest stage sets the pace)",
                 xlabel=f"time per microbatch ({u})", row_px=_row_px(len(rows)), label_px=230,
                 legend_items=[(BLUE, "forward"), (SKY, "backward incl. recompute"), (GREEN, "p2p sends")])


def _capacity_label(ev: dict) -> str:
    """'HBM capacity 32 GiB', or with a reserve 'usable 29 GiB of HBM 32 GiB'."""
    cap, reserve = ev["memory_capacity_bytes"], ev.get("memory_reserve_bytes", 0.0)
    if reserve > 0:
        return f"usable {cap / GiB:.0f} GiB of HBM capacity {(cap + reserve) / GiB:.0f} GiB"
    return f"HBM capacity {cap / GiB:.0f} GiB"


def stage_memory(ev: dict) -> str:
    """Memory per device of each stage, by kind, against the HBM capacity."""
    cap = ev["memory_capacity_bytes"]
    rows = []
    for s in ev["stage_breakdown"]:
        parts = [(s[k] / GiB, c, f"stage {s['stage']} {name}: {s[k] / GiB:.2f} GiB") for k, name, c in MEM_PARTS]
        rows.append((f"stage {s['stage']} ({s['in_flight_microbatches']:g} in flight)", parts))
    return hbars(rows, title="Memory per device by stage, against the HBM capacity", xlabel="memory per device (GiB)",
                 row_px=_row_px(len(rows)), label_px=170, vline=(cap / GiB, _capacity_label(ev)),
                 legend_items=[(c, name) for _, name, c in MEM_PARTS])


def stage_bubble(ev: dict) -> str:
    """Over one iteration, each stage's busy time (m x its per-microbatch time) and idle time in the pipeline
    (the bubble it sees), then the gradient sync and optimizer step."""
    m, pipe = ev["num_microbatches"], ev["pipeline_s"]
    rows = []
    for s in ev["stage_breakdown"]:
        busy = m * s["time_per_microbatch_s"]
        idle = max(0.0, pipe - busy)
        rows.append((f"stage {s['stage']}", [
            (busy, BLUE, f"stage {s['stage']} busy {si_s(busy)} ({m} microbatches)"),
            (idle, GREY, f"stage {s['stage']} idle in the pipeline {si_s(idle)}"),
            (s["dp_exposed_s"], VERMILLION, f"stage {s['stage']} exposed gradient sync {si_s(s['dp_exposed_s'])}"),
            (s["optimizer_step_s"], PURPLE, f"stage {s['stage']} optimizer step {si_s(s['optimizer_step_s'])}")]))
    bub = ev["bubble_s"] / ev["iteration_time_s"] if ev["iteration_time_s"] else 0.0
    f, u = time_unit(ev["iteration_time_s"])
    return hbars(_scaled(rows, f), title=f"One iteration per stage: busy, idle (bubble {bub:.1%} of the iteration), "
                 f"sync, optimizer", xlabel=f"time in the iteration ({u})", row_px=_row_px(len(rows)), label_px=80,
                 legend_items=[(BLUE, "busy"), (GREY, "idle (bubble)"), (VERMILLION, "gradient sync"),
                               (PURPLE, "optimizer")])


def time_breakdown(ev: dict) -> str:
    parts = iteration_parts(ev)
    it = ev["iteration_time_s"]
    bars = [(v, TIME_COLORS[i], f"{name}: {si_s(v)} ({v / it:.1%})") for i, (name, v) in enumerate(parts)]
    f, u = time_unit(it)
    return hbars(_scaled([("iteration", bars)], f), title=f"Where the iteration time goes ({si_s(it)})",
                 xlabel=f"time ({u})",
                 row_px=34, label_px=80, legend_items=[(TIME_COLORS[i], n.split(" (")[0]) for i, (n, _) in
                                                       enumerate(parts)], frame_width=900)


def _pack(ops) -> list[list]:
    """Greedy interval packing: ops that overlap in time go to separate sub-rows."""
    rows: list[list] = []
    for op in sorted(ops, key=lambda o: (o.start_s, o.end_s, o.name)):
        for r in rows:
            if r[-1].end_s <= op.start_s + 1e-15:
                r.append(op)
                break
        else:
            rows.append([op])
    return rows


def gantt(g, cores: dict[str, int], title: str) -> str:
    """One lane per core kind; ops running at once in a kind get sub-rows; a bar's opacity is the share of
    that kind's cores the op uses (hover for its name, cores and times)."""
    lanes = [(k, _pack([o for o in g.ops if o.kind == k])) for k in ("tc", "vc", "net")]
    lanes = [(k, rows) for k, rows in lanes if rows]
    n_rows = sum(len(r) for _, r in lanes)
    row_px = 16
    frame = Frame(width=900, height=36 + n_rows * row_px + 8 * len(lanes) + 48, left=170, right=20, top=36, bottom=48)
    end = g.makespan_s or max((o.end_s for o in g.ops), default=1.0)
    ax = Axes(frame, (0.0, end * 1e6), (0.0, 1.0), title=title, xlabel="time in the layer (us)", ylabel="",
              yticks=[])
    body = [ax.frame_svg()]
    y = frame.y1 + 4
    for k, rows in lanes:
        total = max(1, cores.get(k, 1))
        body.append(f'<text x="{frame.x0 - 6}" y="{y + row_px * len(rows) / 2 + 4:.1f}" text-anchor="end">'
                    f'{esc(KIND_NAMES[k])} ({total})</text>')
        for r in rows:
            for o in r:
                x0, x1 = ax.x(o.start_s * 1e6), ax.x(o.end_s * 1e6)
                op = 0.35 + 0.65 * min(1.0, o.cores / total)
                tip = (f"{o.name}: {o.cores} of {total} {KIND_NAMES[k]}, {si_s(o.start_s)} to {si_s(o.end_s)} "
                       f"({si_s(o.end_s - o.start_s)})")
                body.append(f'<rect class="bar" x="{x0:.2f}" y="{y:.1f}" width="{max(x1 - x0, 0.6):.2f}" '
                            f'height="{row_px - 3}" fill="{KIND_COLORS[k]}" fill-opacity="{op:.2f}">'
                            f'<title>{esc(tip)}</title></rect>')
                if x1 - x0 > 7 * len(o.name) + 4:  # white on a dark bar, dark on a pale one
                    cls = "small inbar" if op > 0.6 else "small"
                    body.append(f'<text class="{cls}" x="{x0 + 3:.1f}" y="{y + row_px - 6:.1f}">{esc(o.name)}</text>')
            y += row_px
        body.append(f'<line class="grid" x1="{frame.x0}" x2="{frame.x1}" y1="{y + 3:.1f}" y2="{y + 3:.1f}"/>')
        y += 8
    return svg(frame, "\n".join(body), title)


def plan_figures(d) -> list[str]:
    ev = d.evaluation
    return [device_map(ev, d.devices_given), time_breakdown(ev), stage_times(ev), stage_memory(ev), stage_bubble(ev)]


def busy_shares(g, cores: dict[str, int]) -> dict[str, float]:
    """Per core kind: busy core-seconds over (cores x makespan), the share of that kind's capacity used."""
    out = {}
    for k, n in cores.items():
        busy = sum((o.end_s - o.start_s) * o.cores for o in g.ops if o.kind == k)
        out[k] = busy / (n * g.makespan_s) if g.makespan_s > 0 else 0.0
    return out


def schedule_figures(d) -> list[str]:
    acc = d.accelerator
    cores = {"tc": acc.num_tc, "vc": acc.num_vc, "net": 1}
    out = []
    for g in d.schedules:
        share = busy_shares(g, cores)
        used = ", ".join(f"{KIND_NAMES[k].split(' (')[0]} {v:.0%}" for k, v in share.items()
                         if any(o.kind == k for o in g.ops))
        out.append(gantt(g, cores, f"{d.model}: one transformer block, "
                                   f"{'forward' if g.direction == 'fwd' else 'backward'} ({si_s(g.makespan_s)}, "
                                   f"schedule {g.status}); busy: {used}"))
    return out


def pareto_chart(front: list, others: list, winner, refs: list[tuple[float, float, str]],
                 *, x_key: str, xlabel: str, title: str) -> str:
    """Score against the chip rows' attribute ``x_key`` (area_mm2 or power_w): every exactly evaluated
    candidate, the front, the winner and the references (x, score, label)."""
    def tip(r) -> str:
        plans = "; ".join(f"{o.model}: {o.plan} at {o.throughput_seq_per_s:.4g} seq/s" for o in r.outcomes)
        return (f"chip {r.chip}: {r.num_tc} TC {r.tc_rows}x{r.tc_cols}, {r.num_vc} VC of "
                f"{r.vc_width}, GLB {r.glb_bytes // 2**20} MiB, HBM {r.hbm_gib} GiB; "
                f"{x_key} {getattr(r, x_key):.4g}; score {r.score:.4g}; {plans}")

    def pts(rows):
        return tuple((float(getattr(r, x_key)), float(r.score), tip(r)) for r in rows
                     if getattr(r, x_key) is not None)

    series = [Series("evaluated exactly", pts(others), SKY, radius=2.5),
              Series("Pareto front", pts(front), BLUE, "circle", 3.5, line=True)]
    series += [Series(label, ((x, y, f"{label}: {x_key} {x:.4g}, score {y:.4g}"),), VERMILLION, "square", 5)
               for x, y, label in refs]
    if winner is not None and getattr(winner, x_key) is not None:
        series.append(Series("winner", pts([winner]), ORANGE, "star", 6))
    return scatter(series, title=title, xlabel=xlabel, ylabel="score (throughput / TPUv4-like best plan)")
