"""Bounds on a layer's optimal makespan for N chips at once (numpy over chips, a loop over ops only).

lower: max(critical path with each op's fastest mode, per-resource least core-seconds / core count) --
never above the bound ``solve`` starts from (which adds the energetic bound and safe mode fixing).
upper: the makespan of a valid schedule: every op on all cores of its kind, ops of one kind run one after
another in topological order, different kinds (and the network) overlap as dependencies allow.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.cluster import NetworkTier
from phaze.schedule.build import collective_duration_s
from phaze.schedule.problem import MIN_DURATION_S, topo_order
from phaze.workload.ops import LayerGraph, op_resource


def _with_more_than(arch: ArchArrays, kind: str, p: int, resident: np.ndarray):
    """(indices, sub-ArchArrays, their residency) of the chips with more than ``p`` cores of ``kind``."""
    def build(a: ArchArrays):
        cap = np.asarray(a.num_tc if kind == "tc" else a.num_vc)
        idx = np.flatnonzero(cap > p)
        return idx, (a if len(idx) == len(a) else a.select(idx))

    idx, sub = arch.memo(("more_than", kind, p), build)
    return idx, sub, np.asarray(resident)[idx]


def _op_modes(op, arch: ArchArrays, kind: str, cap: np.ndarray, resident: np.ndarray, op_latency_s):
    """Per chip: the op on all its cores, its fastest mode and its least core-seconds over every mode."""
    full = np.maximum(np.asarray(op_latency_s(op, arch, cap, resident=resident), dtype=float), MIN_DURATION_S)
    best_d, best_w = full.copy(), full * cap
    p = 1
    while p < int(cap.max(initial=1)):
        # mode p only on the chips that have more than p cores of this kind (the others' all-cores mode
        # is already in); the sub-array is kept on ``arch`` so its derived data is computed once
        idx, sub, sub_res = _with_more_than(arch, kind, p, resident)
        if len(idx):
            lat = np.maximum(np.asarray(op_latency_s(op, sub, p, resident=sub_res), dtype=float), MIN_DURATION_S)
            best_d[idx] = np.minimum(best_d[idx], lat)
            best_w[idx] = np.minimum(best_w[idx], lat * p)
        p *= 2
    return full, best_d, best_w


def layer_time_bounds(graph: LayerGraph, arch: ArchArrays, tp_tier: NetworkTier | None = None,
                      memo: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds [chip] of the layer's optimal makespan (module docstring). ``memo``: a dict
    kept by the caller over several graphs on the same ``arch`` (e.g. one setting's recompute modes, whose
    graphs share most ops): each distinct op (equal fields but its name, which no cost reads; for vector
    ops also the chips' GLB residency) is costed once. Same results with or without it."""
    from phaze.cost import activations_resident, op_latency_s

    n_chips = len(arch)
    resident = activations_resident(graph, arch)
    res_key = hashlib.sha256(np.ascontiguousarray(resident).tobytes()).hexdigest()
    caps = {"tc": np.asarray(arch.num_tc, dtype=np.int64), "vc": np.asarray(arch.num_vc, dtype=np.int64),
            "net": np.ones(n_chips, dtype=np.int64)}
    where = f"layer {graph.layer!r} ({graph.direction})"
    n = len(graph.ops)
    d_min, d_all, kinds = [], [], []
    work = {k: np.zeros(n_chips) for k in caps}
    for op in graph.ops:
        kind = op_resource(op)
        kinds.append(kind)
        if kind == "net":
            d = np.full(n_chips, collective_duration_s(op, tp_tier, where))
            d_min.append(d)
            d_all.append(d)
            work["net"] += d
            continue
        key = (replace(op, name=""), kind, res_key if kind == "vc" else None)
        if memo is not None and key in memo:
            full, best_d, best_w = memo[key]
        else:
            full, best_d, best_w = _op_modes(op, arch, kind, caps[kind], resident, op_latency_s)
            if memo is not None:
                memo[key] = (full, best_d, best_w)
        d_min.append(best_d)
        d_all.append(full)
        work[kind] += best_w
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in graph.edges:
        preds[b].append(a)
    zero = np.zeros(n_chips)
    head_end = [zero] * n  # earliest end with fastest modes and no resource limits
    up_end = [zero] * n  # end in the all-cores serialized schedule
    last = {k: zero for k in caps}
    for i in topo_order(n, graph.edges):
        ready_lo = np.max([head_end[p] for p in preds[i]], axis=0) if preds[i] else zero
        head_end[i] = ready_lo + d_min[i]
        ready_up = np.max([up_end[p] for p in preds[i]], axis=0) if preds[i] else zero
        up_end[i] = np.maximum(ready_up, last[kinds[i]]) + d_all[i]
        last[kinds[i]] = up_end[i]
    crit = np.max(head_end, axis=0) if n else zero
    lower = np.max([crit] + [work[k] / caps[k] for k in caps], axis=0)
    upper = np.max(up_end, axis=0) if n else zero
    return lower, upper
