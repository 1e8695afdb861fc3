"""GEMM latency on the tensor cores of many chips at once (numpy over ArchArrays; no Python loop over chips).

Model (all formulas per chip; R = tc_rows, C = tc_cols, a GEMM is ``batch`` products (M x K) @ (K x N)):

Compute. Each tensor core is a weight-stationary systolic array: a K x N operand tile of R x C stays in
the array while the M rows of the other operand stream through. Tiles are padded, never exact divisors:
``tiles = batch * ceil(K/R) * ceil(N/C)``. A tile takes ``2R + C + rows - 2`` cycles (R to load the
weights, R + C - 2 to fill and drain the skewed pipeline, one per streamed row: the weight-stationary
fold of SCALE-Sim, Samajdar et al., ISPASS 2020). Tiles are dealt round-robin to the ``cores`` cores;
if there are fewer tiles than cores, the streamed dimension is split too (``s = cores // tiles`` parts)
so every core works. The compiler may swap the operand roles (C^T = B^T A^T, i.e. M <-> N); we take the
faster orientation. compute_s = cycles / freq_hz / matrix_efficiency.

Memory. The GLB (S = glb_bytes / bytes_per_element words) holds an output block bm x bn that stays
resident while K-panels of depth R of both operands stream through, double-buffered:
``bm*bn + 2R(bm + bn) <= S``. Square blocks b = floor(sqrt(4R^2 + S) - 2R); if a whole dimension fits
in b the block takes all of it and grows along the other dimension. HBM traffic per product, in
elements, is then ``M*N + ceil(N/bn)*M*K + ceil(M/bm)*K*N``: the result is written once, A is re-read
once per block column, B once per block row. When the output fits (in particular when operands + result
fit) this is the compulsory ``MN + MK + KN``; as the GLB shrinks the re-reads grow as ~2MNK/b.
memory_s = traffic_bytes / (hbm_bandwidth_Bps * memory_efficiency).

latency_s = max(compute_s, memory_s) + op_overhead_s.

Bandwidth assumptions: the cores share the GLB capacity and the HBM bandwidth, but each core has its
own GLB operand port sized to feed its array every cycle (R + C words in, C out) -- unlike the
reference, whose cores share one 64-word/cycle port so that extra tensor cores barely help.

All of the above is the paper's template (chips without the on-chip hierarchy). Chips with GLB banks,
core buffers and a network (``Accelerator.has_hierarchy``) are costed by ``phaze.cost.gemm_chip``: a
blocked schedule below the GLB, GLB bandwidth as its own term, bandwidth shared between concurrent ops.
"""
from __future__ import annotations

import numpy as np

from phaze.cost.common import as_cores, ceil_div
from phaze.errors import ConfigError
from phaze.hardware.accelerator import ArchArrays
from phaze.workload.ops import Gemm


def _check(g: Gemm) -> None:
    for f in ("batch", "m", "n", "k", "bytes_per_element"):
        v = getattr(g, f)
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ConfigError(f"GEMM {g.name!r}: '{f}' must be a positive integer, got {v!r}")


