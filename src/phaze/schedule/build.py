"""From a layer graph and a chip to a ``ScheduleProblem`` (durations from ``phaze.cost``).

Collectives: a graph whose collectives span more than one device needs ``tp_tier`` (the network tier of
the tensor-parallel group, e.g. ``cluster.tier_for_group(t)``); without it ``build_problem`` raises
ConfigError rather than silently costing communication at zero. Collectives over a group of one cost
nothing (``MIN_DURATION_S``).
"""
from __future__ import annotations

import numpy as np

from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import NetworkTier
from phaze.schedule.problem import MIN_DURATION_S, SchedOp, ScheduleProblem, prune_modes
from phaze.workload.ops import Collective, LayerGraph, op_resource


def collective_duration_s(op: Collective, tp_tier: NetworkTier | None, where: str) -> float:
    if op.group_size <= 1:
        return MIN_DURATION_S
    if tp_tier is None:
        raise ConfigError(
            f"{where}: collective {op.name!r} spans {op.group_size} devices but no network tier was given; "
            f"pass tp_tier (e.g. cluster.tier_for_group({op.group_size}))")
    from phaze.cost import collective_latency_s

    return max(float(collective_latency_s(op, tp_tier)), MIN_DURATION_S)


def build_problem(graph: LayerGraph, accelerator: Accelerator,
                  tp_tier: NetworkTier | None = None) -> ScheduleProblem:
    """Each op's duration on every core count of ``core_modes`` (dominated modes dropped)."""
    from phaze.cost import activations_resident, core_modes, op_latency_s

    arch = accelerator.as_arrays()
    resident = activations_resident(graph, arch)
    where = f"layer {graph.layer!r} ({graph.direction})"
    ops = []
    for op in graph.ops:
        kind = op_resource(op)
        if kind == "net":
            modes = ((1, collective_duration_s(op, tp_tier, where)),)
        else:
            cap = accelerator.num_tc if kind == "tc" else accelerator.num_vc
            modes = prune_modes(
                (k, max(float(np.asarray(op_latency_s(op, arch, k, resident=resident)).reshape(-1)[0]), MIN_DURATION_S))
                for k in core_modes(cap))
        ops.append(SchedOp(op.name, kind, modes))
    return ScheduleProblem(tuple(ops), tuple(tuple(e) for e in graph.edges),
                           accelerator.num_tc, accelerator.num_vc)
