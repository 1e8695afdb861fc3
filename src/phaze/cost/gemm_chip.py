"""GEMM on a chip with the on-chip hierarchy (GLB banks, core operand buffer and accumulator, network).

Blocked schedule one level below the GLB, per orientation (streamed rows S, stationary columns T; the
faster of S = M and S = N is taken, as in ``phaze.cost.gemm``), R = tc_rows, C = tc_cols, e bytes/element:

Work split. An output column block (``batch * ceil(T/C)`` of them) is owned by one core, which loops over
all ``kt = ceil(K/R)`` weight tiles of it, so partial sums stay in that core's accumulator. With fewer
blocks than cores the streamed rows are split (``s`` parts), and only when that is not enough K is split
(``q`` parts), whose partial sums are reduced through the GLB (fp32 write + read per part).

Accumulator. ``acc_rows = tc_acc_bytes / (4 C)`` fp32 rows of C outputs. A core's rows are processed in
passes of ``mb = min(rows, acc_rows) / split`` rows (rounded up): for each pass every weight tile is loaded
and ``mb`` input rows stream through it. No accumulator row (acc_rows = 0) spills every partial sum to the GLB.

Pass split (``PASS_SPLITS``; docs/chip-validation.md, session 24). The read port of the accumulator is free
during a pass's first tile (it only writes), so the previous pass's read-out hides there, and what is left
after the last tile is the largest pass's read-out (``last_acc``): shorter passes shorten that end and the
last pass's outputs at the GLB's rate, at no cost where the weight panel stays in the operand buffer, and
at one more load of the column block's weights per pass where it does not. Each orientation is costed at
every split; the split taken is the one with the fewest passes whose time is within ``PASS_SPLIT_GAIN`` of
the fastest (so weights are not reloaded for a negligible gain), and the faster orientation then as before.
Every candidate is costed once per distinct (core kind, core count, GLB bytes per cycle) of the chips
(``_groups``): nothing else enters a GEMM's cycles.

Used rows and columns. A weight tile fills ``k_rows = min(K, R)`` array rows and ``c_cols = min(T, C)``
columns (K < R: attention scores, whose K is the head dimension). Loading a tile writes one array row per
cycle, so it takes ``k_rows`` cycles, and the skewed pipeline fills and drains over the used rows and
columns only (``k_rows + c_cols - 2``): the K slice sits in the rows next to the array's output edge, so
partial sums start there and no idle row or column delays the last result. Spatial under-use is in the
cycle count itself: a tile streams its rows in ``rows`` cycles however few of the R rows it fills.

Accumulator port rate (issue 34 item 1a). Each streamed row reads and writes one fp32 accumulator row per
weight tile; a tile of r rows streams in ``r / acc_row_rate`` cycles when the accumulator's macro moves
less than a row per cycle (``phaze.hardware.supply.acc_row_rate``: ceil(row / port) accesses of whole
clock cycles each; 1 where it keeps up).

Ragged last K tile (item 1c). When K is not a multiple of R (one K part), the last weight tile of a pass
fills ``k_last = K - (kt - 1) R`` rows: its input rows and weights are k_last elements (the tile-by-tile
bytes), and its weights load in k_last cycles.

Weights. The operand buffer double-buffers weight tiles when it holds two (``tc_operand_bytes >=
2 R C e``): the next tile is loaded while the current one streams, so a tile costs ``max(mb, k_rows)``
cycles and only the first load is exposed. Otherwise each tile costs ``k_rows + mb``. The skewed pipeline
fills and drains once per core and GEMM: with double-buffered weights the next tile's inputs enter behind
the current tile's last row (as a TPU MXU does), so it is not paid per tile. When the weight panel of
one part (a column block's ``kt_part * R * C * e``) fits the operand buffer it is loaded once per part,
not once per row pass; a core that owns several parts loads each part's panel (tile by tile, its
weights are spread over that part's row passes only).

GLB traffic (bytes between the GLB and the core buffers; HBM fills are the HBM term's, not counted here):
inputs ``batch * S * K * ceil(T/C)`` (each column block reads the input panel), weights
``batch * K * T * s * passes`` (once per row part and per pass unless the panel fits), outputs
``batch * S * T * e`` written once, plus the K-split reduction and accumulator spills in fp32. A GEMM that
adds into a buffer (``Gemm.accumulate_bytes`` = a: a weight gradient into the persistent gradient buffer,
whose HBM side is ``phaze.cost.gemm.gemm_hbm_bytes``) instead reads each output block's old sums from the
GLB into the accumulator before its first tile and writes the new sums back: ``batch * S * T * 2a`` (the
buffer passes through the GLB on its way to and from HBM), one more accumulator row write per output row,
and a pass's old sums enter while the previous pass drains (the first pass's are loaded with the first
weight tile, an end like the last pass's drain).

Overlap, tile by tile (not the max of totals). A core overlaps a weight tile's GLB transfers with that
tile's streaming only: its input rows are read while it streams, the next tile's weights are loaded into
the operand buffer's spare half, so a tile takes ``max(its cycles, its bytes / bandwidth)`` and the tiles
add up. When the tiles of a pass are alike this equals the max of the totals; it differs where transfers
bunch: a pass's outputs leave the accumulator while the next pass runs, and with an accumulator that holds
one pass (``2 mb > acc_rows``) row i must be out before the next pass's first tile overwrites it, so the
whole drain falls in that one tile (a double-buffered accumulator spreads it over the next pass). This is
the stall ZigZag charges for a level that is not double-buffered (its memory-updating window is the last
loop's span, not the period).

Access granularity. A GLB bank moves whole words of ``glb_bank_width_bytes``. Without input staging,
inputs stream from the GLB straight into the array, one row of ``k_rows`` elements per cycle, so each row
occupies ``ceil(row bytes / width)`` bank words of the op's bandwidth: a 4-row array reading 8-byte rows
from 32-byte banks uses a whole word per row, 4x the bytes it consumes. With input staging
(``input_staging``, issue 34 item 1d: a two-word buffer at the array's input edge, costed in
``phaze.hardware.chip_area`` and ``phaze.hardware.power``) a bank word is taken whole and fed to the array
row by row over several cycles, so input rows are charged their bytes (the tile's input panel is laid out
in the GLB row after row of k_rows elements, so one word holds consecutive rows). Weight tiles (into the operand buffer), output blocks and spilled partial sums (out of and into the
accumulator) move as blocks between buffers and are rounded up to whole words once per block. ZigZag's
ports behave the same way: a transfer takes whole port cycles.

Ends of the GEMM: the first weight tile arrives at the op's GLB bandwidth (beyond the k_rows cycles the
compute count holds for it) and the last pass's outputs (``mb x c_cols`` elements) drain from the
accumulator to the GLB after the last tile; neither overlaps anything of this GEMM, so both add to its
time (ZigZag's "onloading" and "offloading" name the same two ends). The last pass's rows leave through the
accumulator's read port, ``acc_row_rate``'s cycles a row, whose partial-sum reads keep it busy through the
last tile when a pass has two or more tiles: that end is max(its bytes at the GLB's rate, its rows x cycles
per row); with one tile per pass only the last row's read is exposed (docs/chip-validation.md, session 21).

Time: compute = cycles / (f * matrix_efficiency) + the two ends (the array alone); glb = the larger of
traffic / the op's GLB bandwidth and the tile-by-tile time when transfers stall the array. A core's tiles
and the two ends move at that core's slice (the op's bandwidth / its cores: item 1b), the total traffic at
the op's; hbm = the
blocked HBM traffic of ``gemm_hbm_bytes`` / the op's HBM bandwidth (``phaze.cost.onchip``);
latency = max(compute, glb, hbm) + op_overhead_s.
"""
from __future__ import annotations

