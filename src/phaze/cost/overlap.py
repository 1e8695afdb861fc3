"""Tensor-parallel collectives overlapped with the GEMMs next to them (Transformer Engine userbuffers).

With sequence parallelism every TP collective of a block sits next to a GEMM: an all-gather feeds the
column-parallel GEMM that reads the gathered tensor, a reduce-scatter drains the row-parallel GEMM that
produced the partial sums. Transformer Engine's ``tp_comm_overlap`` splits such a GEMM into ``t`` chunks
(one per TP rank's shard) and runs chunk i while the ring moves shard i+1 ("split pipelined" / ring-exchange
overlap; Wang et al., "Overlap Communication with Dependent Computation via Decomposition", ASPLOS 2023,
which TE implements). Hence what can and cannot hide:

  time = gemm / t + (t - 1) * max(gemm / t, comm / (t - 1))

for the ring-exchange all-gathers (one GEMM chunk is never overlapped: the first shard is local), and a
collective longer than its GEMM stays exposed for the difference. The forward reduce-scatters are TE's
"pipeline" method (``split_rs_overlap_s``): the GEMM in 4 chunks along its output features, the
reduce-scatter of chunk i beside chunk i+1, the last chunk's reduce-scatter exposed. The backward's "bulk"
overlaps run the collective beside the whole (independent) GEMM: max(gemm, comm). (Timing each chunk with the
tile/wave model at its own shape was tried and rejected: without Hopper's stream-K kernels it charges the
small chunks whole waves and put the GPT-3 175B runs 11% too slow; a chunk is gemm / chunks.) Collectives with no GEMM neighbour (the embedding's reduce-scatter, the
loss's small all-reduces) are not overlapped.

The overlap is not free: the reduce-scatters and the bulk all-gathers run as kernels on some of the SMs
while the GEMM runs on the rest (ring-exchange all-gathers use the copy engines). The GEMM then runs at
(SMs - comm SMs) / SMs of its speed: ``UB_COMM_SMS`` per collective, from the userbuffers configuration
NeMo ships for H100 (``ub_tp_comm_overlap_cfg`` in github NVIDIA/dgxc-benchmarking
nemo_megatron/gpt3_175b_hydra.yaml: proj_fprop pipeline 24 SMs, fc2_fprop pipeline 20, qkv_wgrad bulk 8,
fc1_wgrad bulk 4, qkv_dgrad bulk 4, fc1_dgrad bulk 2, the ring exchanges 0). And even where no SM is given up,
the transfer is not free (``interfered_s``): while an NVLink collective moves data beside a GEMM, the two share
the L2, the HBM and the power budget, and the GEMM runs slower for as long as the transfer lasts.
"""
from __future__ import annotations

from phaze.units import MiB
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


# Seconds a GEMM loses per second an NVLink collective runs beside it, even when the transfer holds no SM.
# Measured on 8 x H100 (github pytorch/pytorch pull request #172714, Jan 2026, "Add benchmark for matmul +
# all-gather, with CE option", benchmarks/distributed/bench_overlapped_matmul_allgather.py): an fp16
# 8192 x 8192 x 8192 matmul and an independent all-gather of 64 MiB per rank (512 MiB out) over 8 GPUs take
# 2.96 ms one after the other and 1.77 ms overlapped with NCCL's copy-engine collectives (NCCL_CTA_POLICY_ZERO:
# no SM moves the data). Our models of the two pieces give 1.531 ms (GEMM, phaze.cost.gpu) and 1.326 ms
# (all-gather at 0.8 of NVLink4), 2.857 ms one after the other: -3.5% of the measured 2.96 ms. Scaled to the
# measurement the GEMM takes 1.586 ms and the all-gather 1.374 ms; a free overlap would take the longer, 1.586
# ms, and the measured 1.77 ms is 0.184 ms more: 0.134 s per second of transfer. (The same run with NCCL's
# kernels on SMs took 2.02 ms: NCCL_KERNEL_INTERFERENCE below; Transformer Engine's own overlap kernels hold
# the SMs of UB_COMM_SMS instead.) Measured on H100 only and applied to every NVLink transfer that overlaps
# compute: the TP collectives and, through nccl_interference, the context-parallel K/V ring and the overlapped
# DP sync (scaled to its link's rate), on A100 too (no A100 figure).
_SCALE = 2.96 / (1.531 + 1.326)
TRANSFER_INTERFERENCE = (1.77 - 1.531 * _SCALE) / (1.326 * _SCALE)
# The rate of that transfer: a ring all-gather sends 7 of the 8 shards of 64 MiB, in the 1.374 ms it took;
# and the memory system it shared: H100 SXM's HBM3, 3.35 TB/s (datasheet), at the presets' achievable 0.90.
MEASURED_TRANSFER_Bps = 7 * 64 * MiB / (1.326e-3 * _SCALE)
MEASURED_HBM_Bps = 3.35e12 * 0.90
# NCCL runs its collectives as kernels on the SMs (unless told to use the copy engines, as above), and while
# they run the GEMM beside them has fewer SMs. The same measurement with NCCL's default kernels took 2.02 ms
# instead of 1.77: 0.25 ms more for 1.374 ms of transfer, 0.182 s per second of collective, on top of
# TRANSFER_INTERFERENCE. The kernels hold their SMs for as long as the collective lasts, whatever the link
# moves, so this part carries over to a slower link (the data-parallel reduce over InfiniBand); the transfer
# part scales with the share of the chip's memory bandwidth the link's bytes take (``transfer_interference``).
NCCL_KERNEL_INTERFERENCE = (2.02 - 1.77) / (1.326 * _SCALE)


