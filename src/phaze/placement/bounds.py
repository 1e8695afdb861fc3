"""Lower bounds on the iteration time of a plan combination, used to visit combinations in bound order,
and the settings (or per-stage recompute groups of settings) the combinations are built from.

A bound must never exceed the true optimum of its combination (else the optimizer's early stop would not
be exact). For a per-stage recompute combination (``floor_costs``) every stage may use any of the modes, so
its bound is computed from the least value of every per-layer quantity over the modes.
"""
from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Iterable, Mapping

import numpy as np

from phaze.placement import stage as st
from phaze.placement.layer_costs import LayerCost, LayerCosts
from phaze.workload.config import RECOMPUTE_MODES

MEMORY_FIELDS = ("params", "weight_bytes", "grad_bytes", "optimizer_bytes", "tied_params")


def divisors(n: int) -> list[int]:
    out = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(out + [n // d for d in out]))


def plan_floor_s(sum_T, max_T, opt_s, sync_s, m: int, v: int = 1):
    """THE plan lower bound (placement's combination bound and search's per-chip bound both use it):
    the least iteration time of any plan whose stages have sum T >= ``sum_T`` and max T >= ``max_T``,
    whose stage with the most parameters pays the optimizer step ``opt_s`` and the gradient sync
    ``sync_s`` (<= 0: no sync). From ``stage.iteration_s``: iteration >= sum_T / v + (m - 1/v) max_T +
    opt_s; and, charging that stage's sync except for one backward (which one max T covers),
    iteration >= sum_T / v + (m - 1/v - 1) max_T + sync_s + opt_s (m = 1: >= sync_s + opt_s).
    Scalars, or numpy arrays (then one bound per element; ``v`` too with an array ``max_T``)."""
    base = st.iteration_s(sum_T, max_T, opt_s, m, v)
    k = st.bottleneck_weight(m, v) - 1.0
    if isinstance(max_T, np.ndarray) or isinstance(sync_s, np.ndarray):
        alt = np.where(k >= 0, sum_T / v + k * max_T, 0.0) + sync_s + opt_s
        return np.where(np.asarray(sync_s) > 0, np.maximum(base, alt), base)
    if sync_s <= 0:
        return base
    alt = (sum_T / v + k * max_T if k >= 0 else 0.0) + sync_s + opt_s
    return max(base, alt)


def lower_bound_s(c: LayerCosts, L: int, p: int, v: int, m: int, pf: float, pb: float, traffic_per_dev: float,
                  hbm_Bps: float, sync_s: float = 0.0, mb_comm_s=0.0) -> float:
    """Iteration time no partition of this (setting, d, p, v) can beat (``plan_floor_s``): sum T >= S and
    max T >= S/p; the stage with the most parameters (>= 1/p of them) pays its optimizer step and its
    gradient sync ``sync_s`` (the sync of 1/p of the gradients). ``mb_comm_s``: a floor on max T (and so on
    sum T) from ZeRO-2/3's per-microbatch transfers (``zero_microbatch_floor_s``). ``p`` (with ``v``), ``sync_s``
    and ``mb_comm_s`` may be arrays (one bound per element).
    Interleaved (v > 1): the partition is fixed (``Plan.balanced``: L / (p v) blocks per virtual stage, as v > 1
    requires), so the first device holds L / p blocks and the embedding, and sends forward from each of its v
    chunks and backward from all but the first; the last device holds L / p blocks and the head, and sends
    backward from each of its v chunks and forward from all but the last: max T is at least either's."""
    tb = c.block.fwd_s + c.block.bwd_s
    emb, head = c.embedding.fwd_s + c.embedding.bwd_s, c.head.fwd_s + c.head.bwd_s
    S = L * tb + emb + head + (p * v - 1) * (pf + pb)
    M = S / p
    if np.any(np.asarray(v) > 1):
        ends = L / p * tb + np.maximum(emb + v * pf + (v - 1) * pb, head + (v - 1) * pf + v * pb)
        M = np.where(np.asarray(v) > 1, np.maximum(M, ends), M)
    if mb_comm_s is not None and (mb_comm_s > 0 if isinstance(mb_comm_s, float) else np.any(mb_comm_s > 0)):
        M = np.maximum(M, mb_comm_s)
        S = np.maximum(S, M)
    return plan_floor_s(S, M, traffic_per_dev / p / hbm_Bps, sync_s, m, v)


def weight_per_grad(c: LayerCosts) -> float:
    """Weight bytes per gradient byte, the least over the layer kinds: any stage's weights are at least this
    times its gradients (both are sums over its layers)."""
    return min((x.weight_bytes / x.grad_bytes for x in (c.embedding, c.block, c.head) if x.grad_bytes > 0),
               default=0.0)


def zero_microbatch_floor_s(grads_total: float, rho: float, topo: "st.Topology", zero: int, p: int) -> float:
    """A floor on max T of a ZeRO-2/3 plan (0 below ZeRO-2 or with one rank): the stage with the most gradients
    (>= 1/p of them, weights >= ``rho`` x its gradients) reduce-scatters them after every microbatch's backward
    and, at ZeRO-3, all-gathers its weights before the forward and again before the backward.
    ``stage.exposed_microbatch_comm_s`` leaves at least all of that beyond the stage's own forward + backward
    (max(0, x) >= x for both the reduce and the gather part, and the interference term is >= 0), so its
    T = forward + backward + sends + exposed >= the transfers."""
    if zero < 2 or topo.dp <= 1:
        return 0.0
    g = grads_total / p
    fwd, bwd = st.microbatch_comm_s(g, rho * g if zero >= 3 else 0.0, topo, zero)
    return float(fwd + bwd)


def _least_cost(cs: Iterable[LayerCost]) -> LayerCost:
    cs = list(cs)
    return LayerCost(**{f.name: min(getattr(x, f.name) for x in cs) for f in fields(LayerCost)})


def floor_costs(costs: Mapping[str, LayerCosts]) -> LayerCosts:
    """Per layer kind and field the least value over the recompute modes (the setting of the first mode):
    a stage with any mode costs at least this much time, memory and boundary bytes per layer."""
    cs = list(costs.values())
    return LayerCosts(*(_least_cost(getattr(c, k) for c in cs) for k in ("embedding", "block", "head")),
                      setting=cs[0].setting, time_model=cs[0].time_model)


def same_memory(costs: Mapping[str, LayerCosts]) -> bool:
    """Parameters and static bytes do not depend on the recompute mode (true of the costs phaze builds):
    then the optimizer step and gradient sync of a stage are the same whatever its mode."""
    cs = list(costs.values())
    return all(getattr(c[k], f) == getattr(cs[0][k], f) for c in cs[1:] for k in ("embedding", "block", "head")
               for f in MEMORY_FIELDS)


def least_traffic_bytes(costs: Mapping[str, LayerCosts], L: int) -> float:
    """Optimizer-step HBM traffic of the whole model with each layer at its cheapest mode."""
    def traffic(x: LayerCost) -> float:
        return float(st.optimizer_traffic_bytes(x.grad_bytes, x.optimizer_bytes, x.weight_bytes, x.params))
    cs = list(costs.values())
    return sum(n * min(traffic(c[k]) for c in cs) for n, k in ((1, "embedding"), (L, "block"), (1, "head")))


def group_by_mode(costs_by_setting: Mapping) -> dict:
    """{setting with recompute "none": {mode: LayerCosts}} over the settings that differ only in recompute."""
    out: dict = {}
    for s, c in costs_by_setting.items():
        out.setdefault(replace(s, recompute="none"), {})[s.recompute] = c
    return out


def combination_entries(costs_by_setting: Mapping, per_stage_recompute: bool, v_values) -> list:
    """(setting, costs to solve with, costs to bound with): every setting on its own and, with
    ``per_stage_recompute``, every group of >= 2 settings differing only in recompute as {mode: costs}
    bounded by the least costs over its modes."""
    out = [(s, c, c) for s, c in costs_by_setting.items()]
    if per_stage_recompute:
        for s, group in group_by_mode(costs_by_setting).items():
            if len(group) >= 2:
                group = {r: group[r] for r in RECOMPUTE_MODES if r in group}
                out.append((s, group, floor_costs(group)))
    return out
