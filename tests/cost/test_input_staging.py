"""Input staging (issue 34 item 1d): an unstaged input row takes whole GLB bank words, a staged one its bytes;
the staging buffer's area, energy and leakage are the CACTI table's (1 KiB, 1 bank, 32 B, 2 ports: its line
``1024,1,32,2,0.00822804,3.12634e-12,3.45262e-12,...,0.000640723``); values below are computed by hand."""
from dataclasses import asdict, replace

import numpy as np
import pytest
import yaml

from phaze.cost.energy import gemm_energy_parts_j
from phaze.cost.gemm import gemm_terms
from phaze.cost.gemm_chip import _chip_consts, _orient
from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.chip_area import CONTROL_FRACTION_OF_DATAPATH, chip_area_mm2
from phaze.hardware.power import energy_parts, sram_leakage_w
from phaze.hardware.presets import load_accelerator_file
from phaze.hardware.space import DesignSpace, enumerate_space
from phaze.workload.ops import Gemm

# one 4x16 core (panel rule: operand 2 R C 2 B = 256 B, accumulator 8 R rows of C fp32 = 2 KiB), one 32 B GLB bank
CHIP = Accelerator(name="c", num_tc=1, tc_rows=4, tc_cols=16, num_vc=1, vc_width=1, glb_bytes=32 * 2**20,
                   hbm_bytes=32 * 2**30, hbm_bandwidth_Bps=1024e9, freq_hz=1e9, glb_banks=1, glb_bank_width_bytes=32,
                   tc_operand_bytes=256, tc_acc_bytes=2048, noc="crossbar", noc_link_bytes=32)
STAGED = replace(CHIP, input_staging=True)
G = Gemm(name="qkv", batch=1, m=128, n=64, k=64, bytes_per_element=2)  # the panel's 4x16 gpt2-xl.qkv slice
MACRO_AREA_MM2, READ_J, WRITE_J, LEAK_W = 0.00822804, 3.12634e-12, 3.45262e-12, 0.000640723


def test_unstaged_rows_take_four_times_the_words_of_staged_ones():
    # M streamed (S = 128, T = 64): mb = 2048 / (4 x 16) = 32 rows per weight tile; a row is 4 x 2 = 8 B.
    # A tile's GLB bytes = its input rows + its weight tile (4 x 16 x 2 = 128 B = 4 words):
    # unstaged 32 rows x one 32 B word = 1024 B (32 words), staged 32 x 8 = 256 B (8 words)
    for acc, inputs in ((CHIP, 1024.0), (STAGED, 256.0)):
        a = acc.as_arrays()
        o = _orient(G, 128, 64, _chip_consts(a), np.array([1.0]))
        assert float(np.asarray(o["reg_mb"]).ravel()[0]) == inputs + 128.0
    assert 1024.0 / 32 == 4 * (256.0 / 32)


def test_staging_latency_by_hand():
    # 16 weight tiles x 4 column blocks x 4 row passes = 256 tiles of 32 compute cycles; the accumulator holds
    # one pass, so 15 pass outputs (32 x 16 x 2 = 1024 B) drain in the next pass's first tile; fill/drain
    # 4 + (4 + 16 - 2) = 22; the last pass's outputs 1024 / 32 = 32 cycles after.
    # unstaged: a tile (1024 + 128) / 32 = 36 cycles, a drain tile (1152 + 1024) / 32 = 68:
    #   256 x 36 + 15 x (68 - 36) + 22 + 32 = 9750
    # staged: a tile (256 + 128) / 32 = 12 < 32 cycles, a drain tile (384 + 1024) / 32 = 44:
    #   256 x 32 + 15 x (44 - 32) + 22 + 32 = 8426
    for acc, cycles in ((CHIP, 9750.0), (STAGED, 8426.0)):
        assert gemm_terms(G, acc.as_arrays(), 1, pass_splits=(1,))["latency_s"][0] * 1e9 == pytest.approx(
            cycles, rel=1e-12)
    # with the pass split (PASS_SPLITS) the unstaged chip keeps one pass (more passes reload the weights, and it
    # is GLB-bound); the staged one takes passes of 16 rows: 512 tiles of 16 cycles (16 x 8 + 128 = 256 B, 8
    # cycles at 32 B), the accumulator now holds two passes, so a pass's 512 B of outputs spread over the next
    # pass's 16 tiles (32 B each: 9 cycles, still under 16); 512 x 16 + 22 + the last pass's 512 B / 32 = 8230
    # (passes of 8 rows: 8222, within PASS_SPLIT_GAIN of it, so the fewer passes are taken)
    assert gemm_terms(G, CHIP.as_arrays(), 1)["latency_s"][0] * 1e9 == pytest.approx(9750.0, rel=1e-12)
    assert gemm_terms(G, STAGED.as_arrays(), 1)["latency_s"][0] * 1e9 == pytest.approx(8230.0, rel=1e-12)
    assert gemm_terms(G, STAGED.as_arrays(), 1, pass_splits=(4,))["latency_s"][0] * 1e9 == pytest.approx(8222.0, rel=1e-12)


