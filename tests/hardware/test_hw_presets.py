"""Presets against their datasheets; clusters and their tiers."""
import pytest

from phaze.errors import ConfigError
from phaze.hardware import ACCELERATORS, CLUSTERS, get_accelerator, get_cluster


def test_names():
    assert set(ACCELERATORS) == {"tpuv4-like", "tpuv4-like-paper", "tpuv4", "a100-80g", "h100-80g"}
    assert set(CLUSTERS) == {"dgx-a100", "dgx-h100", "flat-4gib"}


def test_a100_datasheet():
    a = get_accelerator("a100-80g")
    assert a.peak_matrix_flops == pytest.approx(312e12, rel=5e-3)   # dense FP16 tensor
    assert a.peak_vector_flops == pytest.approx(78e12, rel=5e-3)    # FP16 non-tensor
    assert (a.hbm_bytes, a.hbm_bandwidth_Bps, a.glb_bytes) == (80e9, 2.039e12, 40 * 2**20)
    assert a.num_tc == 432 and a.tc_rows * a.tc_cols == 256


def test_h100_datasheet():
    h = get_accelerator("h100-80g")
    assert h.peak_matrix_flops == pytest.approx(989e12, rel=1e-2)   # dense BF16 tensor
    assert h.peak_vector_flops == pytest.approx(133.8e12, rel=5e-3)
    assert (h.hbm_bytes, h.hbm_bandwidth_Bps, h.glb_bytes) == (80e9, 3.35e12, 50 * 2**20)


def test_tpuv4_like_template():
    for name in ("tpuv4-like", "tpuv4-like-paper"):  # the paper's chip, with and without the hierarchy
        t = get_accelerator(name)
        assert (t.num_tc, t.tc_rows, t.tc_cols, t.num_vc, t.vc_width, t.glb_bytes) == (8, 128, 128, 2, 128, 128 * 2**20)
        assert t.hbm_bytes == 32 * 2**30 and t.hbm_bandwidth_Bps == 1200e9 and t.freq_hz == 1e9
    assert not get_accelerator("tpuv4-like-paper").has_hierarchy
    t = get_accelerator("tpuv4-like")
    # the space's rule: 2 weight tiles of 128x128 bf16, 8R rows of 128 fp32 sums, 64 x 256 B GLB ports,
    # links as wide as a bank port (a core's demand, 512 B, is wider)
    assert (t.tc_operand_bytes, t.tc_acc_bytes) == (2 * 128 * 128 * 2, 8 * 128 * 128 * 4)
    assert (t.glb_banks, t.glb_bank_width_bytes, t.noc, t.noc_link_bytes) == (64, 256, "crossbar", 256)
    assert t.glb_bandwidth_Bps == 64 * 256 * 1e9


def test_tpuv4_public_figures():
    t = get_accelerator("tpuv4")
    assert t.peak_matrix_flops == pytest.approx(275e12, rel=5e-3)   # Jouppi et al. ISCA 2023: 275 TFLOP/s bf16
    assert t.num_tc == 2 * 4 and t.num_vc * t.vc_width == 2 * 128 * 8 * 2   # 2 TensorCores, 4 MXUs, 128x8x2 VPU
    assert (t.hbm_bytes, t.hbm_bandwidth_Bps, t.glb_bytes) == (32 * 2**30, 1200e9, 128 * 2**20)
    assert t.tc_operand_bytes * 4 == 16 * 2**20 and t.has_hierarchy     # 16 MiB VMEM per TensorCore
    assert (t.tc_rows, t.tc_cols, t.freq_hz) == (128, 128, 1.05e9)       # MXUs of 128x128 at 1050 MHz


def test_tpuv4_measured_power_is_what_a_training_run_counts():
    from phaze.hardware.presets import TPUV4_MEASURED_POWER_W, device_power_w
    # Google's TPU v4 page: measured min/mean/max 90/170/192 W
    assert TPUV4_MEASURED_POWER_W == {"min": 90.0, "mean": 170.0, "max": 192.0}
    w, basis = device_power_w(get_accelerator("tpuv4"))
    assert w == 192.0 and "measured" in basis
    w_like, basis_like = device_power_w(get_accelerator("tpuv4-like"))  # no measurement: the chip model's peak
    assert "model" in basis_like and w_like > 0


def test_tpuv4_not_slower_than_tpuv4_like_on_gpt2_xl():
    """Issue 34 item 2: same 8 MXUs, 16x the lanes, 1.05 GHz; with an op alone holding all of the GLB and HBM
    (item 1e) the real chip is not slower than the paper's under the search's plan space (before 1e: 2,120 vs
    2,387 seq/s, its lanes' fixed slice holding 80% of both)."""
    from phaze.search.run import fixed_chip_plan
    from phaze.search.spec import SearchSpec
    from phaze.workload.zoo import get_model

    m = get_model("gpt2-xl")
    spec = SearchSpec(models=(m,))
    cluster = get_cluster(spec.cluster, spec.devices)
    tp = {n: fixed_chip_plan(m, get_accelerator(n), spec, cluster).best.throughput_seq_per_s
          for n in ("tpuv4", "tpuv4-like")}
    assert tp["tpuv4"] >= tp["tpuv4-like"]


def test_efficiencies_are_fractions():
    for a in ACCELERATORS.values():
        for f in (a.matrix_efficiency, a.vector_efficiency, a.memory_efficiency):
            assert 0 < f <= 1


def test_unknown_preset_lists_names():
    with pytest.raises(ConfigError, match="a100-80g"):
        get_accelerator("b200")
    with pytest.raises(ConfigError, match="dgx-a100"):
        get_cluster("torus")


def test_dgx_a100_tiers():
    c = get_cluster("dgx-a100")
    assert c.num_devices == 1024
    nv, ib = c.tiers
    assert (nv.devices_per_group, nv.bandwidth_Bps) == (8, 300e9)
    assert (ib.devices_per_group, ib.bandwidth_Bps) == (1024, 25e9)
    assert c.tier_for_group(8) is nv and c.tier_for_group(16) is ib and c.tier_for_group(2, stride=8) is ib
    assert 0 < nv.efficiency <= 1 and ib.latency_s == pytest.approx(5e-6)


def test_dgx_h100_and_flat():
    h = get_cluster("dgx-h100", 64)
    assert h.tiers[0].bandwidth_Bps == 450e9 and h.tiers[1].bandwidth_Bps == 50e9
    assert h.tiers[-1].devices_per_group == 64
    f = get_cluster("flat-4gib")
    assert f.num_devices == 1024 and len(f.tiers) == 1
    assert f.tiers[0].effective_bandwidth_Bps == 4 * 2**30 and f.tier_for_group(1024) is f.tiers[0]


def test_small_cluster_keeps_fast_tier():
    c = get_cluster("dgx-a100", 8)
    assert len(c.tiers) == 1 and c.tiers[0].name == "nvlink"


@pytest.mark.parametrize("n", [0, -4, 2.5])
def test_bad_device_count(n):
    with pytest.raises(ConfigError):
        get_cluster("dgx-a100", n)
