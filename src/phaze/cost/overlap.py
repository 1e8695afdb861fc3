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
"pipeline" method in most configurations (``split_rs_overlap_s``): the GEMM in num_splits chunks (4 in every
configuration here) along its output features, the reduce-scatter of chunk i beside chunk i+1, the last
chunk's reduce-scatter exposed; or a ring exchange (below). The backward's "bulk"
overlaps run the collective beside the whole (independent) GEMM: max(gemm, comm). (Timing each chunk with the
tile/wave model at its own shape was tried and rejected: without Hopper's stream-K kernels it charges the
small chunks whole waves and put the GPT-3 175B runs 11% too slow; a chunk is gemm / chunks.) Collectives with no GEMM neighbour (the embedding's reduce-scatter, the
loss's small all-reduces) are not overlapped.

The overlap is not free: the reduce-scatters and the bulk all-gathers run as kernels on some of the SMs
while the GEMM runs on the rest (ring-exchange transfers use the copy engines): the GEMM then runs at
(SMs - comm SMs) / SMs of its speed, with the SMs of the run's userbuffers configuration
(``phaze.cost.userbuffers``: which method each overlap uses and how many SMs it holds, with their sources).
And even where no SM is given up, the transfer is not free (``interfered_s``): while an NVLink collective
moves data beside a GEMM, the two share the L2, the HBM and the power budget, and the GEMM runs slower for as
long as the transfer lasts. ``tp_overlap_pair_s`` puts these together for one GEMM and the collective it hides.

A reduce-scatter run as a ring exchange (NeMo 2.0's FP8 recipes put proj_fprop / fc2_fprop there) is TE's
``UbufP2PCommOverlap::split_overlap_rs`` (TE v1.12 pytorch/csrc/comm_gemm_overlap.h): the GEMM in t chunks
along the tokens, chunk i computing the partial sums of the rows rank (rank + i + 1) mod t owns; once chunk
i is done its partial result is sent to its owner (copy engine, one send stream), while chunk i + 1 computes;
the last chunk is the rank's own rows and is not sent; then the main stream waits for every chunk and send
and sums the t partial shards (``torch::sum_out``, or ``reduce_fp8_in_bf16_out``). Timed as
(``ring_rs_overlap_s``): c + (t - 1) max(c, r) + the sum, c = GEMM / t, r = comm / (t - 1) (each send is one
shard, the t - 1 sends together move what the ring reduce-scatter moves), the sum reading t shards and
writing one at the achievable HBM bandwidth (``ring_rs_reduce_s``).
"""
from __future__ import annotations

from phaze.cost.userbuffers import UbConfig, comm_sm_slowdown
from phaze.hardware.presets import H100_80G
from phaze.units import MiB
from phaze.workload.ops import Collective, Gemm, LayerGraph


# Seconds a GEMM loses per second an NVLink collective runs beside it, even when the transfer holds no SM.
# Measured on 8 x H100 (github pytorch/pytorch pull request #172714, Jan 2026, "Add benchmark for matmul +
# all-gather, with CE option", benchmarks/distributed/bench_overlapped_matmul_allgather.py): an fp16
# 8192 x 8192 x 8192 matmul and an independent all-gather of 64 MiB per rank (512 MiB out) over 8 GPUs take
# 2.96 ms one after the other and 1.77 ms overlapped with NCCL's copy-engine collectives (NCCL_CTA_POLICY_ZERO:
# no SM moves the data). Our models of the two pieces give 1.713 ms (GEMM, phaze.cost.gpu) and 1.326 ms
# (all-gather at 0.8 of NVLink4), 3.039 ms one after the other: +2.7% of the measured 2.96 ms. Scaled to the
# measurement the GEMM takes 1.669 ms and the all-gather 1.291 ms; a free overlap would take the longer, 1.669
# ms, and the measured 1.77 ms is 0.101 ms more: 0.078 s per second of transfer. (With the H100 GEMM
# efficiency of 0.75 used until 2026-12-02 the GEMM was 1.531 ms and this figure 0.134.) (The same run with NCCL's
# kernels on SMs took 2.02 ms: NCCL_KERNEL_INTERFERENCE below; Transformer Engine's own overlap kernels hold
# the SMs of their userbuffers configuration instead.) Measured on H100 only and applied to every NVLink transfer that overlaps
# compute: the TP collectives and, through nccl_interference, the context-parallel K/V ring and the overlapped
# DP sync (scaled to its link's rate), on A100 too (no A100 figure).
_SCALE = 2.96 / (1.7134 + 1.326)
TRANSFER_INTERFERENCE = (1.77 - 1.7134 * _SCALE) / (1.326 * _SCALE)
# The rate of that transfer: a ring all-gather sends 7 of the 8 shards of 64 MiB, in the 1.291 ms it took;
# and the memory system it shared: H100 SXM's HBM3 (the h100-80g preset: 3.35 TB/s datasheet) at its achievable
# fraction.
MEASURED_TRANSFER_Bps = 7 * 64 * MiB / (1.326e-3 * _SCALE)
MEASURED_HBM_Bps = H100_80G.hbm_bandwidth_Bps * H100_80G.memory_efficiency
# NCCL runs its collectives as kernels on the SMs (unless told to use the copy engines, as above), and while
# they run the GEMM beside them has fewer SMs. The same measurement with NCCL's default kernels took 2.02 ms
# instead of 1.77: 0.25 ms more for 1.291 ms of transfer, 0.194 s per second of collective, on top of
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
    share (364 GB/s beside H100's 3.0 TB/s); at most 1 (the compute stalls)."""
    share = (link_Bps / hbm_Bps) / (MEASURED_TRANSFER_Bps / MEASURED_HBM_Bps)
    return min(1.0, TRANSFER_INTERFERENCE * share)


def nccl_interference(link_Bps: float, hbm_Bps: float) -> float:
    """Seconds of compute lost per second an NCCL collective (kernels on the SMs) runs beside it over a
    link moving ``link_Bps`` per device on a GPU of achievable HBM bandwidth ``hbm_Bps``: the SMs its
    kernels hold plus the transfer's share of the memory system."""
    return NCCL_KERNEL_INTERFERENCE + transfer_interference(link_Bps, hbm_Bps)


def split_rs_overlap_s(chunk_s: float, comm_s: float, splits: int) -> float:
    """A GEMM in ``splits`` chunks of ``chunk_s`` each, the reduce-scatter of chunk i running while chunk i+1
    computes (TE ``CommOverlapBase::split_overlap_rs``: the main stream waits for the compute and the comm
    stream at the end, so the last chunk's reduce-scatter is exposed): c + (n-1) max(c, r) + r, r = comm / n."""
    if splits <= 1 or comm_s <= 0:
        return splits * chunk_s + comm_s
    r = comm_s / splits
    return chunk_s + (splits - 1) * max(chunk_s, r) + r


def ring_rs_reduce_s(nbytes: float, group_size: int, memory_Bps: float, overhead_s: float = 0.0) -> float:
    """The sum that ends a ring-exchange reduce-scatter: ``group_size`` partial shards of the ``nbytes`` buffer
    (the collective's full, unsharded size) read, one shard written, at ``memory_Bps``."""
    if group_size <= 1 or nbytes <= 0:
        return 0.0
    return (nbytes + nbytes / group_size) / memory_Bps + overhead_s


def ring_rs_overlap_s(gemm_s: float, comm_s: float, group_size: int, reduce_s: float = 0.0) -> float:
    """A GEMM of ``gemm_s`` run as TE's ring-exchange reduce-scatter over ``group_size`` ranks (module
    docstring): t chunks, each finished chunk's partial result sent (``comm_s`` / (t - 1) each) while the next
    computes, the last chunk kept, then the sum of the partial shards: c + (t - 1) max(c, r) + ``reduce_s``."""
    if group_size <= 1:
        return gemm_s + comm_s
    return pipelined_overlap_s(gemm_s, comm_s, group_size) + reduce_s


def pipelined_overlap_s(gemm_s: float, comm_s: float, chunks: int) -> float:
    """A GEMM of ``gemm_s`` split in ``chunks`` overlapped with a collective of ``comm_s`` (module doc)."""
    if chunks <= 1 or comm_s <= 0:
        return gemm_s + comm_s
    c = gemm_s / chunks
    return c + (chunks - 1) * max(c, comm_s / (chunks - 1))


def tp_overlap_pair_s(gemm_s: float, comm_s: float, names: list[str], config: UbConfig, tp: int, sms: int,
                      reduce_scatter: bool, nbytes: float, memory_Bps: float, overhead_s: float) -> float:
    """One GEMM of ``gemm_s`` and the TP collectives ``names`` it hides (``comm_s`` in all; ``nbytes`` their
    unsharded size, ``reduce_scatter`` their kind) as ``config`` runs them on a GPU of ``sms`` SMs: the GEMM
    loses the SMs the communication holds and runs slower beside the transfer, then by TE's method: "pipeline"
    split along the output features with the last chunk's reduce-scatter exposed; a ring-exchange
    reduce-scatter in t chunks and the sum of the partial shards (at ``memory_Bps``); any other ring exchange
    in one chunk per TP shard of the tokens; "bulk" beside the whole GEMM."""
    g = interfered_s(gemm_s * comm_sm_slowdown(names, sms, config), comm_s)
    ov = config.of(names[0])
    if ov is not None and ov.method == "pipeline":
        return split_rs_overlap_s(g / ov.num_splits, comm_s, ov.num_splits)
    if ov is not None and ov.method == "ring_exchange" and reduce_scatter:
        return ring_rs_overlap_s(g, comm_s, tp, ring_rs_reduce_s(nbytes, tp, memory_Bps, overhead_s))
    if ov is None or ov.method == "ring_exchange":
        return pipelined_overlap_s(g, comm_s, tp)
    return max(g, comm_s)


# The backward's bulk overlaps of a column-parallel layer run each collective beside the layer's OTHER GEMM,
# the independent one (TE v1.12 module/layernorm_linear.py backward: the input all-gather for the wgrad beside
# the dgrad GEMM, "qkv_dgrad" / "fc1_dgrad"; the dgrad's reduce-scatter beside the wgrad GEMM, "qkv_wgrad" /
# "fc1_wgrad"): by the collective's name suffix, the sibling GEMM's.
BULK_SIBLING = {".input_all_gather": ".dgrad", ".all_gather.bwd": ".wgrad"}


def _bulk_sibling(name: str) -> str | None:
    for suffix, gemm in BULK_SIBLING.items():
        if name.endswith(suffix):
            return name[: -len(suffix)] + gemm
    return None


def overlap_pairs(graph: LayerGraph) -> dict[int, list[int]]:
    """{GEMM index: the TP collectives it hides}: each all-gather pairs with a GEMM that consumes it, each
    reduce-scatter with the GEMM that produces it, except the backward's bulk overlaps, which pair with the
    layer's other (independent) GEMM (``BULK_SIBLING``); a GEMM hides at most one collective (more would share
    the same chunks), the rest stay exposed."""
    ops = graph.ops
    preds: list[list[int]] = [[] for _ in ops]
    succs: list[list[int]] = [[] for _ in ops]
    for a, b in graph.edges:
        preds[b].append(a)
        succs[a].append(b)
    index = {op.name: j for j, op in enumerate(ops) if isinstance(op, Gemm)}
    taken: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        if not isinstance(op, Collective) or op.group_size <= 1 or op.kind not in ("all_gather", "reduce_scatter"):
            continue
        sibling = index.get(_bulk_sibling(op.name) or "")
        near = [sibling] if sibling is not None else (succs[i] if op.kind == "all_gather" else preds[i])
        for j in near:
            if isinstance(ops[j], Gemm) and j not in taken:
                taken[j] = [i]
                break
    return taken
