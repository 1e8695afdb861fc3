"""The paper's design space (``--space paper``) reproduces the reference: 29,360 candidates, 4,186 TC and
697 VC configs; the default space adds the on-chip hierarchy."""
import time

import numpy as np
import pytest

from phaze.errors import ConfigError
from phaze.hardware import DesignSpace, area_mm2, enumerate_space, load_space, space_summary
from phaze.hardware.space import PAPER_SPACE, pow2_range, resolve_space, space_from_dict

MiB = 2**20


@pytest.fixture(scope="module")
def cands():
    return enumerate_space(PAPER_SPACE)


def test_default_space_counts(cands):
    assert len(cands) == 29_360
    assert cands.num_tc_configs == 4_186
    assert cands.num_vc_configs == 697
    assert PAPER_SPACE.raw_size == 75_712
    assert resolve_space("paper") == PAPER_SPACE
    assert not np.any(cands.arch.glb_banks)  # the paper's template: no hierarchy


def test_area_range_and_budget(cands):
    assert cands.budget_mm2 == pytest.approx(278.826676, rel=1e-5)
    assert cands.area_mm2.min() == pytest.approx(3.355, abs=5e-4)
    assert cands.area_mm2.max() == pytest.approx(278.83, abs=5e-3)
    assert np.all(cands.area_mm2 <= cands.budget_mm2 * (1 + 1e-12))


def test_lower_bound_and_waiver(cands):
    a = cands.arch
    small = cands.area_mm2 < 0.3 * cands.budget_mm2
    assert small.any()
    assert np.all((a.num_tc[small] == 1) | (a.num_vc[small] == 1))
    assert np.array_equal(a.vc_width, a.tc_cols)  # vector width = tensor-core width (paper)


def test_areas_match_area_model(cands):
    assert np.allclose(cands.area_mm2, area_mm2(cands.arch), rtol=1e-14)
    i = 12345
    assert area_mm2(cands.arch.accelerator(i)) == pytest.approx(cands.area_mm2[i], rel=1e-12)


def test_enumeration_is_fast():
    t = time.perf_counter()
    enumerate_space(PAPER_SPACE)
    assert time.perf_counter() - t < 1.0


def test_other_budget_and_ranges():
    from dataclasses import replace
    smaller = enumerate_space(replace(PAPER_SPACE, budget_mm2=100.0))
    assert 0 < len(smaller) < 29_360 and smaller.area_mm2.max() <= 100.0
    tiny = enumerate_space(DesignSpace(num_tc=(8,), num_vc=(2,), tc_widths=(128,), tc_depths=(128,), glb_bytes=(128 * MiB,),
                                       template="paper"))
    assert len(tiny) == 1 and tiny.arch.num_tc[0] == 8
    hbm = enumerate_space(PAPER_SPACE, hbm_bytes=80 * 10**9, hbm_bandwidth_Bps=2e12, freq_hz=1.5e9)
    assert np.all(hbm.arch.hbm_bytes == 80 * 10**9) and np.all(hbm.arch.freq_hz == 1.5e9)


def test_summary():
    s = space_summary("paper")
    assert (s["candidates"], s["tc_configs"], s["vc_configs"]) == (29_360, 4_186, 697)
    assert s["budget_mm2"] == pytest.approx(278.83, abs=0.01)


def test_load_space_yaml_and_json(tmp_path):
    y = tmp_path / "s.yaml"
    y.write_text("num_tc: {min: 1, max: 64}\ntc_widths: [64, 128]\nglb_mib: [16, 32]\nbudget_mm2: 150\n")
    s = load_space(y)
    assert s.num_tc == pow2_range(1, 64) and s.tc_widths == (64, 128)
    assert s.glb_bytes == (16 * MiB, 32 * MiB) and s.budget_mm2 == 150
    j = tmp_path / "s.json"
    j.write_text('{"num_vc": [1, 2], "min_fraction": 0.5}')
    assert load_space(j).num_vc == (1, 2)
    assert space_summary(str(y))["budget_mm2"] == 150


@pytest.mark.parametrize("text", ["num_tc: [1, 2", "num_cores: [1]", "num_tc: []", "num_tc: [0, 2]",
                                  "budget_mm2: -3", "min_fraction: 2", "- 1\n- 2", "num_tc: {min: 1}"])
def test_bad_space_file_is_config_error(tmp_path, text):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_space(p)
    assert "\n" not in str(e.value)


def test_bad_space_object():
    with pytest.raises(ConfigError):
        DesignSpace(tc_widths=(2.5,))
    with pytest.raises(ConfigError):
        space_from_dict({"glb_bytes": ["big"]})
