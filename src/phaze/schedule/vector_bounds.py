"""Bounds on a layer's optimal makespan for N chips at once (numpy over chips, a loop over ops only).

lower: max(critical path with each op's fastest mode, per-resource least core-seconds / core count, and on
a chip with the on-chip hierarchy the layer's least GLB and HBM bytes over the shared supply) -- never above
the bound ``solve`` returns (which adds the energetic bound and safe mode fixing; ``bandwidth_bound_s``).
upper: the makespan of a valid schedule: every op on all cores of its kind, ops of one kind run one after
another in topological order, different kinds (and the network) overlap as dependencies allow. On a chip
with the on-chip hierarchy, whose ops share GLB and HBM bandwidth, tensor and vector ops also run one after
another (only collectives overlap them): the serial schedule ``solve`` never exceeds
(``phaze.schedule.bandwidth``).
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


def _terms(op, arch: ArchArrays, kind: str, cores, resident) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per chip: the op's duration on ``cores`` cores and the GLB and HBM bytes its time terms stand for (each
    term x the bandwidth it was costed at: at least the bytes it moves; ``phaze.schedule.bandwidth``)."""
    from phaze.cost import op_terms
    from phaze.cost.onchip import glb_bandwidth_Bps, hbm_bandwidth_Bps

    t = op_terms(op, arch, cores, resident=resident)
    lat = np.maximum(np.asarray(t["latency_s"], dtype=float), MIN_DURATION_S)
    with np.errstate(invalid="ignore"):
        g = np.nan_to_num(np.asarray(t["glb_s"], float) * glb_bandwidth_Bps(arch, kind, cores))
        h = np.nan_to_num(np.asarray(t["hbm_s"], float) * hbm_bandwidth_Bps(arch, kind, cores))
    return lat, g, h


def _op_modes(op, arch: ArchArrays, kind: str, cap: np.ndarray, resident: np.ndarray):
    """Per chip: the op on all its cores, its fastest mode, its least core-seconds over every mode, and its
    least GLB and HBM bytes over every mode (``_terms``)."""
    full, best_g, best_h = _terms(op, arch, kind, cap, resident)
    best_d, best_w = full.copy(), full * cap
    p = 1
    while p < int(cap.max(initial=1)):
        # mode p only on the chips that have more than p cores of this kind (the others' all-cores mode
        # is already in); the sub-array is kept on ``arch`` so its derived data is computed once
        idx, sub, sub_res = _with_more_than(arch, kind, p, resident)
        if len(idx):
            lat, g, h = _terms(op, sub, kind, p, sub_res)
            best_d[idx] = np.minimum(best_d[idx], lat)
            best_w[idx] = np.minimum(best_w[idx], lat * p)
            best_g[idx] = np.minimum(best_g[idx], g)
            best_h[idx] = np.minimum(best_h[idx], h)
        p *= 2
    return full, best_d, best_w, best_g, best_h


def layer_time_bounds(graph: LayerGraph, arch: ArchArrays, tp_tier: NetworkTier | None = None,
                      memo: dict | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds [chip] of the layer's optimal makespan (module docstring). ``memo``: a dict
    kept by the caller over several graphs on the same ``arch`` (e.g. one setting's recompute modes, whose
    graphs share most ops): each distinct op (equal fields but its name, which no cost reads; for vector
    ops also the chips' GLB residency) is costed once. Same results with or without it."""
    from phaze.cost import activations_resident
    from phaze.cost.onchip import supply_Bps

    n_chips = len(arch)
    resident = activations_resident(graph, arch)
    res_key = hashlib.sha256(np.ascontiguousarray(resident).tobytes()).hexdigest()
    caps = {"tc": np.asarray(arch.num_tc, dtype=np.int64), "vc": np.asarray(arch.num_vc, dtype=np.int64),
            "net": np.ones(n_chips, dtype=np.int64)}
    where = f"layer {graph.layer!r} ({graph.direction})"
    n = len(graph.ops)
    d_min, d_all, kinds = [], [], []
    work = {k: np.zeros(n_chips) for k in caps}
    moved = {"glb": np.zeros(n_chips), "hbm": np.zeros(n_chips)}  # least bytes over modes, summed
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
            full, best_d, best_w, best_g, best_h = memo[key]
        else:
            full, best_d, best_w, best_g, best_h = _op_modes(op, arch, kind, caps[kind], resident)
            if memo is not None:
                memo[key] = (full, best_d, best_w, best_g, best_h)
        d_min.append(best_d)
        d_all.append(full)
        work[kind] += best_w
        moved["glb"] += best_g
        moved["hbm"] += best_h
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in graph.edges:
        preds[b].append(a)
    zero = np.zeros(n_chips)
    head_end = [zero] * n  # earliest end with fastest modes and no resource limits
    up_end = [zero] * n  # end in the all-cores serialized schedule
    last = {k: zero for k in caps}
    shared = np.asarray(arch.glb_banks) > 0  # tensor and vector ops share bandwidth: one after another
    for i in topo_order(n, graph.edges):
        ready_lo = np.max([head_end[p] for p in preds[i]], axis=0) if preds[i] else zero
        head_end[i] = ready_lo + d_min[i]
        ready_up = np.max([up_end[p] for p in preds[i]], axis=0) if preds[i] else zero
        k = kinds[i]
        free = last[k] if k == "net" else np.where(shared, np.maximum(last["tc"], last["vc"]), last[k])
        up_end[i] = np.maximum(ready_up, free) + d_all[i]
        last[k] = up_end[i]
    crit = np.max(head_end, axis=0) if n else zero
    lower = np.max([crit] + [work[k] / caps[k] for k in caps], axis=0)
    if shared.any():  # the layer's bytes at the shared supply (``bandwidth_bound_s``)
        glb, hbm = supply_Bps(arch)
        with np.errstate(divide="ignore", invalid="ignore"):
            bw = np.maximum(np.nan_to_num(moved["glb"] / glb), np.nan_to_num(moved["hbm"] / hbm))
        lower = np.where(shared, np.maximum(lower, bw), lower)
    upper = np.max(up_end, axis=0) if n else zero
    return lower, upper
