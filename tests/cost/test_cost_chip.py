"""GEMM and vector ops on chips with the on-chip hierarchy: hand-computed cycles, GLB traffic, the bandwidth
an op gets alone, accumulator spills, K-split reductions, activations kept in the GLB."""
from dataclasses import replace

import numpy as np
import pytest

from phaze.cost import activations_resident, gemm_hbm_bytes, gemm_terms, vector_terms
from phaze.cost.onchip import glb_bandwidth_Bps, glb_supply_bytes_per_cycle, hbm_bandwidth_Bps
from phaze.hardware import Accelerator, ArchArrays
from phaze.workload.ops import Gemm, LayerGraph, VectorOp

from chiphelpers import small_chip as chip

MiB = 2**20




G = Gemm("g", 1, 4096, 1600, 128)


def test_double_buffered_weights_hand_computed():
    # Orientation S=1600 rows streamed, T=4096 stationary: 32 column blocks, one K tile (K = R = 128).
    # 1024 accumulator rows: passes of 1024 and 576 rows; a tile costs max(rows, R) with the weight double
    # buffer; one exposed weight load (R) and one fill/drain (R + C - 2) per core:
    # 32 * (1024 + 576) + 128 + 254 = 51,582 cycles. (S=4096, T=1600 gives 13 * 4096 + 382 = 53,630.)
    # Plus the two ends at the op's GLB rate bw: the first 128x128 weight tile beyond its R cycles (none
    # here: bw is large) and the last pass's 576 x 128 outputs drained after the last tile (a block of
    # whole 512 B bank words).
    a = chip(link=1 << 20, width=1 << 9).as_arrays()
    bw = glb_bandwidth_Bps(a, "tc", 1)[0]
    t = gemm_terms(G, a, 1)
    assert 128 * 128 * 2 / bw < 128e-9
    assert t["compute_s"][0] == pytest.approx(51_582e-9 + 576 * 128 * 2 / bw, rel=1e-12)
    # GLB traffic of that orientation: inputs 1600*128*32*2, weights once (the 32 KiB panel fits the 64 KiB
    # operand buffer) 128*4096*2, outputs 1600*4096*2 bytes.
    assert t["glb_bytes"][0] == 1600 * 128 * 32 * 2 + 128 * 4096 * 2 + 1600 * 4096 * 2
    # HBM traffic is the GLB-level blocked traffic, not part of the GLB term
    assert t["hbm_bytes"][0] == gemm_hbm_bytes(G, np.array([128 * MiB]), np.array([128]))[0]


def test_single_buffered_weights_pay_each_load():
    # operand buffer of one weight tile: a tile costs rows + R: 32 * (1152 + 704) + 382 = 59,774 cycles;
    # the other orientation: 13 * 4 * 1152 + 382 = 60,286
    a = chip(operand=128 * 128 * 2, link=1 << 20).as_arrays()
    t = gemm_terms(G, a, 1)
    assert t["compute_s"][0] == pytest.approx(59_774e-9 + 576 * 128 * 2 / glb_bandwidth_Bps(a, "tc", 1)[0], rel=1e-12)


def test_glb_bound_op_gets_the_supply_up_to_its_links():
    # 8 banks x 64 B = 512 B/cycle; crossbar: min(8 banks, 2 ports) x 64 B links = 128 B/cycle. An op on
    # the one tensor core gets what it would alone: the supply, at most its one 64 B link -> 64 B/cycle
    # (issue 34 item 1e: no fixed slice kept for the idle vector core).
    a = chip(banks=8, width=64).as_arrays()
    assert glb_supply_bytes_per_cycle(a)[0] == 128
    assert glb_bandwidth_Bps(a, "tc", 1)[0] == pytest.approx(64e9, rel=1e-12)
    t = gemm_terms(G, a, 1)
    # the GLB term is at least the total traffic at that rate (more where transfers bunch per tile)
    assert t["glb_s"][0] >= t["glb_bytes"][0] / 64e9 * (1 - 1e-12)
    assert t["latency_s"][0] == pytest.approx(max(t["glb_s"][0], t["compute_s"][0], t["hbm_s"][0]), rel=1e-12)
    assert t["glb_s"][0] > t["compute_s"][0]


