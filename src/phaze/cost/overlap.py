"""Tensor-parallel collectives overlapped with the GEMMs next to them (Transformer Engine userbuffers).

With sequence parallelism every TP collective of a block sits next to a GEMM: an all-gather feeds the
column-parallel GEMM that reads the gathered tensor, a reduce-scatter drains the row-parallel GEMM that
produced the partial sums. Transformer Engine's ``tp_comm_overlap`` splits such a GEMM into ``t`` chunks
(one per TP rank's shard) and runs chunk i while the ring moves shard i+1 ("split pipelined" / ring-exchange
overlap; Wang et al., "Overlap Communication with Dependent Computation via Decomposition", ASPLOS 2023,
which TE implements). Hence what can and cannot hide:

  time = gemm / t + (t - 1) * max(gemm / t, comm / (t - 1))

one chunk of the GEMM is never overlapped (the first shard is local for an all-gather, the last partial
sum is reduced after the last chunk for a reduce-scatter), and a collective longer than its GEMM stays
exposed for the difference. Collectives with no GEMM neighbour (the embedding's reduce-scatter, the
loss's small all-reduces) are not overlapped.
"""
from __future__ import annotations

from phaze.workload.ops import Collective, Gemm, LayerGraph


def pipelined_overlap_s(gemm_s: float, comm_s: float, chunks: int) -> float:
    """A GEMM of ``gemm_s`` split in ``chunks`` overlapped with a collective of ``comm_s`` (module doc)."""
    if chunks <= 1 or comm_s <= 0:
        return gemm_s + comm_s
    c = gemm_s / chunks
    return c + (chunks - 1) * max(c, comm_s / (chunks - 1))


def overlap_pairs(graph: LayerGraph) -> dict[int, list[int]]:
    """{GEMM index: the TP collectives it hides}: each all-gather pairs with a GEMM that consumes it, each
    reduce-scatter with the GEMM that produces it; a GEMM hides at most one collective (more would share
    the same chunks), the rest stay exposed."""
    ops = graph.ops
    preds: list[list[int]] = [[] for _ in ops]
    succs: list[list[int]] = [[] for _ in ops]
    for a, b in graph.edges:
        preds[b].append(a)
        succs[a].append(b)
    taken: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        if not isinstance(op, Collective) or op.group_size <= 1 or op.kind not in ("all_gather", "reduce_scatter"):
            continue
        near = succs[i] if op.kind == "all_gather" else preds[i]
        for j in near:
            if isinstance(ops[j], Gemm) and j not in taken:
                taken[j] = [i]
                break
    return taken
