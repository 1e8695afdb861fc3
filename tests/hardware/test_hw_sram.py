"""The CACTI 7 / 22 nm SRAM table and its log-log interpolation (phaze.hardware.sram)."""
import math

import numpy as np
import pytest

from phaze.errors import ConfigError, PhazeError
from phaze.hardware.sram import SramTable, default_sram_table, sram_macro

KiB, MiB = 2**10, 2**20


def test_rows_match_hand_run_cacti():
    # Figures of single CACTI 7 runs made by hand (22 nm, "ram", 1 bank, 1 rw port, block = I/O width, ED^2; the
    # same input file as scripts/make_sram_table.py), read off CACTI's cache.cfg.out:
    #   256 KiB x 64 B : access 0.628215 ns, read 0.0472877 nJ, write 0.0698768 nJ, area 0.292746 mm^2
    #   512 KiB x 64 B : access 0.890395 ns, read 0.0738841 nJ, area 0.620531 mm^2
    #   128 MiB x 64 B : access 9.35626 ns, area 110.3 mm^2
    #   1 KiB x 8 B    : access 0.0914947 ns, read 0.000401656 nJ, area 0.000965735 mm^2
    m = sram_macro(256 * KiB, 1, 64, 1)
    assert m.area_mm2 == pytest.approx(0.292746, rel=1e-5)
    assert m.access_time_s == pytest.approx(0.628215e-9, rel=1e-5)
    assert m.read_energy_j == pytest.approx(0.0472877e-9, rel=1e-5)
    assert m.write_energy_j == pytest.approx(0.0698768e-9, rel=1e-5)
    m = sram_macro(512 * KiB, 1, 64, 1)
    assert (m.area_mm2, m.read_energy_j, m.access_time_s) == pytest.approx((0.620531, 0.0738841e-9, 0.890395e-9),
                                                                           rel=1e-5)
    assert sram_macro(128 * MiB, 1, 64, 1).area_mm2 == pytest.approx(110.3, rel=1e-5)
    assert sram_macro(128 * MiB, 1, 64, 1).access_time_s == pytest.approx(9.35626e-9, rel=1e-5)
    m = sram_macro(1 * KiB, 1, 8, 1)
    assert (m.area_mm2, m.read_energy_j, m.access_time_s) == pytest.approx((0.000965735, 0.000401656e-9,
                                                                            0.0914947e-9), rel=1e-5)


def test_banked_macro_is_banks_times_one_bank():
    # 8 MiB in 16 banks = 16 banks of 512 KiB: 16x the area and leakage, one bank's energy and time
    one = sram_macro(512 * KiB, 1, 64, 1)
    many = sram_macro(8 * MiB, 16, 64, 1)
    assert many.area_mm2 == pytest.approx(16 * one.area_mm2, rel=1e-5)
    assert many.leakage_w == pytest.approx(16 * one.leakage_w, rel=1e-5)
    assert (many.read_energy_j, many.write_energy_j, many.access_time_s) == pytest.approx(
        (one.read_energy_j, one.write_energy_j, one.access_time_s), rel=1e-9)


def test_second_port_and_wider_port_cost_area():
    # the figures: a second port costs ~+92% area, a 128 B port instead of 64 B more area too
    base = sram_macro(256 * KiB, 1, 64, 1).area_mm2
    assert sram_macro(256 * KiB, 1, 64, 2).area_mm2 / base == pytest.approx(0.678582 / 0.292746, rel=1e-5)
    assert sram_macro(256 * KiB, 1, 128, 1).area_mm2 > base
    # more capacity never costs less area at fixed organisation
    caps = 2.0 ** np.arange(10, 28)
    a = sram_macro(caps, 1, 8, 1).area_mm2
    assert np.all(np.diff(a) > 0)


def test_interpolation_is_log_log_and_exact_at_points():
    lo, hi = sram_macro(256 * KiB, 2, 64, 1), sram_macro(512 * KiB, 2, 64, 1)
    mid = sram_macro(math.sqrt(256 * KiB * 512 * KiB), 2, 64, 1)  # halfway in log(capacity)
    for f in ("area_mm2", "read_energy_j", "write_energy_j", "access_time_s", "cycle_time_s", "leakage_w"):
        assert getattr(mid, f) == pytest.approx(math.sqrt(getattr(lo, f) * getattr(hi, f)), rel=1e-9)
    # a quarter of the way in log(width) and log(banks) at once: bilinear in the logs
    w = 2 ** 6.25
    b = 2 ** 1.5
    got = sram_macro(1 * MiB, b, w, 1).area_mm2
    corners = {(bb, ww): math.log2(sram_macro(1 * MiB, bb, ww, 1).area_mm2) for bb in (2, 4) for ww in (64, 128)}
    want = 2 ** (0.5 * (0.75 * corners[2, 64] + 0.25 * corners[2, 128])
                 + 0.5 * (0.75 * corners[4, 64] + 0.25 * corners[4, 128]))
    assert got == pytest.approx(want, rel=1e-9)


def test_vectorised_equals_scalar_and_unpacks():
    caps = np.array([16 * KiB, 3 * MiB, 64 * MiB])
    banks = np.array([1, 8, 32])
    widths = np.array([32, 64, 100])
    ports = np.array([1, 2, 1])
    v = sram_macro(caps, banks, widths, ports)
    assert isinstance(v.area_mm2, np.ndarray) and v.area_mm2.shape == (3,)
    for i in range(3):
        s = sram_macro(int(caps[i]), int(banks[i]), int(widths[i]), int(ports[i]))
        assert isinstance(s.area_mm2, float)
        assert v.area_mm2[i] == pytest.approx(s.area_mm2, rel=1e-12)
        assert v.access_time_s[i] == pytest.approx(s.access_time_s, rel=1e-12)
    area, rd, wr, t = sram_macro(256 * KiB, 1, 64, 1)
    assert (area, t) == pytest.approx((0.292746, 0.628215e-9), rel=1e-5)


@pytest.mark.parametrize("args, words", [
    ((512, 1, 8, 1), "capacity_bytes 512 is outside"),
    ((256 * MiB, 1, 8, 1), "capacity_bytes 2.68435e+08 is outside"),
    ((1 * MiB, 128, 8, 1), "banks 128 is outside"),
    ((1 * MiB, 1, 1024, 1), "width_bytes 1024 is outside"),
    ((1 * MiB, 1, 64, 3), "ports must be one of [1, 2]"),
    ((1 * MiB, 0, 64, 1), "banks must be positive"),
    ((8 * KiB, 1, 512, 1), "16 words per bank; CACTI builds no bank under 32 words"),
])
def test_refusals_are_one_line(args, words):
    with pytest.raises(PhazeError) as e:
        sram_macro(*args)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_table_header_and_shape():
    t = default_sram_table()
    assert t.ports == (1, 2)
    assert 2 ** t.log_capacity[0] == 1 * KiB and 2 ** t.log_capacity[-1] == 128 * MiB
    assert 2 ** t.log_banks[-1] == 64 and 2 ** t.log_width[0] == 8 and 2 ** t.log_width[-1] == 512
    with pytest.raises(ConfigError, match="lacks column"):
        SramTable.from_csv_text("capacity_bytes,banks\n1,2\n", "x.csv")