def test_accumulator_spill_and_k_split():
    from phaze.cost.gemm_chip import _chip_consts, _orient
    g = Gemm("g", 1, 512, 128, 1024)  # 8 K tiles, one column block
    one = np.ones(1)
    big = _orient(g, 512, 128, _chip_consts(chip().as_arrays()), one)["glb"]
    # an accumulator with no whole row of 128 fp32 sums spills every K tile's partial sums (write + read):
    # streaming the 512 rows against the 128 columns, 2 * 8 tiles * 512 * 128 * 4 bytes more GLB traffic
    spill = _orient(g, 512, 128, _chip_consts(chip(acc=256).as_arrays()), one)["glb"]
    assert spill[0] - big[0] == 2 * 8 * 512 * 128 * 4
    # and the latency (either orientation) pays for it
    assert gemm_terms(g, chip(acc=256).as_arrays(), 1)["glb_bytes"][0] > gemm_terms(g, chip().as_arrays(), 1)["glb_bytes"][0]
    # M = 2 rows on 8 cores: one column block, 2 row parts, then K split 4 ways: each part's fp32 partial
    # sums are written and read back for the reduction: 2 * 4 * 2 * 128 * 4 bytes on top of the traffic
    g2 = Gemm("g2", 1, 2, 128, 1024)
    a8 = chip(num_tc=8).as_arrays()
    t8 = gemm_terms(g2, a8, 8)
    base = 2 * 1024 * 1 * 2 + 1024 * 128 * 2 * 2 + 2 * 128 * 2  # inputs, weights (2 row parts), outputs
    red = 2 * 4 * 2 * 128 * 4
    # orientation S=2 (T=128) -- the faster one here -- so the traffic is exactly base + red
    assert t8["glb_bytes"][0] == base + red


def test_an_op_gets_the_supply_capped_by_its_links():
    # 64 banks x 64 B, crossbar of 12 ports with 64 B links: supply min(64 x 64, 12 x 64) = 768 B/cycle
    a = chip(num_tc=8, num_vc=4, lanes=64, banks=64, width=64).as_arrays()
    link = float(a.noc_link_bytes[0]) * 1e9
    supply = glb_supply_bytes_per_cycle(a)[0] * 1e9
    for kind, c in (("tc", 1), ("tc", 2), ("tc", 8), ("vc", 1), ("vc", 4)):
        assert glb_bandwidth_Bps(a, kind, c)[0] == pytest.approx(min(supply, c * link), rel=1e-12)
        assert hbm_bandwidth_Bps(a, kind, c)[0] == pytest.approx(float(a.hbm_bandwidth_Bps[0]), rel=1e-12)


def test_mesh_and_bus_caps():
    mesh = chip(num_tc=64, num_vc=36, banks=64, width=64, noc="mesh").as_arrays()
    # 100 ports: a 10x10 mesh, 40 edge routers: min(64 banks, 40) x 64 B
    assert glb_supply_bytes_per_cycle(mesh)[0] == 40 * 64
    bus = chip(num_tc=4, banks=64, width=64, noc="bus").as_arrays()
    assert glb_supply_bytes_per_cycle(bus)[0] == 64