import numpy as np

from phaze.cost.onchip import glb_bandwidth_Bps, hbm_bandwidth_Bps
from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.supply import acc_row_rate
from phaze.workload.ops import Gemm

PASS_SPLITS = (1, 2, 4, 8)  # passes of 1, 1/2, 1/4, 1/8 of the rows the accumulator holds (module docstring)
PASS_SPLIT_GAIN = 0.01  # a split with more passes is taken only if it is over 1% faster (a schedule choice)
ACC_BYTES = 4  # fp32 accumulators (TPU MXUs and tensor cores accumulate bf16/fp16 products in fp32)


def _chip_consts(arch: ArchArrays) -> dict:
    """Per-chip float arrays every GEMM needs (computed once per ArchArrays)."""
    def build(a: ArchArrays) -> dict:
        f = np.asarray(a.freq_hz, np.float64)
        return {"R": np.asarray(a.tc_rows, np.float64), "C": np.asarray(a.tc_cols, np.float64),
                "operand": np.asarray(a.tc_operand_bytes, np.float64),
                "acc": np.asarray(a.tc_acc_bytes, np.float64),
                "width": np.asarray(a.glb_bank_width_bytes, np.float64),
                "staged": np.asarray(a.input_staging) > 0,  # input staging buffer (issue 34 item 1d)
                # clock cycles per accumulator row on each port (1 when the macro keeps up; issue 34 1a)
                "acc_cpr": 1.0 / acc_row_rate(a),
                "cycle_s": 1.0 / (f * np.asarray(a.matrix_efficiency, np.float64)),
                "overhead": np.asarray(a.op_overhead_s, np.float64)}

    return arch.memo("gemm_chip_consts", build)


