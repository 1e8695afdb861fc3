"""Average chip power over an iteration of a plan, and what bounds its time (chips with the hierarchy).

Energy per device per iteration = (microbatches per replica) x (energy of every layer the pipeline holds,
forward + backward with its stage's recompute mode) / p: the pipeline's p devices share that work, each
layer graph being one tensor-parallel rank's share already. Op energies: ``phaze.cost.energy``. Plus the
optimizer step (``optimizer_energy_j``: its HBM bytes, each through the GLB, and its vector-lane operations).
The gradient all-reduce is not in it (off-chip links are not chip power, as for every collective). Average
power = that energy / iteration time + the SRAMs' leakage.

What bounds the time: the iteration splits into the pipeline bubble, exposed network time (p2p sends,
the exposed data-parallel all-reduce), the optimizer step (HBM- or lane-bound), and the steady part, which is
divided between compute, GLB and HBM (and the tensor-parallel network) in proportion to the seconds of
the layers' ops each of those terms bounds (``graph_time_by_bound``; ops overlap in the schedule, so this
is a share, not a timeline).
"""
from __future__ import annotations


from phaze.hardware.accelerator import Accelerator
from phaze.placement.evaluation import _layer_counts
from phaze.placement.plan import Evaluation
from phaze.workload.config import ModelConfig


def _graphs(model: ModelConfig, plan, mode: str):
    from phaze.placement.layer_costs import setting_for
    from phaze.workload.graphs import layer_graph

    s = setting_for(model, plan.microbatch_size, plan.tp, plan.sequence_parallel, mode, runtime=plan.runtime,
                    cp=plan.cp, ep=plan.ep, etp=plan.etp)
    return {(k, d): layer_graph(model, s, k, d) for k in ("embedding", "block", "head") for d in ("fwd", "bwd")}


def optimizer_energy_j(accelerator: Accelerator, ev: Evaluation) -> tuple[float, float]:
    """(energy, GLB bytes) per device of one optimizer step, averaged over the pipeline's stages as the
    layers' are. Each stage's ``stage.optimizer_traffic_bytes`` are priced as a vector op's that is not
    resident (``phaze.cost.energy``): HBM and a GLB write (the fill), a GLB read, the network and the
    vector-core buffer; its ``stage.optimizer_lane_ops`` at the lane energy; a 1/d shard of both with ZeRO-1
    (the evaluation's optimizer bytes are already that shard). Chips with the hierarchy only."""
    from phaze.hardware.power import HBM_J_PER_BYTE, LANE_OP_J, energy_parts
    from phaze.placement import stage as st

    p = energy_parts(accelerator.as_arrays())
    per_byte = HBM_J_PER_BYTE + sum(float(p[k][0]) for k in ("glb_write_J_per_B", "glb_read_J_per_B",
                                                              "noc_J_per_B", "vc_J_per_B"))
    shard = ev.plan.grad_sync_ranks if ev.plan.zero1 else 1
    total, moved = 0.0, 0.0
    for s in ev.stages:
        state = s.optimizer_bytes * shard  # the whole stage's optimizer state
        traffic = float(st.optimizer_traffic_bytes(s.grad_bytes, state, s.weight_bytes, s.params))
        ops = float(st.optimizer_lane_ops(state, s.params))
        total += (traffic * per_byte + ops * LANE_OP_J) / shard
        moved += 2.0 * traffic / shard
    return total / len(ev.stages), moved / len(ev.stages)


def plan_power(model: ModelConfig, accelerator: Accelerator, ev: Evaluation, tier=None) -> dict:
    """power_w (average over the iteration), energy_j (per device per iteration), glb_demand_Bps (the
    GLB bytes the device moves per second of its iteration, to read against its supply), peak_power_w, and
    time_by_bound_s {compute, glb, hbm, network, bubble, optimizer} with ``bound`` its largest entry.
    Power is None on chips without the on-chip hierarchy (not modelled)."""
    from phaze.cost.energy import graph_energy_j, graph_glb_bytes, graph_time_by_bound
    from phaze.hardware.power import peak_power_w, sram_leakage_w

    plan = ev.plan
    arch = accelerator.as_arrays()
    n_layers = model.num_layers + 2
    energy, glb_bytes, by = 0.0, 0.0, {k: 0.0 for k in ("compute", "glb", "hbm", "network")}
    cache: dict = {}
    for i, chunk in enumerate(plan.stages):
        mode = plan.recompute_of(i % plan.pp)
        if mode not in cache:
            g = _graphs(model, plan, mode)
            e = {kd: float(graph_energy_j(gr, arch)[0]) for kd, gr in g.items()}
            t = {kd: {k: float(v[0]) for k, v in graph_time_by_bound(gr, arch, tier).items()} for kd, gr in g.items()}
            gb = {kd: float(graph_glb_bytes(gr, arch)[0]) for kd, gr in g.items()}
            cache[mode] = (e, t, gb)
        e, t, gb = cache[mode]
        counts = dict(zip(("embedding", "block", "head"), _layer_counts(chunk, n_layers)))
        for kind, cnt in counts.items():
            for d in ("fwd", "bwd"):
                energy += cnt * e[(kind, d)]
                glb_bytes += cnt * gb[(kind, d)]
                for k in by:
                    by[k] += cnt * t[(kind, d)][k]
    energy *= plan.num_microbatches / plan.pp
    glb_bytes *= plan.num_microbatches / plan.pp
    hier = accelerator.has_hierarchy
    if hier:
        opt_j, opt_glb_bytes = optimizer_energy_j(accelerator, ev)
        energy += opt_j
        glb_bytes += opt_glb_bytes
    busy = sum(by.values())
    p2p = min(ev.p2p_s, ev.steady_s)  # the pipeline's sends are inside its stage times
    steady = ev.steady_s - p2p
    time_by = {k: (steady * v / busy if busy > 0 else 0.0) for k, v in by.items()}
    time_by["network"] += p2p + ev.dp_allreduce_s
    time_by["bubble"] = ev.bubble_s
    time_by["optimizer"] = ev.optimizer_step_s
    power = energy / ev.iteration_time_s + float(sram_leakage_w(arch)[0]) if hier and ev.iteration_time_s > 0 else None
    glb_demand = glb_bytes / ev.iteration_time_s if hier and ev.iteration_time_s > 0 else None
    return {"power_w": power, "energy_j": energy if hier else None, "glb_demand_Bps": glb_demand,
            "peak_power_w": float(peak_power_w(accelerator)) if hier else None,
            "time_by_bound_s": time_by, "bound": max(time_by, key=time_by.get)}
