"""What the HTML report draws beyond the stored numbers: a plan's evaluation (stages, memory, time
breakdown) and the per-layer schedules behind it, rebuilt from a search store or taken from a plan run.

A search store keeps each candidate's chip fields and its best plan (``plan_json``); the winner's chip is
rebuilt by enumerating the stored design space (so every chip constant is what the search used), and the
plan is evaluated again by ``phaze.placement.evaluate`` with optimal layer schedules. The report shows
both throughputs so a mismatch would be visible (the test suite checks they agree).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from phaze.errors import PhazeError
from phaze.hardware.accelerator import Accelerator
from phaze.units import GiB

SCHEDULE_TIME_LIMIT_S = 1.0  # the co-search's per-layer limit (search.run.run_search default)


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


def _model_from(d: dict):
    from phaze.workload.config import ModelConfig
    known = {f.name for f in fields(ModelConfig)}
    return ModelConfig(**{k: v for k, v in d.items() if k in known})


def _plan_from(d: dict):
    from phaze.placement import Plan
    return Plan.from_dict(d)


def winner_chip(spec: dict, row: dict) -> Accelerator:
    """The stored candidate ``row`` as the Accelerator the search evaluated (its HBM size set)."""
    from phaze.hardware.space import DesignSpace, enumerate_space

    known = {f.name for f in fields(DesignSpace)}
    space = DesignSpace(**{k: v for k, v in spec["space"].items() if k in known})
    cands = enumerate_space(space)
    acc = cands.arch.accelerator(int(row["chip"]), name=f"winner (chip {row['chip']})")
    for f in ("num_tc", "tc_rows", "tc_cols", "num_vc", "vc_width", "glb_bytes"):
        if f in row and getattr(acc, f) != row[f]:
            raise PhazeError(f"store chip {row['chip']} has {f}={row[f]} but the stored space gives "
                             f"{getattr(acc, f)}; the store comes from another phaze version, rerun the search")
    return replace(acc, hbm_bytes=int(row["hbm_gib"]) * GiB)


def block_schedules(model, setting, accelerator: Accelerator, tier) -> tuple[LayerGantt, ...]:
    """Optimal schedules of one transformer block, forward and backward, on ``accelerator``."""
    from phaze.schedule import build_problem, solve
    from phaze.workload.graphs import layer_graph

    out = []
    for direction in ("fwd", "bwd"):
        problem = build_problem(layer_graph(model, setting, "block", direction), accelerator, tier)
        s = solve(problem, time_limit_s=SCHEDULE_TIME_LIMIT_S)
        ops = tuple(GanttOp(o.name, o.kind, o.start_s, o.end_s, len(o.cores)) for o in s.ops)
        out.append(LayerGantt("block", direction, s.makespan_s, s.status, ops))
    return tuple(out)


def plan_detail(model, accelerator: Accelerator, cluster, global_batch: int, plan, *, devices_given: int,
                evaluation: dict | None = None, stored_seq_per_s: float | None = None) -> PlanDetail:
    """Evaluate ``plan`` (unless ``evaluation`` is given) and schedule its block on a designed chip."""
    from phaze.placement import evaluate
    from phaze.placement.layer_costs import resolve_time_model, setting_for

    if evaluation is None:
        evaluation = evaluate(plan, model, accelerator, cluster, global_batch,
                              schedule_time_limit_s=SCHEDULE_TIME_LIMIT_S).to_dict()
    schedules: tuple[LayerGantt, ...] = ()
    if resolve_time_model("auto", accelerator) == "scheduled":
        modes = plan.recompute_modes
        mode = max(set(modes), key=lambda m: (modes.count(m), m))  # the mode most stages use
        s = setting_for(model, plan.microbatch_size, plan.tp, plan.sequence_parallel, mode)
        tier = cluster.tier_for_group(plan.tp, 1) if plan.tp > 1 else None
        schedules = block_schedules(model, s, accelerator, tier)
    return PlanDetail(model.name, accelerator, devices_given, evaluation, schedules, stored_seq_per_s)


def search_details(spec: dict, best: dict) -> list[PlanDetail]:
    """Per model: the search winner's plan, evaluated again on the rebuilt chip."""
    from phaze.hardware.presets import get_cluster

    acc = winner_chip(spec, best)
    cluster = get_cluster(spec["cluster"], spec["devices"])
    out = []
    for m, o in zip(spec["models"], best["outcomes"]):
        if not o.get("plan_json"):
            continue
        model = _model_from(m)
        out.append(plan_detail(model, acc, cluster, spec["global_batch"], _plan_from(o["plan_json"]),
                               devices_given=spec["devices"], stored_seq_per_s=o["throughput_seq_per_s"]))
    return out


def iteration_parts(ev: dict) -> list[tuple[str, float]]:
    """Where one iteration's time goes, summing to ``iteration_time_s``: the bottleneck stage's forward,
    backward and sends over all microbatches (the steady state), the pipeline bubble, then the exposed
    data-parallel gradient sync and the optimizer step of the slowest-finishing stage."""
    b = ev["stage_breakdown"][ev["bottleneck_stage"]]
    m = ev["num_microbatches"]
    steady = ev["steady_s"]
    per_mb = b["fwd_s"] + b["bwd_s"] + b["p2p_s"]
    scale = steady / (m * per_mb) if per_mb > 0 else 0.0  # 1 unless interleaving splits the stage
    return [("forward (bottleneck stage)", m * b["fwd_s"] * scale),
            ("backward incl. recompute (bottleneck stage)", m * b["bwd_s"] * scale),
            ("pipeline sends (bottleneck stage)", m * b["p2p_s"] * scale),
            ("pipeline bubble", ev["bubble_s"]),
            ("data-parallel gradient sync (exposed)", ev["dp_allreduce_s"]),
            ("optimizer step", ev["optimizer_step_s"])]
