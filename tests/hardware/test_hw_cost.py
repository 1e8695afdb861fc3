"""The TCO model (issue 34 item 6): dies per wafer and Murphy's yield by hand, the parts sum to the total, the
energy term from its four constants."""
import math

import numpy as np
import pytest

from phaze.hardware import cost
from phaze.hardware.presets import TPUV4_LIKE


def test_dies_per_wafer_by_hand():
    # 300 mm wafer, 100 mm^2 die: pi 300^2 / 400 = 706.86, pi 300 / sqrt(200) = 66.64 -> 640.2 -> 640 whole dies
    assert cost.dies_per_wafer(100.0) == 640
    # 400 mm^2: 176.71 - 33.32 = 143.4 -> 143
    assert cost.dies_per_wafer(400.0) == 143
    # a die larger than the wafer: none
    assert cost.dies_per_wafer(80_000.0) == 0


def test_murphy_yield_by_hand():
    # 100 mm^2 = 1 cm^2 at 0.09 / cm^2: ((1 - e^-0.09) / 0.09)^2 = (0.0860688 / 0.09)^2 = 0.956320^2 = 0.914548
    assert cost.murphy_yield(100.0) == pytest.approx(0.914548, rel=1e-6)
    # 400 mm^2: AD = 0.36: ((1 - e^-0.36) / 0.36)^2 = 0.705244
    assert cost.murphy_yield(400.0) == pytest.approx(0.7052439, rel=1e-6)
    assert cost.murphy_yield(0.0) == 1.0
    # yield falls with area
    y = cost.murphy_yield(np.array([50.0, 200.0, 800.0]))
    assert y[0] > y[1] > y[2]


def test_die_cost_is_the_wafer_over_its_good_dies():
    assert cost.die_cost_usd(400.0) == pytest.approx(3677.0 / (143 * 0.7052439), rel=1e-6)  # $36.46
    assert math.isinf(cost.die_cost_usd(80_000.0))


def test_energy_by_hand():
    # 100 W for 6 years (52,596 h) = 5,259.6 kWh x $0.0806 = $423.92 x PUE 1.58 = $669.80
    assert cost.energy_usd(100.0) == pytest.approx(100 / 1000 * 6 * 8766 * 0.0806 * 1.58, rel=1e-12)
    assert cost.energy_usd(100.0) == pytest.approx(669.80, abs=0.01)


def test_tco_parts_sum_to_the_total():
    parts = cost.chip_tco(TPUV4_LIKE, 63.0)
    assert parts["total_usd"] == pytest.approx(sum(parts[k] for k in cost.TCO_PARTS), rel=1e-15)
    assert parts["hbm_usd"] == pytest.approx(32 * 2**30 / 1e9 * 17.5, rel=1e-12)  # $601.30
    assert parts["package_usd"] == 750 + 920 and parts["network_usd"] == 0.0
    assert parts["energy_usd"] == pytest.approx(cost.energy_usd(63.0), rel=1e-15)
    # default: energy at peak power, the larger figure
    peak = cost.chip_tco(TPUV4_LIKE)
    assert peak["power_basis"] == "peak power" and peak["total_usd"] > parts["total_usd"]
    arr = cost.tco_parts(np.array([100.0, 400.0]), np.array([1e9, 2e9]), np.array([10.0, 20.0]))
    np.testing.assert_allclose(arr["total_usd"], sum(arr[k] for k in cost.TCO_PARTS), rtol=1e-15)