def gemm_cycles(g: Gemm, rows: np.ndarray, cols: np.ndarray, cores: np.ndarray) -> np.ndarray:
    """Cycles of the slowest core, the faster of the two operand orientations (see module docstring)."""

    def orient(stream: int, stationary: int) -> np.ndarray:
        tiles = g.batch * ceil_div(g.k, rows) * ceil_div(stationary, cols)
        split = np.clip(cores // tiles, 1, stream)  # fewer tiles than cores: split the streamed rows
        per_core = ceil_div(tiles * split, cores)
        return per_core * (2 * rows + cols - 2 + ceil_div(stream, split))

    return np.minimum(orient(g.m, g.n), orient(g.n, g.m))


def gemm_hbm_bytes(g: Gemm, glb_bytes: np.ndarray, rows: np.ndarray, *, accumulate: bool = True) -> np.ndarray:
    """HBM traffic (bytes) of the blocked schedule of the module docstring. A GEMM that adds into a buffer
    (``g.accumulate_bytes``, a weight gradient into the persistent gradient buffer) reads and writes that
    buffer's ``batch * M * N`` elements instead of writing its result once; ``accumulate`` False leaves that to
    the caller (the GPU model charges it as its own pass, ``phaze.cost.gpu_layer.grad_accumulate_s``)."""
    e = g.bytes_per_element
    m, n, k = g.m, g.n, g.k
    s = np.asarray(glb_bytes, np.float64) / e
    kap = np.asarray(rows, np.float64)
    b = np.maximum(1.0, np.floor(np.sqrt(4 * kap * kap + s) - 2 * kap))
    wide = np.floor((s - 2 * kap * m) / (m + 2 * kap))  # block width when all M rows fit in a block
    tall = np.floor((s - 2 * kap * n) / (n + 2 * kap))  # block height when all N columns fit
    m_fits, n_fits = m <= b, n <= b
    bm = np.where(m_fits, m, np.where(n_fits, np.clip(tall, 1, m), b))
    bn = np.where(m_fits, np.clip(wide, 1, n), np.where(n_fits, n, b))
    elems = np.ceil(n / bn) * (m * k) + np.ceil(m / bm) * (k * n)
    out_bytes = 2 * g.accumulate_bytes if accumulate and g.accumulate_bytes else e
    return g.batch * (e * elems + out_bytes * m * n)


def _paper_terms(gemm: Gemm, arch: ArchArrays, c: np.ndarray, hbm_bytes: np.ndarray) -> dict:
    cycles = gemm_cycles(gemm, arch.tc_rows, arch.tc_cols, c)
    compute_s = cycles / (arch.freq_hz * arch.matrix_efficiency)
    memory_s = hbm_bytes / (arch.hbm_bandwidth_Bps * arch.memory_efficiency)
    zero = np.zeros(len(c))
    return {"compute_s": compute_s, "glb_s": zero, "hbm_s": memory_s, "glb_bytes": zero,
            "hbm_bytes": hbm_bytes.astype(np.float64),
            "latency_s": np.maximum(compute_s, memory_s) + arch.op_overhead_s}


def gemm_terms(gemm: Gemm, arch: ArchArrays, cores=1, pass_splits=None) -> dict:
    """Per-chip arrays: compute_s, glb_s, hbm_s (each term alone), glb_bytes, hbm_bytes and latency_s =
    max of the terms + overhead. Paper-template chips have no GLB term (glb_s = glb_bytes = 0).
    ``pass_splits``: the accumulator pass splits the chip template may choose from (None: all,
    ``phaze.cost.gemm_chip.PASS_SPLITS``; the energy panel fixes the one its ZigZag runs were made on)."""
    _check(gemm)
    c = as_cores(cores, arch.num_tc, f"GEMM {gemm.name!r}")
    last = arch.memo("gemm_hbm_last", lambda a: {})  # the bounds cost one GEMM on every core count in a row
    if last.get("gemm") != gemm:
        last.update(gemm=gemm, bytes=gemm_hbm_bytes(gemm, arch.glb_bytes, arch.tc_rows))
    hbm = last["bytes"]
    hier = arch.memo("has_hierarchy", lambda a: np.asarray(a.glb_banks) > 0)
    if not hier.any():
        return _paper_terms(gemm, arch, c, hbm)
    from phaze.cost.gemm_chip import gemm_chip_terms

    if hier.all():
        return gemm_chip_terms(gemm, arch, c, hbm, pass_splits)
    paper = _paper_terms(gemm, arch, c, hbm)
    idx = np.flatnonzero(hier)
    chip = gemm_chip_terms(gemm, arch.select(idx), c[idx], hbm[idx], pass_splits)
    out = {k: v.astype(np.float64).copy() for k, v in paper.items()}
    for k in out:
        out[k][idx] = chip[k]
    return out


def gemm_latency_s(gemm: Gemm, arch: ArchArrays, cores=1) -> np.ndarray:
    """Latency (s) of ``gemm`` on each chip of ``arch`` spread over ``cores`` tensor cores (int or array)."""
    return gemm_terms(gemm, arch, cores)["latency_s"]