def _cdiv(a, b):
    """ceil(a / b) on float64 arrays of integers (exact below 2**53; these are at most ~1e12)."""
    return np.ceil(np.asarray(a, np.float64) / b)


def _granular(nbytes, width):
    """Bytes of GLB bandwidth a vector of ``nbytes`` occupies: whole bank words of ``width`` bytes."""
    return np.ceil(nbytes / width) * width


# per (core kind, core count) quantities _orient returns, in this order (spread back to chips as one array)
FIELDS = ("cycles", "glb", "n_mb", "n_rem", "cyc_mb", "cyc_rem", "reg_mb", "reg_rem", "events", "drain_tiles",
          "out", "k_rows", "fixed", "first_bytes", "last_bytes", "glb_write", "acc_accesses", "w_rows",
          "rag_a1", "rag_dr", "rag_rem", "save_mb", "save_rem", "last_acc", "in_bytes")


def _orient(g: Gemm, S: int, T: int, k: dict, cores: np.ndarray, split=1) -> dict:
    """Per (core kind, core count), the FIELDS: the compute cycles of the busiest core, its GLB bytes, and
    what the tile-by-tile time needs (module docstring): tiles of mb and of rem rows (counts, cycles, GLB
    bytes in whole bank words without outputs), drain events, the tiles a drain spreads over, a pass's
    output bytes, the first weight tile's rows, the cycles paid once (its load and the fill/drain), its bytes
    and the last pass's output bytes."""
    R, C, width = k["R"], k["C"], k["width"]
    e = float(g.bytes_per_element)
    kt = _cdiv(g.k, R)
    nt = _cdiv(T, C)
    units = g.batch * nt
    s = np.clip(np.floor(cores / units), 1, S)                       # row parts per column block
    q = np.clip(np.floor(cores / (units * s)), 1, kt)                # K parts, only when rows are exhausted
    per_core = _cdiv(units * s * q, cores)                           # parts on the busiest core
    rows = _cdiv(S, s)                                               # streamed rows of one part
    kt_part = _cdiv(kt, q)                                           # weight tiles of one part
    k_rows = np.minimum(float(g.k), R)                               # array rows a weight tile fills
    c_cols = np.minimum(float(T), C)                                 # array columns a weight tile fills
    acc_rows = np.floor(k["acc"] / (ACC_BYTES * C))
    spill = acc_rows < 1
    mb = np.where(spill, rows, np.minimum(rows, np.maximum(acc_rows, 1)))
    mb = np.where(spill, rows, np.ceil(mb / split))  # passes of 1/split the rows it holds (PASS_SPLITS)
    full = np.floor(rows / mb)
    rem = rows - full * mb
    double = k["operand"] >= 2 * R * C * e

    cpr = k["acc_cpr"]  # cycles per streamed row: the accumulator reads and writes one fp32 row for each

    def tile(r, load_rows=k_rows):
        return np.where(double, np.maximum(r * cpr, load_rows), r * cpr + load_rows)

    cyc_mb, cyc_rem = tile(mb), np.where(rem > 0, tile(rem), 0.0)
    n_mb, n_rem = per_core * kt_part * full, per_core * kt_part * (rem > 0)
    # a ragged last K tile (K not a multiple of R, one K part): it fills k_last rows, so its input rows and
    # weights are that many elements, and its weights load in k_last cycles (issue 34 item 1c)
    k_last = float(g.k) - (kt - 1.0) * R
    ragged = (q == 1) & (kt >= 2) & (k_last < R)
    rag_mb, rag_rem = np.where(ragged, per_core * full, 0.0), np.where(ragged, per_core * (rem > 0), 0.0)
    # first weight tile (k_rows cycles, one array row per cycle) and one skewed fill/drain over the rows
    # and columns the tiles use
    fixed = k_rows + (k_rows + c_cols - 2)
    cycles = n_mb * cyc_mb + n_rem * cyc_rem + fixed
    # the ragged tile's weights load during the tile before it (double buffer) or before it streams
    cycles = cycles - rag_mb * (cyc_mb - tile(mb, k_last)) - rag_rem * np.where(rem > 0, cyc_rem - tile(rem, k_last), 0.0)
    panel_fits = kt_part * R * C * e <= k["operand"]
    w_loads = np.where(panel_fits, 1.0, full + (rem > 0))
    b = float(g.batch)
    acc_in = float(g.accumulate_bytes)                               # old sums read per output (0: none)
    out_e = acc_in if acc_in else e                                  # bytes written per output element
    glb = (b * e * S * g.k) * nt + (b * g.k * T * e) * s * w_loads + b * S * T * (out_e + acc_in)
    glb = glb + np.where(q > 1, (2.0 * b * S * T * ACC_BYTES) * q, 0.0)
    glb = glb + np.where(spill, (2.0 * b * S * T * ACC_BYTES) * kt, 0.0)
    # what the energy model counts (all cores together): the GLB bytes written (the outputs, and half of
    # the fp32 K-split partials and spills: each is written once and read back once), the accumulator row
    # accesses (each streamed row adds one row of C partial sums per weight tile of its column block: a read
    # and a write, the first tile's read being the previous pass's drain to the GLB) and the weight rows
    # loaded into the operand buffer (k_rows per tile, once per row part and pass unless the panel fits),
    # each written once and read once into the array
    glb_write = (b * S * T * out_e + np.where(q > 1, (b * S * T * ACC_BYTES) * q, 0.0)
                 + np.where(spill, (b * S * T * ACC_BYTES) * kt, 0.0))
    # accumulating: each output row's old sums are written into the accumulator once (charged as an access)
    acc_accesses = np.where(spill, 0.0, b * S * nt * (kt + (1.0 if acc_in else 0.0)))
    w_rows = b * nt * s * q * kt_part * w_loads * k_rows
    # GLB bytes per tile in whole bank words (module docstring, access granularity): its input rows (k_rows
    # elements each, read one per cycle straight into the array), its share of the weight tile (a block
    # into the operand buffer: every tile once per pass, or a part's panel once over that part's row
    # passes -- not over all the core's passes: the parts of a core (column blocks) have different
    # weights, and the panel that fits is one part's), spilled partial sums (written and read back as
    # blocks)
    row_passes = full + (rem > 0)
    passes = per_core * row_passes
    staged = k["staged"]

    def row_v(row_elems):  # GLB bytes an input row occupies: whole bank words, or its bytes when staged
        return np.where(staged, row_elems * e, _granular(row_elems * e, width))

    in_v = row_v(k_rows)
    w_share = np.where(panel_fits, 1.0 / row_passes, 1.0)
    w_tile = _granular(k_rows * c_cols * e, width) * w_share
    # bytes a ragged tile of r rows moves less than a full one (its rows and weights are k_last elements)
    w_save = w_tile - _granular(k_last * c_cols * e, width) * w_share

    def save(r):
        return np.where(ragged, r * (in_v - row_v(np.maximum(k_last, 1.0))) + w_save, 0.0)

    def reg(r):
        return r * in_v + w_tile + np.where(spill, 2.0 * _granular(r * c_cols * ACC_BYTES, width), 0.0)

    def old_sums(r):  # a pass's old sums into the accumulator (accumulating GEMMs only), as a block
        return _granular(r * c_cols * acc_in, width) if acc_in else 0.0

    acc_double = (2 * mb <= acc_rows) & ~spill
    # where the ragged tiles fall: the last tile of a pass, so never the drain tile of a one-pass
    # accumulator (a pass's first); with a double-buffered one every pass after the first spreads its
    # predecessor's drain over all its tiles, the ragged one too
    events = np.maximum(passes - 1.0, 0.0)
    rag_dr = np.where(acc_double, np.minimum(rag_mb, events), 0.0)
    return {"cycles": cycles, "glb": glb, "n_mb": n_mb, "n_rem": n_rem, "cyc_mb": cyc_mb, "cyc_rem": cyc_rem,
            "reg_mb": reg(mb), "reg_rem": np.where(rem > 0, reg(rem), 0.0),
            "events": events, "drain_tiles": np.where(acc_double, kt_part, 1.0),
            "out": (_granular(mb * c_cols * out_e, width) + old_sums(mb)
                    + np.where(q > 1, 2.0 * _granular(mb * c_cols * ACC_BYTES, width), 0.0)),
            "k_rows": k_rows, "fixed": fixed,
            "first_bytes": _granular(k_rows * c_cols * e, width) + old_sums(mb),
            "last_bytes": _granular(np.where(rem > 0, rem, mb) * c_cols * out_e, width),
            "glb_write": glb_write, "acc_accesses": acc_accesses, "w_rows": w_rows,
            "rag_a1": rag_mb - rag_dr, "rag_dr": rag_dr, "rag_rem": rag_rem, "save_mb": save(mb),
            "save_rem": np.where(rem > 0, save(rem), 0.0), "in_bytes": (b * e * S * g.k) * nt,
            # the last pass's rows leave through the accumulator's read port, cpr cycles a row: after the
            # last tile, whose partial-sum reads keep that port busy (kt_part >= 2; no next pass's first
            # tile to hide them in). With a remainder pass the largest pass's rows are exposed either way: a
            # full pass's read-out does not fit a shorter pass's first tile, and a remainder pass first leaves a
            # full pass last. With one tile per pass no partial sum is read, so each row leaves as it
            # is written and only the last row's read is exposed (none without accumulator rows: spill)
            "last_acc": np.where(spill, 0.0, np.where(kt_part >= 2, mb, 1.0) * cpr)}


