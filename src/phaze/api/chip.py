"""The public API's one-chip calls: per-op latency (``estimate``) and optimal per-layer schedules
(``schedule_layers``), and the chip model's validation against ZigZag and SCALE-Sim."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.api.resolve import check_ranges, resolve_accelerator, resolve_model, resolve_network, tp_tier
from phaze.api.workload import make_setting
from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import DIRECTIONS, LAYER_KINDS, ModelConfig
from phaze.workload.runtime import TrainSetting


@dataclass(frozen=True)
class OpEstimate:
    layer: str
    direction: str
    name: str
    resource: str
    flops: float
    bytes_moved: float
    latency_one_core_s: float
    latency_all_cores_s: float


@dataclass(frozen=True)
class Estimate:
    model: str
    accelerator: Accelerator
    setting: TrainSetting
    ops: tuple[OpEstimate, ...]
    layer_totals_s: dict  # (layer, direction) -> sum of all-core latencies (ops one after another)


def estimate(model: str | ModelConfig, accelerator: str | Accelerator, mbs: int = 1, seq: int | None = None,
             tp: int = 1, sequence_parallel: bool = False, recompute: str = "none",
             cluster: str | None = None) -> Estimate:
    """Per-op latency on one core and on all cores of its kind, and per-layer sequential totals."""
    from phaze.cost import op_latency_s
    from phaze.workload.graphs import layer_graph
    from phaze.workload.ops import Collective, Gemm, op_resource

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    tier = tp_tier(cluster, acc, tp, resolve_network(accelerator))
    arrays = acc.as_arrays()
    rows, totals = [], {}
    for kind in LAYER_KINDS:
        for direction in DIRECTIONS:
            g = layer_graph(m, setting, kind, direction)
            total = 0.0
            for op in g.ops:
                res = op_resource(op)
                if isinstance(op, Collective):
                    one = all_ = float(op_latency_s(op, arrays, 1, tier)[0])
                else:
                    n = acc.num_tc if isinstance(op, Gemm) else acc.num_vc
                    one = float(op_latency_s(op, arrays, 1)[0])
                    all_ = float(op_latency_s(op, arrays, n)[0])
                total += all_
                rows.append(OpEstimate(kind, direction, op.name, res, float(op.flops),
                                       float(getattr(op, "bytes_moved", getattr(op, "bytes", 0))), one, all_))
            totals[(kind, direction)] = total
    return Estimate(m.name, acc, setting, tuple(rows), totals)


@dataclass(frozen=True)
class LayerSchedule:
    layer: str
    direction: str
    makespan_s: float
    lower_bound_s: float
    status: str
    gap: float
    solve_time_s: float
    utilization: dict  # resource -> busy core-seconds / (cores * makespan)
    ops: tuple  # ScheduledOp
    # with shared GLB/HBM bandwidth: the solvers' makespan at full bandwidth (the schedule is then re-timed, and
    # its status is "optimal" only when the re-timed makespan meets the lower bound; else "feasible")
    relaxed_makespan_s: float | None = None


def schedule_layers(model: str | ModelConfig, accelerator: str | Accelerator, mbs: int = 1, seq: int | None = None,
                    tp: int = 1, sequence_parallel: bool = False, recompute: str = "none",
                    layers: tuple[str, ...] | None = None, time_limit_s: float = 5.0,
                    cluster: str | None = None) -> list[LayerSchedule]:
    """The optimal (or bounded) schedule of each layer kind, forward and backward, on one chip."""
    from phaze.schedule import build_problem, solve
    from phaze.schedule import validate as check_schedule
    from phaze.workload.graphs import layer_graph

    check_ranges(time_limit=time_limit_s)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    for kind in layers or ():
        if kind not in LAYER_KINDS:
            raise ConfigError(f"unknown layer kind {kind!r}; choose from {', '.join(LAYER_KINDS)}")
    tier = tp_tier(cluster, acc, tp, resolve_network(accelerator))
    out = []
    for kind in layers or LAYER_KINDS:
        for direction in DIRECTIONS:
            problem = build_problem(layer_graph(m, setting, kind, direction), acc, tier)
            sched = solve(problem, time_limit_s=time_limit_s)
            check_schedule(problem, sched)
            caps = {"tc": acc.num_tc, "vc": acc.num_vc, "net": 1}
            util = {k: sched.core_utilization(k, cap) for k, cap in caps.items()}
            status = "optimal" if sched.proven_optimal else ("feasible" if sched.status == "optimal" else sched.status)
            out.append(LayerSchedule(kind, direction, sched.makespan_s, sched.lower_bound_s, status, sched.gap,
                                     sched.solve_time_s, util, sched.ops, sched.relaxed_makespan_s))
    return out


def arch(space: str = "default", budget_mm2: float | None = None) -> dict:
    """The chip presets (fields, area, peaks) and the design space (``"default"`` or a space file) under
    ``budget_mm2``: each axis's values, the area window and how many chips it keeps."""
    from dataclasses import asdict

    from phaze.hardware.area import area_mm2
    from phaze.hardware.presets import ACCELERATORS
    from phaze.hardware.space import space_summary

    check_ranges(budget_mm2=budget_mm2)
    presets = [{"name": name, "num_tc": acc.num_tc, "tc": f"{acc.tc_rows}x{acc.tc_cols}", "num_vc": acc.num_vc,
                "vc_width": acc.vc_width, "glb_bytes": acc.glb_bytes, "hbm_bytes": acc.hbm_bytes,
                "hbm_bandwidth_Bps": acc.hbm_bandwidth_Bps, "area_mm2": float(area_mm2(acc.as_arrays())[0]),
                "peak_matrix_flops": acc.peak_matrix_flops, "peak_vector_flops": acc.peak_vector_flops,
                "chip_file": asdict(acc)} for name, acc in ACCELERATORS.items()]
    return dict(space_summary(space, budget_mm2), presets=presets)


def chip_file(accelerator: str) -> tuple[str, dict]:
    """A preset (or chip file) as (name, the fields of a chip file: docs/chip-file.md), to save and edit."""
    from dataclasses import asdict

    from phaze.hardware.presets import get_accelerator

    acc = get_accelerator(accelerator)
    return acc.name, asdict(acc)