def interfered_s(compute_s: float, transfer_s: float, per_s: float = TRANSFER_INTERFERENCE) -> float:
    """Time of ``compute_s`` of work run beside a transfer of ``transfer_s``: it loses ``per_s`` s per
    second the two run together (``TRANSFER_INTERFERENCE`` for a copy-engine transfer over NVLink; at most
    the whole compute)."""
    return compute_s + per_s * min(compute_s, transfer_s)


def transfer_interference(link_Bps: float, hbm_Bps: float) -> float:
    """Seconds of compute lost per second a transfer of ``link_Bps`` per device runs beside it on a chip of
    achievable HBM bandwidth ``hbm_Bps``: every byte the link moves is read or written in HBM, so the loss
    scales with the share of the memory bandwidth the transfer takes, TRANSFER_INTERFERENCE at the measured
    share (342 GB/s beside H100's 3.0 TB/s); at most 1 (the compute stalls)."""
    share = (link_Bps / hbm_Bps) / (MEASURED_TRANSFER_Bps / MEASURED_HBM_Bps)
    return min(1.0, TRANSFER_INTERFERENCE * share)


def nccl_interference(link_Bps: float, hbm_Bps: float) -> float:
    """Seconds of compute lost per second an NCCL collective (kernels on the SMs) runs beside it over a
    link moving ``link_Bps`` per device on a GPU of achievable HBM bandwidth ``hbm_Bps``: the SMs its
    kernels hold plus the transfer's share of the memory system."""
    return NCCL_KERNEL_INTERFERENCE + transfer_interference(link_Bps, hbm_Bps)


# How TE overlaps each collective (Transformer Engine ``initialize_ub``: methods "ring_exchange" for qkv_fprop,
# fc1_fprop, proj_dgrad, fc2_dgrad; "pipeline" for proj_fprop, fc2_fprop; "bulk" for qkv/fc1 dgrad and wgrad),
# by the name of the collective here.
UB_PIPELINE = ("attn.reduce_scatter", "mlp.reduce_scatter")
UB_BULK = ("qkv.all_gather.bwd", "fc1.all_gather.bwd", "qkv.input_all_gather", "fc1.input_all_gather")
# Chunks of a "pipeline" overlap: TE's default num_splits for that method is 4 (``get_default_config``), and
# NeMo's H100 configuration sets num_splits 4 for proj_fprop and fc2_fprop too; a ring exchange takes t chunks.
UB_PIPELINE_SPLITS = 4


def overlap_method(collective_name: str) -> str:
    """"pipeline", "bulk" or "ring_exchange": how Transformer Engine overlaps this TP collective."""
    if collective_name in UB_PIPELINE:
        return "pipeline"
    return "bulk" if collective_name in UB_BULK else "ring_exchange"


def split_rs_overlap_s(chunk_s: float, comm_s: float, splits: int) -> float:
    """A GEMM in ``splits`` chunks of ``chunk_s`` each, the reduce-scatter of chunk i running while chunk i+1
    computes (TE ``CommOverlapBase::split_overlap_rs``: the main stream waits for the compute and the comm
    stream at the end, so the last chunk's reduce-scatter is exposed): c + (n-1) max(c, r) + r, r = comm / n."""
    if splits <= 1 or comm_s <= 0:
        return splits * chunk_s + comm_s
    r = comm_s / splits
    return chunk_s + (splits - 1) * max(chunk_s, r) + r


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