def test_vector_op_resident_or_not():
    v = VectorOp("v", "add", 1 << 20, 1.0, 3 * 2 * (1 << 20))
    a = chip(num_tc=1, num_vc=1, hbm_bw=1e11).as_arrays()  # HBM below the 512 GB/s link
    out = vector_terms(v, a, 1, resident=False)
    # alone, the op has all of HBM (the old fixed slice gave the vector core (2 x 128 x 2) / (2 x 128 x 2 +
    # (128 + 128) x 2) = 1/2 of it)
    assert out["hbm_s"][0] == pytest.approx(v.bytes_moved / 1e11, rel=1e-12)
    res = vector_terms(v, a, 1, resident=True)
    assert res["hbm_s"][0] == 0 and res["hbm_bytes"][0] == 0
    assert res["glb_s"][0] == out["glb_s"][0] > 0
    assert res["latency_s"][0] < out["latency_s"][0]
    graph = LayerGraph("block", "fwd", (v,), ())
    small, big = chip(glb=8 * MiB).as_arrays(), chip(glb=16 * MiB).as_arrays()
    # 6 MiB moved: fits half of 16 MiB, not half of 8 MiB
    assert not activations_resident(graph, small)[0] and activations_resident(graph, big)[0]
    paper = ArchArrays.from_accelerators([Accelerator("p", 1, 128, 128, 1, 128, 128 * MiB, 2**35, 1e12, 1e9)])
    assert not activations_resident(graph, paper)[0]


def test_mixed_arrays_match_single_chips():
    accs = [chip(), chip(num_tc=4, rows=32, cols=64, banks=8, width=64),
            Accelerator("p", 8, 128, 128, 2, 128, 128 * MiB, 2**35, 1.2e12, 1e9)]
    arr = ArchArrays.from_accelerators(accs)
    both = gemm_terms(G, arr, 1)["latency_s"]
    one = [gemm_terms(G, a.as_arrays(), 1)["latency_s"][0] for a in accs]
    assert np.allclose(both, one, rtol=1e-12)


def test_more_bandwidth_never_slower():
    lat = [gemm_terms(G, chip(num_tc=4, banks=b, width=w).as_arrays(), 4)["latency_s"][0]
           for b, w in ((8, 64), (32, 64), (32, 512), (64, 512))]
    assert all(x >= y for x, y in zip(lat, lat[1:]))


def test_hierarchy_fields_all_or_nothing():
    from phaze.errors import ConfigError
    with pytest.raises(ConfigError, match="missing or zero"):
        replace(chip(), tc_acc_bytes=0)
    with pytest.raises(ConfigError, match="noc"):
        replace(chip(), noc="torus")


def _tiled(g, S, T, width, bw_Bpc):
    """_orient's fields and the tile-by-tile time of one orientation on the 4x16 chip of the test below,
    with GLB banks ``width`` bytes wide and the op's GLB bandwidth set to ``bw_Bpc`` bytes per 1 ns cycle."""
    from phaze.cost.gemm_chip import _chip_consts, _orient, _stack, _times_cycles
    a = chip(rows=4, cols=16, operand=256, acc=32 * 16 * 4, width=width).as_arrays()
    t = _orient(g, S, T, _chip_consts(a), np.ones(1))
    return t, _times_cycles(_stack(t, 1), np.array([1.0 / bw_Bpc]))[1][0] * 1e-9


