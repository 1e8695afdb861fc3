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

The overlap is not free: the reduce-scatters and the bulk all-gathers run as kernels on some of the SMs
while the GEMM runs on the rest (ring-exchange all-gathers use the copy engines). The GEMM then runs at
(SMs - comm SMs) / SMs of its speed: ``UB_COMM_SMS`` per collective, from the userbuffers configuration
NeMo ships for H100 (``ub_tp_comm_overlap_cfg`` in github NVIDIA/dgxc-benchmarking
nemo_megatron/gpt3_175b_hydra.yaml: proj_fprop pipeline 24 SMs, fc2_fprop pipeline 20, qkv_wgrad bulk 8,
fc1_wgrad bulk 4, qkv_dgrad bulk 4, fc1_dgrad bulk 2, the ring exchanges 0).
"""
from __future__ import annotations

from phaze.workload.ops import Collective, Gemm, LayerGraph


# SMs the communication kernel of each overlapped TP collective occupies (module docstring; by the name of
# the collective in phaze.workload.graphs / autodiff; absent = a ring exchange on the copy engines, 0 SMs)
UB_COMM_SMS = {
    "attn.reduce_scatter": 24,  # proj_fprop, pipeline
    "mlp.reduce_scatter": 20,  # fc2_fprop, pipeline
    "qkv.all_gather.bwd": 8,  # the dgrad's reduce-scatter behind the wgrad: qkv_wgrad, bulk
    "fc1.all_gather.bwd": 4,  # fc1_wgrad, bulk
    "qkv.input_all_gather": 4,  # the input re-gathered for the wgrad, behind the dgrad: qkv_dgrad, bulk
    "fc1.input_all_gather": 2,  # fc1_dgrad, bulk
}


def comm_sm_slowdown(collective_names, sms: int) -> float:
    """Factor on a GEMM's time while the named collectives' kernels hold their SMs (``UB_COMM_SMS``)."""
    busy = sum(UB_COMM_SMS.get(n, 0) for n in collective_names)
    return sms / max(1, sms - busy)


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
