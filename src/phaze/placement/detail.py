"""What a report draws of one plan beyond its evaluation: the per-layer schedules of a transformer block on a
designed chip, as Gantt data (plain frozen data; ``phaze.report`` only formats it).

The block is scheduled under the plan's own setting: its microbatch, widths, the recompute mode most stages use,
and its runtime (attention kernel, precision, overlaps), so the Gantt shows the block the plan runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.hardware.accelerator import Accelerator

# the co-search's per-layer limit (search.run.run_search default)
SCHEDULE_TIME_LIMIT_S = 1.0


@dataclass(frozen=True)
class GanttOp:
    name: str
    kind: str  # "tc" | "vc" | "net"
    start_s: float
    end_s: float
    cores: int


@dataclass(frozen=True)
class LayerGantt:
    layer: str
    direction: str
    makespan_s: float
    status: str
    ops: tuple[GanttOp, ...]


@dataclass(frozen=True)
class PlanDetail:
    """One model's plan on one chip: ``evaluation`` is ``Evaluation.to_dict()``; ``schedules`` the block's
    forward and backward schedules (empty for GPU presets, costed as kernels one after another)."""

    model: str
    accelerator: Accelerator
    devices_given: int
    evaluation: dict
    schedules: tuple[LayerGantt, ...]
    stored_seq_per_s: float | None = None  # what the search store says (None for a plan run)


def block_schedules(model, setting, accelerator: Accelerator, tier) -> tuple[LayerGantt, ...]:
    """Optimal schedules of one transformer block of ``setting``, forward and backward, on ``accelerator``."""
    from phaze.schedule import build_problem, solve
    from phaze.workload.graphs import layer_graph

    out = []
    for direction in ("fwd", "bwd"):
        problem = build_problem(layer_graph(model, setting, "block", direction), accelerator, tier)
        s = solve(problem, time_limit_s=SCHEDULE_TIME_LIMIT_S)
        ops = tuple(GanttOp(o.name, o.kind, o.start_s, o.end_s, len(o.cores)) for o in s.ops)
        out.append(LayerGantt("block", direction, s.makespan_s, s.status, ops))
    return tuple(out)


def plan_block_setting(model, plan, seq_len: int | None = None):
    """The TrainSetting of the plan's block as the report draws it: the recompute mode most stages use, the
    plan's widths and its runtime."""
    from phaze.placement.layer_costs import setting_for

    modes = plan.recompute_modes
    mode = max(set(modes), key=lambda m: (modes.count(m), m))
    return setting_for(model, plan.microbatch_size, plan.tp, plan.sequence_parallel, mode, seq_len,
                       runtime=plan.runtime, cp=plan.cp, ep=plan.ep, etp=plan.etp)


def plan_detail(model, accelerator: Accelerator, cluster, global_batch: int, plan, *, devices_given: int,
                evaluation: dict | None = None, stored_seq_per_s: float | None = None,
                seq_len: int | None = None) -> PlanDetail:
    """Evaluate ``plan`` (unless ``evaluation`` is given) and, on a designed chip, schedule its block."""
    from phaze.placement.evaluation import evaluate
    from phaze.placement.layer_costs import resolve_time_model

    if evaluation is None:
        evaluation = evaluate(plan, model, accelerator, cluster, global_batch, seq_len=seq_len,
                              schedule_time_limit_s=SCHEDULE_TIME_LIMIT_S).to_dict()
    schedules: tuple[LayerGantt, ...] = ()
    if resolve_time_model("auto", accelerator) == "scheduled":
        tier = cluster.tier_for_group(plan.tp, 1) if plan.tp > 1 else None
        schedules = block_schedules(model, plan_block_setting(model, plan, seq_len), accelerator, tier)
    return PlanDetail(model.name, accelerator, devices_given, evaluation, schedules, stored_seq_per_s)
