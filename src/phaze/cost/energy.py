"""Energy of one op on chips with the on-chip hierarchy, from the same terms as its latency.

GEMM (``gemm_energy_parts_j``, by part): useful MACs x MAC energy; the GLB bytes the schedule moves, read
(inputs, weights, partials read back) or written (outputs, partials), at CACTI's energy per access / port
width, each also crossing the network; HBM bytes cost the HBM energy and a GLB write each (the fill); the
accumulator rows the schedule reads and writes (``acc_row_accesses`` of ``phaze.cost.gemm_chip``: one row of C
fp32 sums per streamed row per weight tile) and the weight rows it loads into the operand buffer and reads
into the array (``operand_row_loads``), each row at CACTI's energy per access times the accesses a row
takes; on a chip with ``input_staging`` every input byte read from the GLB also passes the staging buffer
(``staging``, written and read at its CACTI energy per byte; 0 without). All counts are the ones the latency model's schedule (its orientation, passes and weight reloads)
implies, so time and energy describe one schedule; ``phaze.validation.chip_energy`` checks them against
ZigZag's count of the same schedule on the same core.
Vector op: lane operations x lane energy; its operands cross the vector-core buffer, the GLB and the
network; if its layer's activations are not resident, they also cost HBM energy and GLB writes.
Constants and their sources: ``phaze.hardware.power``. Paper-template chips have no SRAM or network
description: their op energy is NaN (not modelled).
"""
from __future__ import annotations

import numpy as np

from phaze.cost.gemm import gemm_terms
from phaze.cost.vector import vector_terms
from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.power import HBM_J_PER_BYTE, LANE_OP_J, MAC_J, energy_parts
from phaze.workload.ops import Gemm, Op, VectorOp

GEMM_ENERGY_PARTS = ("mac", "glb", "noc", "hbm", "accumulator", "operand_buffer", "staging")


def gemm_energy_parts_j(op: Gemm, arch: ArchArrays, cores=1, pass_splits=None) -> dict:
    """Energy (J) of GEMM ``op`` by part (``GEMM_ENERGY_PARTS``, module docstring), per chip of ``arch``,
    which must all have the on-chip hierarchy; on the schedule ``gemm_terms`` picks (from ``pass_splits``)."""
    p = arch.memo("energy_parts", energy_parts)
    t = gemm_terms(op, arch, cores, pass_splits)
    write = t["glb_write_bytes"]
    return {"mac": np.full(len(arch), op.batch * op.m * op.n * op.k * MAC_J),
            "glb": (t["glb_bytes"] - write) * p["glb_read_J_per_B"] + write * p["glb_write_J_per_B"],
            "noc": t["glb_bytes"] * p["noc_J_per_B"],
            "hbm": t["hbm_bytes"] * (HBM_J_PER_BYTE + p["glb_write_J_per_B"]),
            "accumulator": t["acc_row_accesses"] * p["acc_rmw_J"],
            "operand_buffer": t["operand_row_loads"] * p["operand_J"],
            "staging": t["input_bytes"] * p["staging_J_per_B"]}


def op_energy_j(op: Op, arch: ArchArrays, cores=1, resident=False) -> np.ndarray:
    """Energy (J) of ``op`` on each chip (0 for collectives: off-chip links are not chip power)."""
    n = len(arch)
    if not isinstance(op, (Gemm, VectorOp)):
        return np.zeros(n)
    hier = np.asarray(arch.glb_banks) > 0
    out = np.full(n, np.nan)
    if not hier.any():
        return out
    idx = np.flatnonzero(hier)
    a = arch if hier.all() else arch.select(idx)
    c = np.broadcast_to(np.asarray(cores), (n,))[idx]
    p = a.memo("energy_parts", energy_parts)
    if isinstance(op, Gemm):
        e = sum(gemm_energy_parts_j(op, a, c).values())
    else:
        res = np.broadcast_to(np.asarray(resident, bool), (n,))[idx]
        t = vector_terms(op, a, c, res)
        moved = float(op.bytes_moved)
        e = (op.elements * op.flops_per_element * LANE_OP_J
             + moved * (p["vc_J_per_B"] + p["glb_read_J_per_B"] + p["noc_J_per_B"])
             + t["hbm_bytes"] * (HBM_J_PER_BYTE + p["glb_write_J_per_B"]))
    out[idx] = e
    return out


def _graph_sum(graph, arch: ArchArrays, per_op) -> np.ndarray:
    """Sum over the layer graph's core ops (collectives skipped) of ``per_op(op, kind, cores, resident)``,
    each op on all cores of its kind ("tc" or "vc")."""
    from phaze.cost.vector import activations_resident
    from phaze.workload.ops import op_resource

    resident = activations_resident(graph, arch)
    total = np.zeros(len(arch))
    for op in graph.ops:
        kind = op_resource(op)
        if kind in ("tc", "vc"):
            total = total + per_op(op, kind, arch.num_tc if kind == "tc" else arch.num_vc, resident)
    return total


def graph_energy_j(graph, arch: ArchArrays) -> np.ndarray:
    """Energy (J) of every op of a layer graph on each chip, each op on all cores of its kind."""
    return _graph_sum(graph, arch, lambda op, kind, cores, resident: op_energy_j(op, arch, cores, resident))


def graph_glb_bytes(graph, arch: ArchArrays) -> np.ndarray:
    """GLB bytes (between the GLB and the cores) of every op of a layer graph on each chip."""
    def glb(op, kind, cores, resident):
        terms = gemm_terms(op, arch, cores) if kind == "tc" else vector_terms(op, arch, cores, resident)
        return terms["glb_bytes"]

    return _graph_sum(graph, arch, glb)


def graph_time_by_bound(graph, arch: ArchArrays, tier=None) -> dict:
    """Per chip, the seconds of the layer's ops (each alone on all cores of its kind) by what bounds
    each op: compute, glb, hbm (its largest term) or network (collectives)."""
    from phaze.cost import collective_latency_s
    from phaze.cost.vector import activations_resident
    from phaze.workload.ops import Collective, op_resource

    resident = activations_resident(graph, arch)
    out = {k: np.zeros(len(arch)) for k in ("compute", "glb", "hbm", "network")}
    for op in graph.ops:
        kind = op_resource(op)
        if isinstance(op, Collective):
            if op.group_size > 1 and tier is not None:
                out["network"] = out["network"] + collective_latency_s(op, tier)
            continue
        cores = arch.num_tc if kind == "tc" else arch.num_vc
        t = gemm_terms(op, arch, cores) if kind == "tc" else vector_terms(op, arch, cores, resident)
        terms = np.stack([t["compute_s"], t["glb_s"], t["hbm_s"]])
        which = np.argmax(terms, axis=0)
        for j, name in enumerate(("compute", "glb", "hbm")):
            out[name] = out[name] + np.where(which == j, t["latency_s"], 0.0)
    return out