def test_tile_by_tile_overlap_drain_window_and_granularity_hand_computed():
    # 4x16 array, operand buffer of two tiles (256 B), accumulator of 32 fp32 rows of 16 (2 KiB);
    # GEMM (64 x 8) @ (8 x 16), S = 64 rows streamed against T = 16 columns: kt = 2 tiles of k_rows = 4,
    # c_cols = 16, passes of mb = 32 rows (2 passes), a tile costs max(32, 4) = 32 cycles; the 2-tile
    # panel (256 B) fits the operand buffer, so it is read once: half a tile per tile over 2 passes x 2.
    g = Gemm("g", 1, 64, 16, 8)
    # 64-byte banks, 32 B/cycle: each 8-byte input row takes a whole 64-byte word (rows stream straight
    # into the array); the 128 B weight tile moves as a block (2 words), half of it per tile here. A tile
    # moves 32 * 64 + 64 = 2112 B: 66 cycles > 32 (GLB-bound tile by tile); 4 tiles = 264. The first
    # pass's 32 x 16 outputs (1024 B) leave within the second pass's first tile (the accumulator holds one
    # pass): (2112 + 1024) / 32 = 98 cycles instead of 66: +32. Ends: first weight tile 4 + fill/drain
    # (4 + 16 - 2) = 22 cycles, its 128 B in 4 cycles, no more than its 4 rows; the last pass's outputs
    # drain in 1024 / 32 = 32. Total 264 + 32 + 22 + 32 = 350 cycles.
    t, s = _tiled(g, 64, 16, 64, 32.0)
    assert (t["n_mb"][0], t["cyc_mb"][0], t["reg_mb"][0], t["events"][0], t["drain_tiles"][0],
            t["out"][0]) == (4, 32, 2112, 1, 1, 1024)
    assert s == pytest.approx(350e-9, rel=1e-12)
    # 8-byte banks: no word is wasted: a tile moves 32 * 8 + 64 = 320 B (10 cycles < 32: compute-bound,
    # 4 x 32 = 128); the drain tile (320 + 1024) / 32 = 42 cycles: +10; ends 22 + 0 + 1024 / 32 = 32.
    assert _tiled(g, 64, 16, 8, 32.0)[1] == pytest.approx((128 + 10 + 22 + 32) * 1e-9, rel=1e-12)
    # the other orientation, S = 16 rows against T = 64 columns: 4 column blocks on the one core, each one
    # pass of 16 rows; the accumulator holds two passes, so each drain (16 rows x 32 B) spreads over the
    # next pass's 2 tiles. Each block's 2-tile panel (256 B) fits the operand buffer, but the 4 blocks have
    # different weights (8 x 64 x 2 B = 1 KiB in all): each block loads its own, a whole 128 B tile per
    # tile (its one row pass). A tile moves 16 * 8 + 128 = 256 B (8 cycles < 16), with half a drain
    # 256 + 256 = 512 B = 16 cycles: compute-bound. 4 blocks x 2 tiles x 16 = 128, ends 22 + 0 +
    # 16 * 32 / 32 = 16 -> 166 cycles.
    t2, s2 = _tiled(g, 16, 64, 8, 32.0)
    assert (t2["n_mb"][0], t2["cyc_mb"][0], t2["reg_mb"][0], t2["events"][0],
            t2["drain_tiles"][0]) == (8, 16, 256, 3, 2)
    assert s2 == pytest.approx((128 + 22 + 16) * 1e-9, rel=1e-12)
    # at 16 B/cycle the weights bind: a plain tile 256 / 16 = 16 cycles (2 of them), a drain tile 512 / 16 =
    # 32 (6 of them: 3 drains x 2 tiles), + 22, ends (128 / 16 - 4) + 512 / 16 = 36: 32 + 192 + 22 + 36 = 282
    # cycles, more than the totals give (4 KiB / 16 = 256). Spreading one block's panel over all 4 blocks'
    # passes (32 B of weights per tile) would charge 246 and let the totals' 256 hide 768 B of weights.
    assert _tiled(g, 16, 64, 8, 16.0)[1] == pytest.approx(282e-9, rel=1e-12)


def test_k_below_rows_uses_only_the_filled_rows():
    # K = 64 on a 128x128 array: a tile fills 64 rows; its load takes 64 cycles and the fill/drain spans
    # 64 + 128 - 2 rows and columns: (1024 x 64) @ (64 x 128), S = 1024, one tile, 1024 rows in passes of
    # 1024 (accumulator 1024 rows): 1024 + 64 + 190 = 1278 cycles
    from phaze.cost.gemm_chip import _chip_consts, _orient
    a = chip().as_arrays()
    cyc = _orient(Gemm("s", 1, 1024, 128, 64), 1024, 128, _chip_consts(a), np.ones(1))["cycles"]
    assert cyc[0] == 1024 + 64 + (64 + 128 - 2)
