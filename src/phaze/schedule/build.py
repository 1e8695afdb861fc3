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


# a capped cost this close (relative) to the full-bandwidth one keeps the op's duration (float64 rounding)
RATE_RTOL = 1e-9


def _first(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def op_rates(op, accelerator: Accelerator, arch, kind: str, cores: int, resident) -> tuple[float, tuple[float, float]]:
    """(duration_s, (GLB, HBM) bytes per second it draws) of an op on ``cores`` cores of a chip with the on-chip
    hierarchy: ``mode_rates`` at that one core count."""
    return mode_rates(op, accelerator, arch, kind, (int(cores),), resident)[int(cores)]


# Per process: the modes of ops already costed on a chip. A layer's graphs repeat ops (a recomputing backward
# pass repeats the forward's; the settings of one (microbatch, t) share most shapes), and an op's cost depends
# on its shape and kind, the chip, the core count and whether the layer's activations stay in the GLB, not on
# its name. Cleared at this many entries (a co-search visits chips one after another).
_OP_MEMO: dict = {}
OP_MEMO_MAX_ENTRIES = 50_000
_COST_KEYS: dict = {}  # accelerator -> the fields op costs depend on: all but its name and HBM capacity


def _cost_key(accelerator: Accelerator):
    """``accelerator`` without its name and HBM capacity, which no op cost reads (``phaze.cost`` takes HBM
    bandwidth, not size): chips that differ only in them (a reference at the winner's HBM, a network sibling,
    the decomposition's HBM step) share their ops' costs."""
    from dataclasses import replace

    key = _COST_KEYS.get(accelerator)
    if key is None:
        if len(_COST_KEYS) >= OP_MEMO_MAX_ENTRIES:
            _COST_KEYS.clear()
        key = _COST_KEYS[accelerator] = replace(accelerator, name="", hbm_bytes=1)
    return key


def mode_rates(op, accelerator: Accelerator, arch, kind: str, modes: tuple[int, ...], resident: bool) -> dict:
    """{cores: (duration_s, (GLB, HBM) bytes per second it draws)} of an op at each core count of ``modes`` of a
    chip with the on-chip hierarchy (``arch``: its one row), costed with the whole supply (``phaze.cost.onchip``).
    The rates are the least of a few candidate bandwidths at which the cost model still gives the op that
    duration (checked by costing it there, ``onchip.bandwidth_cap``): its GLB and HBM time terms over its busy
    time (a roofline op's exact need), then half way to, then all of the bandwidth it was costed with
    (``phaze.schedule.bandwidth``). One vectorized cost call per step over a row per core count; every step is
    elementwise, so each count gets, to the bit, what it gets costed alone (``op_rates``; session 28 checked
    9,480 ops against the former scalar code, tests/schedule/test_schedule_layers.py checks one count at a time)."""
    from phaze.cost import op_latency_s, op_terms
    from phaze.cost.onchip import bandwidth_cap, glb_bandwidth_Bps, hbm_bandwidth_Bps

    n = len(modes)
    rows = arch.memo(("rows", n), lambda a: a.select(np.zeros(n, np.int64)))
    cores = np.asarray(modes, np.int64)
    res = np.full(n, bool(resident))
    t = op_terms(op, rows, cores, resident=res)
    lat = np.asarray(t["latency_s"], np.float64).reshape(n)
    d = np.maximum(lat, MIN_DURATION_S)
    B = np.asarray(glb_bandwidth_Bps(arch, kind, cores), np.float64).reshape(n)
    H = np.asarray(hbm_bandwidth_Bps(arch, kind, cores), np.float64).reshape(n)
    busy = np.maximum(lat - accelerator.op_overhead_s, MIN_DURATION_S)
    g = np.minimum(B, np.asarray(t["glb_s"], np.float64).reshape(n) * B / busy)
    h = np.minimum(H, np.asarray(t["hbm_s"], np.float64).reshape(n) * H / busy)
    full = g >= B * (1 - RATE_RTOL)
    # a vector op, or one bound by the GLB: (d, (B or g, h)); the others keep the least of g, half way to B and B
    # at which the cost model still gives them their duration
    glb = np.where(full, B, g)
    todo = ~full if kind != "vc" else np.zeros(n, bool)
    for gg in (g, 0.5 * (g + B)):
        if not todo.any():
            break
        cap = bandwidth_cap(rows, np.where(todo, gg, B), np.where(h > 0, h, H))  # rows not in question: uncapped
        capped = np.asarray(op_latency_s(op, cap, cores, resident=res), np.float64).reshape(n)
        ok = todo & (capped <= lat * (1 + RATE_RTOL))
        glb = np.where(ok, gg, glb)
        todo &= ~ok
    glb = np.where(todo, B, glb)
    return {int(k): (float(d[j]), (float(glb[j]), float(h[j]))) for j, k in enumerate(modes)}


def _op_modes(op, accelerator: Accelerator, arch, kind: str, cap: int, resident: bool) -> dict:
    """``mode_rates`` at every core count of ``core_modes(cap)``, memoized by the op's cost fields."""
    from dataclasses import replace

    from phaze.cost import core_modes

    key = (replace(op, name=""), _cost_key(accelerator), kind, cap, resident)
    out = _OP_MEMO.get(key)
    if out is None:
        if len(_OP_MEMO) >= OP_MEMO_MAX_ENTRIES:
            _OP_MEMO.clear()
        out = _OP_MEMO[key] = mode_rates(op, accelerator, arch, kind, core_modes(cap), resident)
    return out


def build_problem(graph: LayerGraph, accelerator: Accelerator,
                  tp_tier: NetworkTier | None = None) -> ScheduleProblem:
    """Each op's duration on every core count of ``core_modes`` (dominated modes dropped); on a chip with the
    on-chip hierarchy also the GLB/HBM bandwidth each mode draws (``mode_rates``) and the chip's supply."""
    from phaze.cost import activations_resident, core_modes, op_latency_s
    from phaze.cost.onchip import supply_Bps

    arch = accelerator.as_arrays()
    resident = activations_resident(graph, arch)
    shared = accelerator.has_hierarchy
    where = f"layer {graph.layer!r} ({graph.direction})"
    ops = []
    for op in graph.ops:
        kind = op_resource(op)
        if kind == "net":
            ops.append(SchedOp(op.name, kind, ((1, collective_duration_s(op, tp_tier, where)),)))
            continue
        cap = accelerator.num_tc if kind == "tc" else accelerator.num_vc
        if not shared:
            modes = prune_modes(
                (k, max(_first(op_latency_s(op, arch, k, resident=resident)), MIN_DURATION_S))
                for k in core_modes(cap))
            ops.append(SchedOp(op.name, kind, modes))
            continue
        costed = _op_modes(op, accelerator, arch, kind, cap, bool(_first(resident)))
        modes = prune_modes((k, d) for k, (d, _) in costed.items())
        ops.append(SchedOp(op.name, kind, modes, tuple(costed[k][1] for k, _ in modes)))
    glb, hbm = supply_Bps(arch) if shared else (np.zeros(1), np.zeros(1))
    return ScheduleProblem(tuple(ops), tuple(tuple(e) for e in graph.edges),
                           accelerator.num_tc, accelerator.num_vc, _first(glb), _first(hbm))
