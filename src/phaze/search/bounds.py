"""Vectorized bounds over every candidate chip at once: layer-time bounds and a throughput upper bound.

For each model and setting, ``phaze.schedule.layer_time_bounds`` gives lower/upper bounds on each layer
kind's forward and backward time for all chips. A throughput upper bound per (chip, HBM size) follows
from the lower bounds: for any plan with p stages, m microbatches and per-microbatch compute S,
1F1B iteration >= S' * (1 + (m - 1) / p) + optimizer traffic / (p * HBM bandwidth), with
S' = S + (p - 1) * (least p2p forward + backward); the same bound the placement optimizer prunes with
(``phaze.placement``), taken over every (d, p) whose whole-model memory fits p devices.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.cluster import Cluster
from phaze.placement import stage as st
from phaze.placement.layer_costs import LayerCosts, layer_costs_from_times
from phaze.schedule import layer_time_bounds
from phaze.search.spec import GiB, SearchSpec
from phaze.workload.config import ModelConfig, TrainSetting
from phaze.workload.graphs import layer_graph

KINDS = ("embedding", "block", "head")
SLOTS = tuple((k, d) for k in KINDS for d in ("fwd", "bwd"))  # the 6 layer-time slots, in this order


def memory_costs(model: ModelConfig, setting: TrainSetting, optimizer: str = "adam") -> LayerCosts:
    """LayerCosts of ``setting`` with the memory of each layer kind and zero times."""
    return layer_costs_from_times(model, setting, {}, optimizer, "scheduled")


def with_times(c: LayerCosts, times: np.ndarray) -> LayerCosts:
    """``c`` with the 6 slot times of ``times`` (order: SLOTS)."""
    from dataclasses import replace
    t = dict(zip(SLOTS, (float(x) for x in times)))
    return replace(c, embedding=replace(c.embedding, fwd_s=t[("embedding", "fwd")], bwd_s=t[("embedding", "bwd")]),
                   block=replace(c.block, fwd_s=t[("block", "fwd")], bwd_s=t[("block", "bwd")]),
                   head=replace(c.head, fwd_s=t[("head", "fwd")], bwd_s=t[("head", "bwd")]))


@dataclass(frozen=True)
class ModelBounds:
    """Per model: its settings, their memory-only costs, and lower/upper layer times [setting, slot, chip]."""

    model: ModelConfig
    settings: tuple[TrainSetting, ...]
    memory: tuple[LayerCosts, ...]
    lower_s: np.ndarray
    upper_s: np.ndarray
    setting_ub: np.ndarray  # [setting, hbm, chip]: sequences/s no plan of this setting on this chip can beat

    @property
    def throughput_ub(self) -> np.ndarray:
        """[hbm, chip]: sequences/s no plan of this chip can beat."""
        return self.setting_ub.max(axis=0)


def _bound_lines(c: LayerCosts, model: ModelConfig, spec: SearchSpec, cluster: Cluster, cap_bytes: float,
                 hbm_Bps: float) -> np.ndarray:
    """Rows (a1, c1, a2, c2): iteration >= max(a1*S + c1, a2*S + c2) for one feasible (d, p) of a setting,
    where S is the per-microbatch compute of the whole layer sequence on one device.

    Placement's 1F1B time is sum_i T_i + (m-1) max_i T_i + max_i R_i, R_i = max(0, sync_i - bwd_i) + opt_i.
    With sum T >= S' (compute plus the least p2p sends) and max T >= S'/p: line 1 drops R_i but the
    optimizer step of the stage with the most parameters (>= 1/p of the total). Line 2 (m >= 2) takes that
    stage's gradient sync as exposed except for one backward, which max T already covers:
    iteration >= S' + (m-2) S'/p + sync(G/p) + opt/p (m = 1: >= sync(G/p) + opt/p).
    Dominated rows are dropped."""
    s = c.setting
    L, B, N, t, mbs = model.num_layers, spec.global_batch, spec.devices, s.tp, s.microbatch_size
    E, Bk, H = c.embedding, c.block, c.head
    static = sum(x.weight_bytes + x.grad_bytes + x.optimizer_bytes for x in (E, H)) + L * (
        Bk.weight_bytes + Bk.grad_bytes + Bk.optimizer_bytes)
    act = E.activation_bytes + L * Bk.activation_bytes + H.activation_bytes
    traffic = float(sum(n * st.optimizer_traffic_bytes(x.grad_bytes, x.optimizer_bytes, x.weight_bytes, x.params)
                        for n, x in ((1, E), (L, Bk), (1, H))))
    grads = E.grad_bytes + L * Bk.grad_bytes + H.grad_bytes - st.tied_grad_bytes(c)
    rows = []
    for d in range(1, B // mbs + 1):
        if (B // mbs) % d:
            continue
        if t * d > N:
            break
        m = B // (mbs * d)
        tier, tt = cluster.tier_for_group(2, t * d), cluster.tier_for_group(t)
        pf = min(float(st.send_s(c, Bk.boundary_fwd_bytes, tier, tt)), float(st.send_s(c, E.boundary_fwd_bytes, tier, tt)))
        pb = min(float(st.send_s(c, Bk.boundary_bwd_bytes, tier, tt)), float(st.send_s(c, H.boundary_bwd_bytes, tier, tt)))
        for p in range(1, min(L + 2, N // (t * d)) + 1):
            need = (static - (st.tied_static_bytes(c) if p == 1 else 0.0) + act) / p
            if need > cap_bytes:
                continue
            send = (p - 1) * (pf + pb)
            opt = traffic / p / hbm_Bps
            a1 = 1.0 + (m - 1.0) / p
            row = [a1, send * a1 + opt, a1, send * a1 + opt]
            if d > 1:
                topo = st.Topology.of(cluster, t, d, p)
                sync = float(st.dp_sync_s(grads / p, 0.0, topo, False))
                if m >= 2:
                    a2 = 1.0 + (m - 2.0) / p
                    row[2:] = [a2, send * a2 + sync + opt]
                else:  # m = 1: sum T - max T >= 0 is all that is known
                    row[2:] = [0.0, sync + opt]
            rows.append(row)
    if not rows:
        return np.zeros((0, 4))
    r = np.asarray(rows)
    dominated = np.zeros(len(r), dtype=bool)
    for i in range(len(r)):  # a row is useless if another is no larger in all four coefficients
        le = np.all(r <= r[i], axis=1)
        le[i] = False
        dominated[i] = bool(np.any(le & np.any(r < r[i], axis=1))) or bool(np.any(np.all(r == r[i], axis=1)[:i]))
    return r[~dominated]


def model_bounds(model: ModelConfig, spec: SearchSpec, arch: ArchArrays, cluster: Cluster,
                 progress=None) -> ModelBounds:
    """Layer-time bounds and the throughput upper bound of every chip for one model (vectorized)."""
    settings = spec.settings(model)
    n = len(arch)
    lower = np.zeros((len(settings), len(SLOTS), n))
    upper = np.zeros_like(lower)
    mem = []
    tier = cluster.tiers[0]
    for i, s in enumerate(settings):
        tp_tier = cluster.tier_for_group(s.tp)
        for j, (kind, direction) in enumerate(SLOTS):
            lo, hi = layer_time_bounds(layer_graph(model, s, kind, direction), arch, tp_tier if s.tp > 1 else tier)
            lower[i, j], upper[i, j] = lo, hi
        mem.append(memory_costs(model, s, spec.optimizer))
        if progress:
            progress(i + 1, len(settings))
    counts = np.array([1, 1, model.num_layers, model.num_layers, 1, 1], dtype=float)
    S = np.einsum("j,ijn->in", counts, lower)  # [setting, chip] compute per microbatch at the lower bounds
    hbm_Bps = float(arch.hbm_bandwidth_Bps[0] * arch.memory_efficiency[0])
    tput = np.zeros((len(settings), len(spec.hbm_gib), n))
    for h, gib in enumerate(spec.hbm_gib):
        for i, c in enumerate(mem):
            r = _bound_lines(c, model, spec, cluster, gib * GiB, hbm_Bps)
            if len(r) == 0:
                continue
            Si = S[i][None, :]
            it = np.min(np.maximum(r[:, :1] * Si + r[:, 1:2], r[:, 2:3] * Si + r[:, 3:4]), axis=0)
            tput[i, h] = spec.global_batch / it
    return ModelBounds(model, settings, tuple(mem), lower, upper, tput)
