"""Vector-op latency on the vector cores of many chips at once.

compute: the elements are dealt to ``cores * vc_width`` lanes (padded: ceil), each element costs
``flops_per_element`` lane-cycles (one lane op per cycle, the template convention) ->
``ceil(elements / lanes) * flops_per_element / (freq_hz * vector_efficiency)``.
memory: ``bytes_moved / (hbm_bandwidth_Bps * memory_efficiency)``. Every op reads its inputs from and
writes its output to HBM, as GEMM operands do: we do not assume an activation stays in the GLB between
ops, because whether it does depends on the schedule (conservative, and keeps op costs order-free).
latency_s = max(compute, memory) + op_overhead_s.
"""
from __future__ import annotations

import numpy as np

from phaze.cost.common import as_cores, ceil_div
from phaze.errors import ConfigError
from phaze.hardware.accelerator import ArchArrays
from phaze.workload.ops import VectorOp


def vector_latency_s(op: VectorOp, arch: ArchArrays, cores=1) -> np.ndarray:
    """Latency (s) of ``op`` on each chip of ``arch`` spread over ``cores`` vector cores (int or array)."""
    if op.elements < 0 or op.flops_per_element < 0 or op.bytes_moved < 0:
        raise ConfigError(f"vector op {op.name!r}: elements, flops_per_element and bytes_moved must be >= 0")
    c = as_cores(cores, arch.num_vc, f"vector op {op.name!r}")
    waves = ceil_div(op.elements, c * arch.vc_width)
    compute_s = waves * float(op.flops_per_element) / (arch.freq_hz * arch.vector_efficiency)
    memory_s = float(op.bytes_moved) / (arch.hbm_bandwidth_Bps * arch.memory_efficiency)
    return np.maximum(compute_s, memory_s) + arch.op_overhead_s
