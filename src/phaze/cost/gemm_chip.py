"""GEMM on a chip with the on-chip hierarchy (GLB banks, core operand buffer and accumulator, network).

Blocked schedule one level below the GLB, per orientation (streamed rows S, stationary columns T; the
faster of S = M and S = N is taken, as in ``phaze.cost.gemm``), R = tc_rows, C = tc_cols, e bytes/element:

Work split. An output column block (``batch * ceil(T/C)`` of them) is owned by one core, which loops over
all ``kt = ceil(K/R)`` weight tiles of it, so partial sums stay in that core's accumulator. With fewer
blocks than cores the streamed rows are split (``s`` parts), and only when that is not enough K is split
(``q`` parts), whose partial sums are reduced through the GLB (fp32 write + read per part).

Accumulator. ``acc_rows = tc_acc_bytes / (4 C)`` fp32 rows of C outputs. A core's rows are processed in
passes of ``mb = min(rows, acc_rows)``: for each pass every weight tile is loaded and ``mb`` input rows
stream through it. No accumulator row (acc_rows = 0) spills every partial sum to the GLB.

Weights. The operand buffer double-buffers weight tiles when it holds two (``tc_operand_bytes >=
2 R C e``): the next tile is loaded (R cycles, one row per cycle) while the current one streams, so a tile
costs ``max(mb, R)`` cycles and only the first load is exposed. Otherwise each tile costs ``R + mb``. The
skewed pipeline fills and drains once per core and GEMM (``R + C - 2``): with double-buffered weights the
next tile's inputs enter behind the current tile's last row (as a TPU MXU does), so it is not paid per
tile. When a core's whole weight panel (``kt_core * R * C * e``) fits the operand buffer it is loaded once,
not once per pass.

GLB traffic (bytes between the GLB and the core buffers; HBM fills are the HBM term's, not counted here):
inputs ``batch * S * K * ceil(T/C)`` (each column block reads the input panel), weights
``batch * K * T * s * passes`` (once per row part and per pass unless the panel fits), outputs
``batch * S * T * e`` written once, plus the K-split reduction and accumulator spills in fp32.

Ends of the GEMM: the first weight tile arrives at the op's GLB bandwidth (beyond the R cycles the
compute count holds for it) and the last pass's outputs (``mb x C`` elements) drain from the accumulator
to the GLB after the last tile; neither overlaps anything of this GEMM, so both add to its compute time
(ZigZag's "onloading" and "offloading" name the same two ends).

Time: compute = cycles / (f * matrix_efficiency) + the two ends; glb = traffic / the op's GLB bandwidth; hbm = the
blocked HBM traffic of ``gemm_hbm_bytes`` / the op's HBM bandwidth (``phaze.cost.onchip``);
latency = max(compute, glb, hbm) + op_overhead_s.
"""
from __future__ import annotations

import numpy as np

from phaze.cost.common import ceil_div
from phaze.cost.onchip import glb_bandwidth_Bps, hbm_bandwidth_Bps
from phaze.hardware.accelerator import ArchArrays
from phaze.workload.ops import Gemm

ACC_BYTES = 4  # fp32 accumulators (TPU MXUs and tensor cores accumulate bf16/fp16 products in fp32)


def _chip_consts(arch: ArchArrays) -> dict:
    """Per-chip float arrays every GEMM needs (computed once per ArchArrays)."""
    def build(a: ArchArrays) -> dict:
        f = np.asarray(a.freq_hz, np.float64)
        return {"R": np.asarray(a.tc_rows, np.float64), "C": np.asarray(a.tc_cols, np.float64),
                "operand": np.asarray(a.tc_operand_bytes, np.float64),
                "acc": np.asarray(a.tc_acc_bytes, np.float64),
                "cycle_s": 1.0 / (f * np.asarray(a.matrix_efficiency, np.float64)),
                "overhead": np.asarray(a.op_overhead_s, np.float64)}

    return arch.memo("gemm_chip_consts", build)


def _cdiv(a, b):
    """ceil(a / b) on float64 arrays of integers (exact below 2**53; these are at most ~1e12)."""
    return np.ceil(np.asarray(a, np.float64) / b)


