"""Area model: the TPUv4-like budget chip, table points, interpolation, other technology files."""
import json

import numpy as np
import pytest

from phaze.errors import ConfigError
from phaze.hardware import ACCELERATORS, Accelerator, ArchArrays, area_mm2, default_area_model, load_area_model

MiB = 2**20


def chip(num_tc=1, rows=128, cols=128, num_vc=1, vc=128, glb=2 * MiB):
    return Accelerator("t", num_tc, rows, cols, num_vc, vc, glb, 2**30, 1e12, 1e9)


def test_tpuv4_like_area_is_the_reference_budget():
    # 278,826,676 um^2 in the reference (phaze-paper.md): the paper's chip in the paper's template
    assert area_mm2(ACCELERATORS["tpuv4-like-paper"]) == pytest.approx(278.826676, rel=1e-5)


def test_hand_computed_smallest_chip():
    # 1 TC of 2x2, 1 VC of 2 lanes, 2 MiB GLB: 4 MACs + 2 lanes + two 1 KiB buffers + 3.338 mm^2
    expect_um2 = 760.04 * 4 + 759.82 * 2 + 6134.0 + 6134.0 + 3.338e6
    assert area_mm2(chip(1, 2, 2, 1, 2)) == pytest.approx(expect_um2 * 1e-6, rel=1e-12)


def test_vectorized_equals_scalar():
    accs = [chip(t, r, c, v, c, g) for t, r, c, v, g in
            [(8, 128, 128, 2, 128 * MiB), (64, 16, 32, 4, 4 * MiB), (1, 256, 256, 1, 2 * MiB), (4096, 2, 2, 4096, 8 * MiB)]]
    vec = area_mm2(ArchArrays.from_accelerators(accs))
    assert isinstance(vec, np.ndarray) and vec.shape == (4,)
    assert np.allclose(vec, [area_mm2(a) for a in accs], rtol=1e-14)


def test_glb_between_table_points_is_interpolated():
    m = default_area_model()
    a32, a40, a64 = (area_mm2(chip(glb=s * MiB)) for s in (32, 40, 64))
    assert a32 < a40 < a64
    assert a40 - a32 == pytest.approx((88.606 - 46.751) * 8 / 32, rel=1e-9)
    assert m.technology.startswith("22nm")


def test_other_technology_file(tmp_path):
    d = json.loads(json.dumps({"mac_um2": 2 * 760.04, "lane_um2": 2 * 759.82,
                               "sram_core_um2": {str(1024 << i): 2 * v for i, v in enumerate(default_area_model().sram_core_um2)},
                               "sram_glb_mm2": {str(int(k)): 2 * v for k, v in zip(default_area_model().sram_glb_bytes, default_area_model().sram_glb_mm2)}}))
    p = tmp_path / "tech.json"
    p.write_text(json.dumps(d))
    model = load_area_model(p)
    tpu = ACCELERATORS["tpuv4-like-paper"]
    assert area_mm2(tpu, model) == pytest.approx(2 * area_mm2(tpu), rel=1e-12)


@pytest.mark.parametrize("text", ["{not json", '{"lane_um2": 1}', "[1, 2]"])
def test_bad_area_file_is_config_error(tmp_path, text):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_area_model(p)
    assert "\n" not in str(e.value)


def test_missing_area_file():
    with pytest.raises(ConfigError):
        load_area_model("/nonexistent/area.yaml")