def _core_kinds(arch: ArchArrays) -> tuple[np.ndarray, int]:
    """Per chip, an integer naming its (R, C, operand buffer, accumulator, GLB bank width, clock, input
    staging): the only fields a core's cycles and GLB words depend on (the clock through the accumulator's port rate) (a space of ~10^5 chips has a few dozen); and how many."""
    def build(a: ArchArrays):
        code = np.zeros(len(a), np.int64)
        for f in ("tc_rows", "tc_cols", "tc_operand_bytes", "tc_acc_bytes", "glb_bank_width_bytes", "freq_hz",
                  "input_staging"):
            u, inv = np.unique(np.asarray(getattr(a, f)), return_inverse=True)
            code = code * len(u) + inv.ravel()
        u, inv = np.unique(code, return_inverse=True)
        return inv.ravel(), len(u)

    return arch.memo("core_kinds", build)


def _groups(arch: ArchArrays, c: np.ndarray, bpc: np.ndarray):
    """(first index, inverse) of the distinct (core kind, core count, GLB bytes per cycle) triples of the
    chips, or None when hardly any repeat: a GEMM's cycles depend on nothing else, so its candidates are
    evaluated once per triple. Remembered for the last few core-count arrays (an op's cost is asked for the
    same counts by every GEMM of a layer), checked against the bytes per cycle (a ``bandwidth_cap`` copy of
    the chips shares this cache and has other bytes per cycle)."""
    cache = arch.memo("gemm_chip_groups", lambda a: {})
    key = np.ascontiguousarray(c).tobytes()  # the counts themselves: no hash collision can alias two
    hit = cache.get(key)
    if hit is None or not np.array_equal(hit[0], bpc):
        kinds, _ = _core_kinds(arch)
        cu, cinv = np.unique(c, return_inverse=True)
        bu, binv = np.unique(bpc, return_inverse=True)
        code = (kinds * len(cu) + cinv.ravel()) * len(bu) + binv.ravel()
        ucode, first, inv = np.unique(code, return_index=True, return_inverse=True)
        if len(cache) >= 8 and key not in cache:
            cache.pop(next(iter(cache)))
        hit = cache[key] = (bpc.copy(), None if len(ucode) * 2 > len(c) else (first, inv.ravel()))
    return hit[1]


