"""Forward graphs annotated with data flow, and the mechanical derivation of the backward graph.

A forward ``Node`` records, besides its op, which producers it reads (graph edges) and which of them
receive a gradient. ``backward`` walks the forward in reverse topological order and emits, per op:
- weight GEMM Y = X W:   ``.dgrad`` (dX = dY W^T) and ``.wgrad`` (dW = X^T dY, feeds nothing else);
- activation GEMM C = A B (attention): ``.d<a>`` (dA = dC B^T) and ``.d<b>`` (dB = A^T dC);
- vector op: ``.bwd`` of kind ``<kind>_bwd``;
- collective (Megatron conjugates): all_gather <-> reduce_scatter; a forward all_reduce after a
  row-parallel GEMM is the identity in backward; a column-parallel GEMM's dX is all-reduced (no SP).
Recomputed forward ops (``recompute.<name>``) are prepended; a backward op depends on the recomputed
producers of the tensors it reads (dgrad reads only the weight, so it never waits for recompute).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from phaze.workload.ops import Collective, Gemm, LayerGraph, Op, VectorOp
from phaze.workload.vector_kinds import vector_op

Role = Literal["weight_gemm", "act_gemm", "vector", "collective", "nograd"]


@dataclass(frozen=True)
class Node:
    """A forward op; ``deps`` are producer indices, ``grad_to`` the operands that receive a gradient
    as (operand name, producer index); ``column_parallel`` marks Megatron's f operator before it."""

    op: Op
    role: Role
    deps: tuple[int, ...] = ()
    grad_to: tuple[tuple[str, int | None], ...] = ()
    column_parallel: bool = False


@dataclass
class ForwardBuilder:
    """Accumulates forward nodes in topological order."""

    nodes: list[Node] = field(default_factory=list)

    def add(self, op: Op, role: Role, deps: tuple[int | None, ...] = (),
            grad: bool | tuple[int | None, ...] = True, operands: tuple[str, ...] = (),
            column_parallel: bool = False) -> int:
        """Append a node; ``grad`` = True (all deps get a gradient), False, or the deps that do."""
        real = tuple(d for d in deps if d is not None)
        if role == "act_gemm":
            grad_to = tuple(zip(operands, deps))
        elif role == "nograd" or grad is False:
            grad_to = ()
        else:
            grad_to = tuple(("x", d) for d in (deps if grad is True else grad))
        self.nodes.append(Node(op, role, tuple(dict.fromkeys(real)), grad_to, column_parallel))
        return len(self.nodes) - 1

    def graph(self, layer: str) -> LayerGraph:
        edges = tuple((d, i) for i, n in enumerate(self.nodes) for d in n.deps)
        return LayerGraph(layer, "fwd", tuple(n.op for n in self.nodes), edges)


def _rename(op: Op, name: str) -> Op:
    return replace(op, name=name)


def backward(nodes: list[Node], layer: str, tp: int, sequence_parallel: bool,
             recompute: frozenset[int] = frozenset()) -> LayerGraph:
    """The backward LayerGraph of a forward node list; ``recompute`` = forward indices re-run first."""
    ops: list[Op] = []
    edges: list[tuple[int, int]] = []
    recomputed: dict[int, int] = {}  # forward index -> index of its recomputed copy

    def emit(op: Op, deps) -> int:
        ops.append(op)
        i = len(ops) - 1
        edges.extend((d, i) for d in dict.fromkeys(deps))
        return i

    for f, node in enumerate(nodes):
        if f in recompute:
            recomputed[f] = emit(_rename(node.op, "recompute." + node.op.name),
                                 [recomputed[d] for d in node.deps if d in recomputed])

    def saved(*fwd: int | None) -> list[int]:
        return [recomputed[f] for f in fwd if f is not None and f in recomputed]

    grad_in: dict[int, list[int]] = {f: [] for f in range(len(nodes))}  # gradient contributions to f's output

    def give(producer: int | None, src: list[int]) -> None:
        if producer is not None:
            grad_in[producer].extend(src)

    for f in reversed(range(len(nodes))):
        node, op, up = nodes[f], nodes[f].op, grad_in[f]
        if node.role == "nograd":
            continue
        if node.role == "weight_gemm":
            assert isinstance(op, Gemm)
            (_, x), = node.grad_to or (("x", None),)
            dg = emit(Gemm(op.name + ".dgrad", op.batch, op.m, op.k, op.n, op.bytes_per_element), up)
            w_deps = up + saved(x, *node.deps)
            if sequence_parallel and tp > 1 and node.column_parallel and x is not None and x not in recomputed:
                # SP stores only the sequence shard of X; re-gather it for dW (Korthikanti et al. sec. 4.2.2)
                src = nodes[x].op
                w_deps = w_deps + [emit(Collective(op.name + ".input_all_gather", "all_gather",
                                                   src.bytes if isinstance(src, Collective) else 0, tp), [])]
            emit(Gemm(op.name + ".wgrad", op.batch, op.k, op.n, op.m, op.bytes_per_element), w_deps)
            if node.column_parallel and tp > 1 and not sequence_parallel:
                dg = emit(Collective(op.name + ".dgrad_all_reduce", "all_reduce",
                                     op.bytes_per_element * op.batch * op.m * op.k, tp), [dg])
            give(x, [dg])
        elif node.role == "act_gemm":
            assert isinstance(op, Gemm)
            (na, a), (nb, b) = node.grad_to
            da = emit(Gemm(f"{op.name}.d{na}", op.batch, op.m, op.k, op.n, op.bytes_per_element), up + saved(b))
            db = emit(Gemm(f"{op.name}.d{nb}", op.batch, op.k, op.n, op.m, op.bytes_per_element), up + saved(a))
            give(a, [da])
            give(b, [db])
        elif node.role == "vector":
            assert isinstance(op, VectorOp)
            i = emit(vector_op(op.name + ".bwd", op.kind + "_bwd", op.elements), up + saved(f, *node.deps))
            for _, p in node.grad_to:
                give(p, [i])
        else:  # collective
            assert isinstance(op, Collective)
            swap = {"all_gather": "reduce_scatter", "reduce_scatter": "all_gather"}
            src = up
            if op.kind in swap:
                src = [emit(replace(op, name=op.name + ".bwd", kind=swap[op.kind]), up)]
            elif op.kind == "all_to_all":  # an MoE dispatch's gradient goes back the way it came
                src = [emit(replace(op, name=op.name + ".bwd"), up)]
            for _, p in node.grad_to:
                give(p, src)
    return LayerGraph(layer, "bwd", tuple(ops), tuple(edges))
