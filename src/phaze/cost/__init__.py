"""How long each operator takes, vectorized over many chips (ArchArrays -> np.ndarray of seconds)."""
from __future__ import annotations

import numpy as np

from phaze.cost.common import core_modes
from phaze.cost.gemm import gemm_cycles, gemm_hbm_bytes, gemm_latency_s, gemm_terms
from phaze.cost.network import (all_gather_latency_s, allreduce_latency_s, collective_latency_s,
                                p2p_latency_s, reduce_scatter_latency_s)
from phaze.cost.vector import activations_resident, vector_latency_s, vector_terms
from phaze.errors import ConfigError
from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.cluster import NetworkTier
from phaze.workload.ops import Collective, Gemm, Op, VectorOp


def op_latency_s(op: Op, arch: ArchArrays, cores=1, tier: NetworkTier | None = None,
                 resident=False) -> np.ndarray:
    """Latency (s) of any op on each chip: GEMMs on ``cores`` tensor cores, vector ops on ``cores`` vector
    cores (``resident``: per chip, the layer's activations stay in the GLB; see ``activations_resident``),
    collectives on ``tier`` (the same value for every chip; ``cores`` ignored)."""
    if isinstance(op, Gemm):
        return gemm_latency_s(op, arch, cores)
    if isinstance(op, VectorOp):
        return vector_latency_s(op, arch, cores, resident)
    if isinstance(op, Collective):
        if op.group_size > 1 and tier is None:
            raise ConfigError(f"collective {op.name!r} over {op.group_size} devices needs a network tier")
        t = tier or NetworkTier("none", 1, 1.0, 0.0)
        return np.full(len(arch), collective_latency_s(op, t))
    raise ConfigError(f"cannot cost an op of type {type(op).__name__}")


__all__ = [
    "gemm_latency_s", "vector_latency_s", "collective_latency_s", "allreduce_latency_s",
    "reduce_scatter_latency_s", "all_gather_latency_s", "p2p_latency_s", "op_latency_s", "core_modes",
    "gemm_cycles", "gemm_hbm_bytes", "gemm_terms", "vector_terms", "activations_resident", "op_terms",
]


def op_terms(op: Op, arch: ArchArrays, cores=1, resident=False) -> dict | None:
    """The latency terms of a GEMM or vector op (see ``gemm_terms``); None for collectives."""
    if isinstance(op, Gemm):
        return gemm_terms(op, arch, cores)
    if isinstance(op, VectorOp):
        return vector_terms(op, arch, cores, resident)
    return None