def _stack(o: dict, n: int) -> np.ndarray:
    """_orient's FIELDS as one (fields, n) array, with the drain folded per kind (events x the tiles a
    drain spreads over in place of events, the bytes of a tile carrying its share in place of
    drain_tiles) and one more row, BCRIT: the GLB bytes per cycle at and above which every tile is
    compute-bound (then the tile-by-tile time is the array's time)."""
    d = o["drain_tiles"]
    o = dict(o, events=o["events"] * d, drain_tiles=o["reg_mb"] + o["out"] / d)
    out = np.empty((len(FIELDS) + 2, n))
    for i, name in enumerate(FIELDS):
        out[i] = o[name]  # a scalar fills its row (cheaper than broadcast_to per field)
    f = dict(zip(FIELDS, out))
    crit = np.maximum(f["reg_mb"], np.where(f["events"] > 0, f["drain_tiles"], 0.0)) / f["cyc_mb"]
    out[BCRIT] = np.maximum(crit, np.where(f["n_rem"] > 0, f["reg_rem"] / np.maximum(f["cyc_rem"], 1.0), 0.0))
    out[A1] = f["n_mb"] - f["events"]
    return out


BCRIT, A1 = len(FIELDS), len(FIELDS) + 1
_ALL = [FIELDS.index(f) for f in ("cycles", "glb", "k_rows", "first_bytes", "last_bytes", "last_acc")] + [BCRIT]
_ACCESS = [FIELDS.index(f) for f in ("glb_write", "acc_accesses", "w_rows", "in_bytes")]  # the energy model's counts
# what the tile-by-tile time reads: mb tiles without a drain (A1), their cycles and bytes, drain tiles,
# the drain tile's bytes, rem tiles, their cycles and bytes, the cycles paid once
_TILED = [A1] + [FIELDS.index(f) for f in ("cyc_mb", "reg_mb", "events", "drain_tiles", "n_rem", "cyc_rem",
                                          "reg_rem", "fixed", "rag_a1", "rag_dr", "rag_rem", "save_mb",
                                          "save_rem")]


