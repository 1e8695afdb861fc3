"""Operators of one layer and the DAG that connects them (plain frozen data, no behaviour beyond sizes).

Three kinds of operator:
- ``Gemm``: ``batch`` independent (M x K) @ (K x N) products; runs on tensor cores.
- ``VectorOp``: an element-wise or reduction op over ``elements`` values; runs on vector cores.
- ``Collective``: a tensor-parallel communication op over the TP group; runs on the network.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Union

Direction = Literal["fwd", "bwd"]
CollectiveKind = Literal["all_reduce", "reduce_scatter", "all_gather", "p2p", "all_to_all"]


@dataclass(frozen=True)
class Gemm:
    name: str
    batch: int
    m: int
    n: int
    k: int
    bytes_per_element: int = 2
    # a weight-gradient GEMM adds its result into the persistent gradient buffer (bytes per element of that
    # buffer, read and written); 0: the result is a fresh tensor written once (phaze.workload.graphs)
    accumulate_bytes: int = 0

    @property
    def flops(self) -> int:
        """2*B*M*N*K: one multiply and one add per MAC."""
        return 2 * self.batch * self.m * self.n * self.k

    @property
    def bytes_moved(self) -> int:
        """Compulsory traffic: read both operands once, write the result once (or, accumulating, read and
        write the buffer it adds into)."""
        b = self.batch
        out = 2 * self.accumulate_bytes if self.accumulate_bytes else self.bytes_per_element
        return b * (self.bytes_per_element * (self.m * self.k + self.k * self.n) + out * self.m * self.n)


@dataclass(frozen=True)
class VectorOp:
    """``flops_per_element`` lane operations per element; ``bytes_moved`` compulsory memory traffic."""

    name: str
    kind: str  # e.g. "layernorm", "softmax", "gelu", "add", "dropout", "embedding_gather"
    elements: int
    flops_per_element: float
    bytes_moved: int

    @property
    def flops(self) -> float:
        return self.elements * self.flops_per_element


@dataclass(frozen=True)
class Collective:
    """A collective over ``group_size`` devices of a parallel group (``group``: "tp", the tensor-parallel group;
    "ep", an MoE block's expert-parallel group; "etp", its expert-tensor-parallel group); ``bytes`` is the size
    of the full (unsharded) buffer per device, as in NCCL's convention for all-reduce (for an all-to-all: the
    bytes each device holds to redistribute, its own share included)."""

    name: str
    kind: CollectiveKind
    bytes: int
    group_size: int
    group: str = "tp"

    @property
    def flops(self) -> int:
        return 0


Op = Union[Gemm, VectorOp, Collective]


def op_resource(op: Op) -> str:
    """Which unit an op occupies: 'tc' (tensor cores), 'vc' (vector cores) or 'net'."""
    if isinstance(op, Gemm):
        return "tc"
    if isinstance(op, VectorOp):
        return "vc"
    return "net"


@dataclass(frozen=True)
class LayerGraph:
    """The operator DAG of one layer kind in one direction. ``edges`` are (pred_index, succ_index)
    into ``ops``; ops are listed in a topological order."""

    layer: str  # "embedding" | "block" | "head"
    direction: Direction
    ops: tuple[Op, ...]
    edges: tuple[tuple[int, int], ...]

    @property
    def flops(self) -> float:
        return float(sum(op.flops for op in self.ops))

    @property
    def gemms(self) -> tuple[Gemm, ...]:
        """The GEMMs (tensor-core work), in graph order."""
        return tuple(op for op in self.ops if isinstance(op, Gemm))

    @property
    def gemm_flops(self) -> int:
        """FLOPs of the GEMMs alone (tensor-core work; the 1:2 fwd:bwd ratio holds exactly for these)."""
        return sum(op.flops for op in self.gemms)

    def preds(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.ops]
        for a, b in self.edges:
            out[b].append(a)
        return out
