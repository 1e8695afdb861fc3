"""Vector-op latency on the vector cores of many chips at once.

compute: the elements are dealt to ``cores * vc_width`` lanes (padded: ceil), each element costs
``flops_per_element`` lane-cycles (one lane op per cycle, the template convention) ->
``ceil(elements / lanes) * flops_per_element / (freq_hz * vector_efficiency)``.
memory: ``bytes_moved / (hbm_bandwidth_Bps * memory_efficiency)``. Every op reads its inputs from and
writes its output to HBM, as GEMM operands do: we do not assume an activation stays in the GLB between
ops, because whether it does depends on the schedule (conservative, and keeps op costs order-free).
latency_s = max(compute, memory) + op_overhead_s.

Chips with the on-chip hierarchy (``Accelerator.has_hierarchy``): the operands cross the GLB at the op's
GLB bandwidth (``phaze.cost.onchip``: what it gets alone; concurrent ops share it in the layer schedule,
``phaze.schedule.bandwidth``) and, unless the layer's activations stay in the GLB (``resident``, decided per
layer by ``activations_resident``), HBM at the chip's HBM bandwidth: memory = max(glb_s, hbm_s), hbm_s = 0
when resident.
"""
from __future__ import annotations

import numpy as np

from phaze.cost.common import as_cores, ceil_div
from phaze.errors import ConfigError
from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.supply import vc_row_rate
from phaze.workload.ops import VectorOp


# A layer's activations stay in the GLB when everything its vector ops touch fits in this fraction of it
# (the rest is left to the GEMMs' blocking). Sum of bytes_moved counts each tensor once as an output and
# again as an input, so the test is conservative.
RESIDENT_GLB_FRACTION = 0.5


def activations_resident(graph, arch: ArchArrays) -> np.ndarray:
    """Per chip: True when the layer's vector-op operands fit in the GLB (see RESIDENT_GLB_FRACTION) on a
    chip with the on-chip hierarchy; always False on the paper's template (every op round-trips HBM)."""
    moved = float(sum(op.bytes_moved for op in graph.ops if isinstance(op, VectorOp)))
    return (np.asarray(arch.glb_banks) > 0) & (moved <= RESIDENT_GLB_FRACTION * np.asarray(arch.glb_bytes, np.float64))


def vector_terms(op: VectorOp, arch: ArchArrays, cores=1, resident=False) -> dict:
    """Per-chip arrays compute_s, glb_s, hbm_s, glb_bytes, hbm_bytes, latency_s (module docstring)."""
    if op.elements < 0 or op.flops_per_element < 0 or op.bytes_moved < 0:
        raise ConfigError(f"vector op {op.name!r}: elements, flops_per_element and bytes_moved must be >= 0")
    c = as_cores(cores, arch.num_vc, f"vector op {op.name!r}")
    waves = ceil_div(op.elements, c * arch.vc_width)
    # the lanes read an operand row and write a result row of the vector buffer per cycle: slower when its
    # macro cannot (phaze.hardware.supply.vc_row_rate; 1 on the paper's template; issue 34 item 1a)
    compute_s = (waves * float(op.flops_per_element) / (arch.freq_hz * arch.vector_efficiency)
                 / vc_row_rate(arch))
    moved = float(op.bytes_moved)
    hier = np.asarray(arch.glb_banks) > 0
    n = len(c)
    if not hier.any():
        hbm_s = np.full(n, moved) / (arch.hbm_bandwidth_Bps * arch.memory_efficiency)
        glb_s, glb_bytes, hbm_bytes = np.zeros(n), np.zeros(n), np.full(n, moved)
    else:
        from phaze.cost.onchip import glb_bandwidth_Bps, hbm_bandwidth_Bps

        res = np.broadcast_to(np.asarray(resident, bool), (n,)) & hier
        with np.errstate(divide="ignore", invalid="ignore"):
            glb_s = np.where(hier, moved / glb_bandwidth_Bps(arch, "vc", c), 0.0)
            hbm_chip = moved / hbm_bandwidth_Bps(arch, "vc", c)
        hbm_paper = moved / (arch.hbm_bandwidth_Bps * arch.memory_efficiency)
        hbm_s = np.where(hier, np.where(res, 0.0, hbm_chip), hbm_paper)
        glb_bytes = np.where(hier, moved, 0.0)
        hbm_bytes = np.where(res, 0.0, moved)
    lat = np.maximum(np.maximum(compute_s, glb_s), hbm_s) + arch.op_overhead_s
    return {"compute_s": compute_s.astype(np.float64), "glb_s": glb_s, "hbm_s": hbm_s, "glb_bytes": glb_bytes,
            "hbm_bytes": hbm_bytes, "latency_s": lat}


def vector_latency_s(op: VectorOp, arch: ArchArrays, cores=1, resident=False) -> np.ndarray:
    """Latency (s) of ``op`` on each chip of ``arch`` spread over ``cores`` vector cores (int or array)."""
    return vector_terms(op, arch, cores, resident)["latency_s"]