def _candidates(g: Gemm, k: dict, c: np.ndarray, split) -> list[tuple[bool, np.ndarray]]:
    """Per orientation, whether it streams the M side and _orient's fields stacked (``split``: per column)."""
    sides = [(g.m, g.n)] if g.m == g.n else [(g.m, g.n), (g.n, g.m)]
    return [(S == g.m, _stack(_orient(g, S, T, k, c, split), len(c))) for S, T in sides]


def _evaluate(o: np.ndarray, inv_core: np.ndarray, inv_bpc: np.ndarray, bpc_core: np.ndarray) -> tuple:
    """(compute, GLB bytes, GLB cycles, latency cycles, access counts) of a candidate stack, one column per
    chip (or distinct chip), from their GLB cycles per byte (all the op's cores, one core) and bytes per
    cycle of one core."""
    cyc, glb, k_rows, first_b, last_b, last_acc, crit = o[_ALL]
    ends = np.maximum(first_b * inv_core - k_rows, 0.0) + np.maximum(last_b * inv_core, last_acc)
    compute = cyc + ends
    glb_c = glb * inv_bpc
    stall = np.flatnonzero(bpc_core < crit)  # some tile is GLB-bound: the tile-by-tile time is longer
    if len(stall):
        t = o[_TILED].take(stall, axis=1)
        glb_c[stall] = np.maximum(glb_c[stall], _tiled_cycles(t, inv_core[stall], ends[stall]))
    return compute, glb, glb_c, np.maximum(compute, glb_c), o[_ACCESS]