def _orient(g: Gemm, S: int, T: int, k: dict, cores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    R, C = k["R"], k["C"]
    e = float(g.bytes_per_element)
    kt = _cdiv(g.k, R)
    nt = _cdiv(T, C)
    units = g.batch * nt
    s = np.clip(np.floor(cores / units), 1, S)                       # row parts per column block
    q = np.clip(np.floor(cores / (units * s)), 1, kt)                # K parts, only when rows are exhausted
    per_core = _cdiv(units * s * q, cores)                           # parts on the busiest core
    rows = _cdiv(S, s)                                               # streamed rows of one part
    kt_part = _cdiv(kt, q)                                           # weight tiles of one part
    acc_rows = np.floor(k["acc"] / (ACC_BYTES * C))
    spill = acc_rows < 1
    mb = np.where(spill, rows, np.minimum(rows, np.maximum(acc_rows, 1)))
    full = np.floor(rows / mb)
    rem = rows - full * mb
    double = k["operand"] >= 2 * R * C * e
    load = np.where(double, 0.0, R)

    def tile(r):
        return np.where(double, np.maximum(r, R), r + load)

    stream = kt_part * (full * tile(mb) + np.where(rem > 0, tile(rem), 0.0))
    cycles = per_core * stream + R + (R + C - 2)
    w_loads = np.where(kt_part * R * C * e <= k["operand"], 1.0, full + (rem > 0))
    b = float(g.batch)
    glb = (b * e * S * g.k) * nt + (b * g.k * T * e) * s * w_loads + b * S * T * e
    glb = glb + np.where(q > 1, (2.0 * b * S * T * ACC_BYTES) * q, 0.0)
    glb = glb + np.where(spill, (2.0 * b * S * T * ACC_BYTES) * kt, 0.0)
    last = np.where(rem > 0, rem, mb) * C * e  # the last pass's outputs, written back after the last tile
    return cycles, glb, last


def _core_kinds(arch: ArchArrays) -> tuple[np.ndarray, int]:
    """Per chip, an integer naming its (R, C, operand buffer, accumulator): the only fields a core's cycles
    and GLB traffic depend on (a space of ~10^5 chips has a few dozen); and how many there are."""
    def build(a: ArchArrays):
        code = np.zeros(len(a), np.int64)
        for f in ("tc_rows", "tc_cols", "tc_operand_bytes", "tc_acc_bytes"):
            u, inv = np.unique(np.asarray(getattr(a, f)), return_inverse=True)
            code = code * len(u) + inv.ravel()
        u, inv = np.unique(code, return_inverse=True)
        return inv.ravel(), len(u)

    return arch.memo("core_kinds", build)


def _cycles_and_traffic(g: Gemm, arch: ArchArrays, k: dict, c: np.ndarray):
    """_orient of both orientations, evaluated once per distinct (core kind, core count) and spread back."""
    kinds, n_kinds = _core_kinds(arch)
    cu, cinv = np.unique(c, return_inverse=True)
    code = kinds * len(cu) + cinv.ravel()
    ucode, first, inv = np.unique(code, return_index=True, return_inverse=True)
    if len(ucode) * 2 > len(c):  # hardly any repetition: compute directly
        sub, cs, inv = k, c, None
    else:
        sub = {key: v[first] for key, v in k.items()}
        cs = c[first]
    o1 = _orient(g, g.m, g.n, sub, cs)
    o2 = o1 if g.m == g.n else _orient(g, g.n, g.m, sub, cs)
    if inv is not None:
        inv = inv.ravel()
        o1, o2 = tuple(x[inv] for x in o1), tuple(x[inv] for x in o2)
    return o1, o2


def gemm_chip_terms(g: Gemm, arch: ArchArrays, cores: np.ndarray, hbm_bytes: np.ndarray) -> dict:
    """Per-chip terms of the module docstring: compute_s, glb_s, hbm_s, glb_bytes, hbm_bytes, latency_s
    (the faster orientation's), for chips that all have the hierarchy."""
    k = _chip_consts(arch)
    c = np.broadcast_to(np.asarray(cores, np.float64), (len(arch),))
    glb_bw = glb_bandwidth_Bps(arch, "tc", c)
    hbm_bytes = np.asarray(hbm_bytes, np.float64)
    hbm_s = hbm_bytes / hbm_bandwidth_Bps(arch, "tc", c)
    (cyc1, glb1, last1), (cyc2, glb2, last2) = _cycles_and_traffic(g, arch, k, c)
    # exposed at the ends of the GEMM (nothing of it left to overlap with): the first weight tile arrives at
    # the op's GLB rate (the compute cycles already hold R cycles for it) and the last pass's outputs drain
    first = np.maximum(0.0, k["R"] * k["C"] * g.bytes_per_element / glb_bw - k["R"] * k["cycle_s"])
    c1 = cyc1 * k["cycle_s"] + first + last1 / glb_bw
    c2 = cyc2 * k["cycle_s"] + first + last2 / glb_bw
    l1 = np.maximum(np.maximum(c1, glb1 / glb_bw), hbm_s)
    l2 = np.maximum(np.maximum(c2, glb2 / glb_bw), hbm_s)
    take = l2 < l1
    compute_s = np.where(take, c2, c1)
    glb_bytes = np.where(take, glb2, glb1)
    return {"compute_s": compute_s, "glb_s": glb_bytes / glb_bw, "hbm_s": hbm_s, "glb_bytes": glb_bytes,
            "hbm_bytes": hbm_bytes, "latency_s": np.minimum(l1, l2) + k["overhead"]}
