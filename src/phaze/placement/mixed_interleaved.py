"""A recompute mode per pipeline device for an interleaved plan (v > 1), whose partition is fixed.

With Megatron's equal virtual stages the layers of every device are fixed, so device i's time per
microbatch T_i, exposed sync + optimizer step R_i and memory depend only on its own mode. The iteration
is what ``evaluate_costs`` computes,

    sum_i T_i / v + (m - 1/v) max_i T_i + max_i R_i,

so for bounds U >= max T and W >= max R each device independently takes its fastest mode with T <= U,
R <= W and memory within capacity. Trying every U among the T values and every W among the R values is
exact: at U = max T and W = max R of an optimal assignment the per-device choice is no slower, and the
choice at any (U, W) costs at most sum/v + (m - 1/v) U + W. All (U, W) pairs are checked at once (numpy).
The plan is evaluated (``evaluate_costs``) only when it mixes modes and its objective can beat the caller's
cutoff: an all-one-mode optimum is its uniform combination's, and the objective is the evaluation's iteration
time (the same sum, up to rounding: the cutoff carries a relative margin ``CUTOFF_RTOL`` for that).
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from phaze.hardware.cluster import Cluster
from phaze.placement.evaluation import DeviceSpec, device_rows_memo, evaluate_costs
from phaze.placement import stage as st
from phaze.placement.layer_costs import LayerCosts
from phaze.placement.plan import Plan
from phaze.placement.recompute import Recompute

CUTOFF_RTOL = 1e-9  # an objective within this of the cutoff is still evaluated (summation order may differ)


def best_device_modes(costs: Mapping[str, LayerCosts], num_blocks: int, p: int, v: int, cluster: Cluster,
                      global_batch: int, device: DeviceSpec, overlap_dp: bool, memo: dict | None = None,
                      cutoff_s: float = np.inf, rows: dict | None = None, **plan_kw) -> tuple | None:
    """(plan, iteration_time_s) of the best per-device mode assignment of the balanced interleaved plan
    (``plan_kw``: tp, dp, microbatch_size, num_microbatches, sequence_parallel, zero), or None when no
    assignment fits, the best uses one mode on every device (its uniform plan is that), or it cannot beat
    ``cutoff_s``. ``memo``: the uniform plans' evaluations shared with the caller (``evaluate_costs_memo``;
    each mode's per-device rows are read from there, else computed without an evaluation: ``device_rows_memo``).
    ``rows``: each uniform plan's per-device (time, sync + step, memory), which do not depend on the HBM
    capacity, kept across plan searches by a caller that gives one cluster, batch and device but for its
    capacity per dict and keeps the costs alive while it lives (keyed by their identity): a co-search
    searches a chip at several HBM sizes and a plan unit again as its layer times become exact."""
    modes = list(costs)
    T, R, M = [], [], []
    for r in modes:  # one evaluation per mode gives every device's figures under that mode
        plan = Plan.balanced(num_blocks, p, interleave=v, recompute=Recompute.uniform(r), **plan_kw)
        key = (plan, id(costs[r]), overlap_dp)
        row = None if rows is None else rows.get(key)
        if row is None:
            row = device_rows_memo(memo, plan, costs[r], cluster, device, num_blocks=num_blocks, overlap_dp=overlap_dp)
            if rows is not None:
                rows[key] = row
        T.append(row[0])
        R.append(row[1])
        M.append(row[2])
    T, R, fits = np.array(T), np.array(R), np.array(M) <= device.hbm_bytes  # [mode, device]
    Us, Ws = np.unique(T[fits]), np.unique(R[fits])
    if Us.size == 0:
        return None
    ok = (fits[None, None] & (T[None, None] <= Us[:, None, None, None])
          & (R[None, None] <= Ws[None, :, None, None]))  # [U, W, mode, device]
    t_sel = np.where(ok, T[None, None], np.inf).min(axis=2)  # fastest allowed mode per device
    m = plan_kw["num_microbatches"]
    obj = st.iteration_s(t_sel.sum(axis=2), Us[:, None], Ws[None, :], m, v)
    if not np.isfinite(obj).any():
        return None
    u, w = np.unravel_index(int(np.argmin(obj)), obj.shape)
    choice = np.argmin(np.where(ok[u, w], T, np.inf), axis=0)
    if (choice == choice[0]).all() or obj[u, w] > cutoff_s * (1 + CUTOFF_RTOL):
        return None
    chosen = tuple(modes[int(k)] for k in choice)
    plan = Plan.balanced(num_blocks, p, interleave=v, recompute=Recompute(chosen), **plan_kw)
    ev = evaluate_costs(plan, {r: costs[r] for r in set(chosen)}, cluster, global_batch, device,
                        num_blocks=num_blocks, overlap_dp=overlap_dp)
    return plan, ev.iteration_time_s
