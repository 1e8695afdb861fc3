"""Area of chips with the on-chip hierarchy: the parts add up, per-core control is charged per core."""
import numpy as np
import pytest

from phaze.hardware import Accelerator
from phaze.hardware.area import default_area_model
from phaze.hardware.chip_area import CONTROL_FRACTION_OF_DATAPATH, chip_area_breakdown_mm2

MiB = 2**20


def chip(num_tc=4, rows=128, cols=128, num_vc=2, lanes=128):
    return Accelerator("t", num_tc, rows, cols, num_vc, lanes, 32 * MiB, 32 * 2**30, 1.2e12, 1e9,
                       glb_banks=16, glb_bank_width_bytes=64, tc_operand_bytes=2 * rows * cols * 2,
                       tc_acc_bytes=8 * rows * cols * 4, noc="crossbar", noc_link_bytes=64)


def test_control_is_the_tpu_v1_fraction_of_each_core_datapath():
    # TPU v1 floor plan: control 2% of the die against compute 30% + data buffers 37%
    assert CONTROL_FRACTION_OF_DATAPATH == pytest.approx(2 / 67)
    p = {k: float(v[0]) for k, v in chip_area_breakdown_mm2(chip().as_arrays()).items()}
    assert p["control"] == pytest.approx(2 / 67 * (p["compute"] + p["core_sram"]), rel=1e-12)
    assert p["total"] == pytest.approx(sum(p[k] for k in ("compute", "core_sram", "glb", "noc", "control")))
    # by hand for the MACs: 4 cores x 128 x 128 MACs and 2 x 128 lanes at the paper's 22 nm unit areas
    m = default_area_model()
    assert p["compute"] == pytest.approx(1e-6 * (m.mac_um2 * 4 * 128 * 128 + m.lane_um2 * 2 * 128), rel=1e-12)


def test_control_scales_with_the_cores():
    one, two = (chip_area_breakdown_mm2(chip(num_tc=n, num_vc=n).as_arrays()) for n in (4, 8))
    assert float(two["control"][0]) == pytest.approx(2 * float(one["control"][0]), rel=1e-12)
    assert np.all(two["total"] > one["total"])