def test_staging_area_energy_and_leakage():
    a, s = CHIP.as_arrays(), STAGED.as_arrays()
    # one core: the 1 KiB macro (two 32 B words are under CACTI's 32-word bank) plus its control share (2/67)
    assert chip_area_mm2(s)[0] - chip_area_mm2(a)[0] == pytest.approx(
        MACRO_AREA_MM2 * (1 + CONTROL_FRACTION_OF_DATAPATH), rel=1e-9)
    assert energy_parts(a)["staging_J_per_B"][0] == 0.0
    per_byte = (READ_J + WRITE_J) / 32  # written in a word, read in a row, per byte of the 32 B port
    assert energy_parts(s)["staging_J_per_B"][0] == pytest.approx(per_byte, rel=1e-9)
    # the GEMM's input bytes: 128 x 64 x 2 B read once per column block (4) = 65,536 B
    assert gemm_energy_parts_j(G, s)["staging"][0] == pytest.approx(65536 * per_byte, rel=1e-9)
    assert gemm_energy_parts_j(G, a)["staging"][0] == 0.0
    assert sram_leakage_w(s)[0] - sram_leakage_w(a)[0] == pytest.approx(LEAK_W, rel=1e-9)


def test_chip_file_round_trip(tmp_path):
    p = tmp_path / "staged.yaml"
    p.write_text(yaml.safe_dump(asdict(STAGED), sort_keys=False))
    back = load_accelerator_file(str(p))
    assert back == STAGED and back.input_staging is True
    assert back.as_arrays().accelerator(0, name="c") == STAGED


def test_staging_needs_the_hierarchy_and_a_bool():
    paper = dict(name="p", num_tc=1, tc_rows=4, tc_cols=16, num_vc=1, vc_width=1, glb_bytes=2**20, hbm_bytes=2**30,
                 hbm_bandwidth_Bps=1e9, freq_hz=1e9)
    with pytest.raises(ConfigError, match="needs the on-chip hierarchy"):
        Accelerator(**paper, input_staging=True)
    with pytest.raises(ConfigError, match="true or false"):
        replace(CHIP, input_staging=1)


def test_space_buys_staging_only_where_a_row_is_narrower_than_a_word():
    small = dict(num_tc=(1, 4), num_vc=(1,), tc_widths=(16,), tc_depths=(8, 16, 32, 128), glb_bytes=(2 * 2**20,),
                 glb_banks=(16,), glb_bank_widths=(64, 256), budget_mm2=1e4, min_fraction=0.0,
                 net_scale_up_chips=(), net_scale_up_Bps=(), net_topologies=(), net_scale_out_Bps=())
    auto = enumerate_space(DesignSpace(**small))
    a = auto.arch
    narrow = a.tc_rows * 2 < a.glb_bank_width_bytes  # 8, 16 on 64 B words; 8, 16, 32 on 256 B: 5 of 8 per num_tc
    assert len(auto) == 16 and np.array_equal(a.input_staging > 0, narrow) and int(narrow.sum()) == 10
    both = enumerate_space(DesignSpace(**small, input_staging=(False, True)))
    assert len(both) == 16 + 10 and int((both.arch.input_staging > 0).sum()) == 10
    never = enumerate_space(DesignSpace(**small, input_staging=False))
    assert len(never) == 16 and not never.arch.input_staging.any()
    # the staged chips are larger by their buffers only
    assert (auto.area_mm2 >= never.area_mm2).all() and (auto.area_mm2[~narrow] == never.area_mm2[~narrow]).all()