def _tiled_cycles(t: np.ndarray, inv_bpc: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The busiest core's tile-by-tile time in cycles (module docstring), from the _TILED rows ``t`` of the
    chips it is asked for, their GLB cycles per byte and their two ends (cycles).

    Each tile takes max(its cycles, its bytes at the op's bandwidth); a pass's outputs (final, or fp32
    partials of a K split written and read back) leave the accumulator while the next pass runs --
    within the next pass's first tile when the accumulator holds one pass (row i must be out before that
    tile overwrites it), spread over the whole next pass when it holds two."""
    a1, cyc_mb, reg_mb, drains, drain_b, n_rem, cyc_rem, reg_rem, fixed, rag_a1, rag_dr, rag_rem, sv_mb, sv_rem = t
    tiled = a1 * np.maximum(cyc_mb, reg_mb * inv_bpc) + drains * np.maximum(cyc_mb, drain_b * inv_bpc)
    if n_rem.any():
        tiled += n_rem * np.maximum(cyc_rem, reg_rem * inv_bpc)
    if rag_a1.any() or rag_dr.any() or rag_rem.any():  # the ragged tiles, each of its class, move less
        def less(n, cyc, b, sv):
            return n * (np.maximum(cyc, b * inv_bpc) - np.maximum(cyc, (b - sv) * inv_bpc))
        tiled -= less(rag_a1, cyc_mb, reg_mb, sv_mb) + less(rag_dr, cyc_mb, drain_b, sv_mb)
        tiled -= less(rag_rem, cyc_rem, reg_rem, sv_rem)
    return tiled + fixed + ends


def _times_cycles(o: np.ndarray, inv_bpc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the array alone with the two ends, the tile-by-tile time) in cycles from per-chip stacked FIELDS:
    the two ends are the first weight tile's bytes beyond its k_rows cycles and the last pass's outputs."""
    f = dict(zip(FIELDS, o))
    ends = (np.maximum(f["first_bytes"] * inv_bpc - f["k_rows"], 0.0)
            + np.maximum(f["last_bytes"] * inv_bpc, f["last_acc"]))
    return f["cycles"] + ends, _tiled_cycles(o[_TILED], inv_bpc, ends)


def gemm_chip_terms(g: Gemm, arch: ArchArrays, cores: np.ndarray, hbm_bytes: np.ndarray, pass_splits=None) -> dict:
    """Per-chip terms of the module docstring: compute_s, glb_s, hbm_s, glb_bytes, hbm_bytes, latency_s
    (the faster orientation's), for chips that all have the hierarchy; and the access counts the energy
    model needs (``phaze.cost.energy``), of the same orientation and all cores together: glb_write_bytes
    (of glb_bytes), acc_row_accesses (accumulator rows read and written), operand_row_loads (weight rows
    written into the operand buffers and read out into the arrays) and input_bytes (the input rows read from
    the GLB, what passes an input staging buffer); streams_m: whether that orientation
    streams the rows of the M side (else the transposed product streams N); pass_split: the PASS_SPLITS
    entry that orientation takes (passes of 1/pass_split the rows the accumulator holds). compute_s is the array's time
    alone (with the two ends); glb_s the time the GLB imposes: its total traffic at the op's bandwidth, or
    the tile-by-tile time when per-tile transfers stall the array."""
    k = _chip_consts(arch)
    c = np.broadcast_to(np.asarray(cores, np.float64), (len(arch),))
    glb_bw = glb_bandwidth_Bps(arch, "tc", c)
    hbm_bytes = np.asarray(hbm_bytes, np.float64)
    hbm_s = hbm_bytes / hbm_bandwidth_Bps(arch, "tc", c)
    cs = k["cycle_s"]
    bpc = glb_bw * cs           # GLB bytes per cycle at the op's bandwidth (all its cores)
    grp = _groups(arch, c, bpc)
    if grp is not None:  # each candidate once per distinct (core kind, core count, bytes per cycle)
        first, inv = grp
        k_u, c_u, bpc_u = {key: v[first] for key, v in k.items()}, c[first], bpc[first]
    else:
        k_u, c_u, bpc_u = k, c, bpc
    # every pass split side by side (split j of chip i in column j U + i): one _orient call per orientation
    splits = np.sort(np.asarray(pass_splits or PASS_SPLITS, np.float64))  # fewest passes first
    n_u, n_s = len(c_u), len(splits)
    k_s = {key: np.tile(v, n_s) for key, v in k_u.items()}
    c_s, bpc_s = np.tile(c_u, n_s), np.tile(bpc_u, n_s)
    inv_bpc_s = 1.0 / bpc_s
    cols = np.arange(n_u)
    best = None
    for streams_m, o in _candidates(g, k_s, c_s, np.repeat(splits, n_u)):
        # one core's tiles and ends move at that core's slice, not at all the op's cores' (issue 34 item 1b)
        ev = _evaluate(o, c_s * inv_bpc_s, inv_bpc_s, bpc_s / c_s)
        # the pass split: the fewest passes within PASS_SPLIT_GAIN of the orientation's fastest
        lat = ev[3].reshape(n_s, n_u)
        pick = np.argmax(lat <= lat.min(axis=0) * (1.0 + PASS_SPLIT_GAIN), axis=0)
        cand = tuple(x[..., pick * n_u + cols] for x in ev) + (np.full(n_u, streams_m), splits[pick])
        if best is None:
            best = cand
        else:  # the faster orientation, the first of equals
            take = cand[3] < best[3]
            best = tuple(np.where(take, a, b) for a, b in zip(cand, best))
    if grp is not None:
        best = tuple(x.take(inv, axis=-1) for x in best)
    comp, glb, glb_c, lat, counts, streams_m, split = best
    glb_write, acc_rows, w_rows, in_bytes = counts
    return {"compute_s": comp * cs, "glb_s": glb_c * cs, "hbm_s": hbm_s,
            "glb_bytes": glb, "hbm_bytes": hbm_bytes, "latency_s": np.maximum(lat * cs, hbm_s) + k["overhead"],
            "glb_write_bytes": glb_write, "acc_row_accesses": acc_rows, "operand_row_loads": w_rows,
            "input_bytes": in_bytes, "streams_m": streams_m, "pass_split": split}
