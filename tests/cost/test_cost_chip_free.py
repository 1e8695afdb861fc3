"""Issue 34 item 1: on-chip resources the GEMM model used to give away, each by a hand-computed case --
the accumulator's and vector buffer's port rate (a), a GEMM split over cores (b), a ragged last K tile (c)."""
import pytest

from phaze.cost import gemm_terms, vector_terms
from phaze.cost.onchip import glb_bandwidth_Bps
from phaze.hardware.chip_area import sram_parts
from phaze.hardware.supply import acc_row_rate, vc_row_rate
from phaze.workload.ops import Gemm, VectorOp

from chiphelpers import small_chip as chip


def test_accumulator_port_rate_slows_the_array():
    # 32x256 array, accumulator 8 R rows = 256 KiB: one bank, two ports of 512 B (the table's widest), so a
    # 1 KiB fp32 row is 2 accesses; CACTI's cycle time 0.769 ns fits one 1 GHz clock: 2 cycles per row.
    a = chip(rows=32, cols=256, acc=8 * 32 * 256 * 4, lanes=1).as_arrays()
    assert sram_parts(a)["acc"].cycle_time_s[0] == pytest.approx(0.769328e-9, rel=1e-6)
    assert acc_row_rate(a)[0] == 0.5
    # (1024 x 32) @ (32 x 256): one weight tile (32 rows, 256 columns); 256 accumulator rows -> 4 passes of
    # 256 rows, each 256 x 2 = 512 cycles (the double-buffered weight load of 32 rows hides under it);
    # first tile load 32 + fill/drain 32 + 256 - 2; the last pass's 256 x 256 x 2 B drain at the GLB rate.
    bw = glb_bandwidth_Bps(a, "tc", 1)[0] / 1e9
    g = Gemm("g", 1, 1024, 256, 32)
    one = gemm_terms(g, a, 1, pass_splits=(1,))
    assert one["compute_s"][0] == pytest.approx((4 * 512 + 32 + 286 + 256 * 256 * 2 / bw) * 1e-9, rel=1e-12)
    assert one["latency_s"][0] >= one["compute_s"][0]
    # the template splits passes (PASS_SPLITS): 32 passes of 32 rows take the same 32 x 64 = 2,048 cycles
    # (the 32-row weight load still hides: 32 <= 64), the weights stay resident (one tile), and only the last
    # 32-row pass drains after the last tile: 8x less than 256 rows
    t = gemm_terms(g, a, 1)
    assert t["compute_s"][0] == pytest.approx((32 * 64 + 32 + 286 + 32 * 256 * 2 / bw) * 1e-9, rel=1e-12)
    assert t["glb_bytes"][0] == one["glb_bytes"][0]


def test_vector_buffer_is_a_register_file_at_full_rate():
    # 128 lanes of 2 B: a 256 B row; the buffer's 16 B per lane (2 KiB, 8 rows) is under the smallest macro
    # the table builds at that width (32 words: 8 KiB, which the area model charges, at CACTI's 2.12 ns, three
    # 1 GHz clocks): it is a register file clocked with the core, so the lanes run at one row per cycle
    a = chip(lanes=128).as_arrays()
    assert sram_parts(a)["vc"].cycle_time_s[0] == pytest.approx(2.11972e-9, rel=1e-6)
    assert vc_row_rate(a)[0] == 1.0
    # 2^20 elements of one lane op each on one core: 8192 waves of 128 lanes, one cycle each
    v = VectorOp("v", "add", 1 << 20, 1.0, 6 << 20)
    assert vector_terms(v, a, 1)["compute_s"][0] == pytest.approx(8192e-9, rel=1e-12)
    # an accumulator that small is a register file too (8 rows of 4 x 4 B: 128 B, under 32 words of 16 B)
    assert acc_row_rate(chip(rows=1, cols=4, acc=128).as_arrays())[0] == 1.0


def _per_core_block_cycles(b):
    # (256 x 128) @ (128 x 32) on one 32x32 core (GLB banks of 64 B): 4 weight tiles of 32 rows, one
    # column block, one pass of 256 rows. Per tile 256 input rows of 64 B (one bank word each) plus the
    # next 32x32 weight tile (2 KiB; the 8 KiB panel does not fit the 4 KiB operand buffer): 18,432 B,
    # more than its 256 cycles at b = 64 B/cycle -> GLB-bound. Ends: the first tile beyond its 32 load
    # cycles and the 256 x 32 x 2 B outputs; fixed: the first load 32 + fill/drain 62.
    return (4 * 18432 + 16384 + 2048) / b - 32 + 94


def test_a_split_gemm_moves_each_cores_tiles_at_its_own_share():
    # the same per-core block on 1 and on 16 cores (16 column blocks, one per core), each core a 64 B link
    # of a GLB of 16 x 64 B banks: the time is the block's at one core's share, not at all 16 cores'
    # (before: 1,374.6 cycles on 16 cores, the tiles moving at 16 x 64 B/cycle; 1,502 on one)
    got = {}
    for n in (1, 16):
        a = chip(num_tc=n, rows=32, cols=32, lanes=1, banks=16, width=64, link=64).as_arrays()
        b = glb_bandwidth_Bps(a, "tc", n)[0] / 1e9 / n   # one core's share, bytes per cycle
        t = gemm_terms(Gemm("g", 1, 256, 32 * n, 128), a, n)
        assert t["streams_m"][0]
        assert t["latency_s"][0] * 1e9 == pytest.approx(_per_core_block_cycles(b), rel=1e-12)
        got[n] = (t["latency_s"][0], b)
    assert got[1][1] == 64.0                           # one core: its link
    assert got[16][1] == 64.0  # 16 cores: each its link (an op alone has the whole supply, cost.onchip)
    assert got[16][0] / got[1][0] == pytest.approx(1.0, abs=0.003)


def test_a_ragged_last_k_tile_moves_only_its_rows():
    # (256 x K) @ (K x 128) on one 128x128 core, GLB one 64 B link; K = 160 and K = 256 both fill two weight
    # tiles, the second with 32 and 128 rows. The panel (two tiles, 64 KiB) fits the operand buffer: loaded
    # once. Per full tile: 256 input rows of 256 B + the next 32 KiB weight tile = 98,304 B; the ragged tile
    # moves 256 rows of 64 B and a 32 x 128 weight tile, 73,728 B less. Both tiles are GLB-bound, so the
    # ragged GEMM is 73,728 B / b faster (before the fix both took the same time).
    a = chip(rows=128, cols=128, lanes=1, banks=1, width=64, link=64).as_arrays()
    b = glb_bandwidth_Bps(a, "tc", 1)[0] / 1e9
    full = gemm_terms(Gemm("g", 1, 256, 128, 256), a, 1)
    rag = gemm_terms(Gemm("g", 1, 256, 128, 160), a, 1)
    assert full["streams_m"][0] and rag["streams_m"][0]
    # tiles + first weight tile beyond its 128 cycles + the 256 x 128 x 2 B outputs + fill/drain 128 + 254
    assert full["latency_s"][0] * 1e9 == pytest.approx((2 * 98304 + 32768 + 65536) / b - 128 + 382, rel=1e-12)
    assert rag["latency_s"][0] * 1e9 == pytest.approx((98304 + 24576 + 32768 + 65536) / b - 128 + 382, rel=1e-12)
    assert (full["latency_s"][0] - rag["latency_s"][0]) * 1e9 == pytest.approx(73728 / b, rel=1e-9)
