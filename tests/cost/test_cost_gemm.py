"""GEMM cost: hand-computed cycles and traffic, padding, core split, monotonicity, vectorization."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze.cost import gemm_cycles, gemm_hbm_bytes, gemm_latency_s, op_latency_s
from phaze.errors import ConfigError
from phaze.hardware import Accelerator, ArchArrays, enumerate_space
from phaze.hardware.space import PAPER_SPACE
from phaze.workload.ops import Gemm

MiB = 2**20
CANDS = enumerate_space(PAPER_SPACE)  # the paper template (the chip model: test_cost_chip.py)


def chip(num_tc=1, rows=128, cols=128, glb=2 * MiB, bw=1200e9, **kw):
    return Accelerator("t", num_tc, rows, cols, 1, cols, glb, 32 * 2**30, bw, 1e9, **kw).as_arrays()


def test_one_128_array_128_cube():
    # one weight tile: 2R + C - 2 + M = 256 + 128 - 2 + 128 = 510 cycles at 1 GHz; compute-bound
    g = Gemm("g", 1, 128, 128, 128)
    memory_s = 3 * 128 * 128 * 2 / 1200e9                         # 81.9 ns compulsory
    lat = gemm_latency_s(g, chip(), 1)
    assert lat[0] == pytest.approx(510e-9, rel=1e-12) and lat[0] > memory_s


def test_padding_not_divisors():
    # N = 1600 pads to ceil(1600/128) = 13 weight tiles, each streaming M = 4096 rows
    g = Gemm("g", 1, 4096, 1600, 128)
    cyc = gemm_cycles(g, np.array([128]), np.array([128]), np.array([1]))
    assert cyc[0] == 13 * (2 * 128 + 128 - 2 + 4096)
    ideal = 4096 * 1600 * 128 / (128 * 128)
    assert cyc[0] / ideal < 1.15      # padding + fill/drain, not a 10x loss


def test_orientation_swap():
    # GEMV-like M = 1: stream N = 4096 rows through 32 tiles of K x M instead of 1024 tiles of K x N
    g = Gemm("g", 1, 1, 4096, 4096)
    cyc = gemm_cycles(g, np.array([128]), np.array([128]), np.array([1]))
    assert cyc[0] == 32 * (382 + 4096)


def test_split_over_cores():
    g = Gemm("g", 1, 128, 128, 128)          # one tile, 8 cores: the 128 streamed rows split 8 ways
    assert gemm_cycles(g, np.array([128]), np.array([128]), np.array([8]))[0] == 382 + 16
    g = Gemm("g", 1, 1024, 1024, 128)       # 8 tiles over 4 cores: 2 rounds of full tiles
    assert gemm_cycles(g, np.array([128]), np.array([128]), np.array([4]))[0] == 2 * (382 + 1024)
    one, eight = (gemm_cycles(g, np.array([128]), np.array([128]), np.array([c]))[0] for c in (1, 8))
    assert (one, eight) == (8 * 1406, 1406)   # own operand port per core: linear speed-up in compute


def test_hbm_traffic_blocked_and_compulsory():
    g = Gemm("g", 1, 4096, 1600, 128)
    # 2 MiB GLB = 1,048,576 words, R = 128: b = floor(sqrt(4*128^2 + S) - 256) = 799
    # traffic = MN + ceil(1600/799) MK + ceil(4096/799) KN = 6553600 + 3*524288 + 6*204800 elements
    blocked = gemm_hbm_bytes(g, np.array([2 * MiB]), np.array([128]))
    assert blocked[0] == 2 * (6553600 + 3 * 524288 + 6 * 204800)
    compulsory = gemm_hbm_bytes(g, np.array([128 * MiB]), np.array([128]))
    assert compulsory[0] == g.bytes_moved


def test_memory_bound_gemm():
    g = Gemm("g", 1, 1, 4096, 4096)
    arch = chip(bw=1e9, glb=128 * MiB)                          # everything fits: compulsory traffic
    assert gemm_latency_s(g, arch, 1)[0] == pytest.approx(g.bytes_moved / 1e9, rel=1e-12)
    slow = chip(bw=1e9, glb=128 * MiB, memory_efficiency=0.5, op_overhead_s=1e-6)
    assert gemm_latency_s(g, slow, 1)[0] == pytest.approx(2 * g.bytes_moved / 1e9 + 1e-6, rel=1e-12)


def test_matrix_efficiency_scales_compute():
    g = Gemm("g", 1, 128, 128, 128)
    assert gemm_latency_s(g, chip(matrix_efficiency=0.5), 1)[0] == pytest.approx(1020e-9)


def test_vectorized_equals_scalar_loop():
    rng = np.random.default_rng(0)
    idx = rng.choice(len(CANDS), 300, replace=False)
    sub = CANDS.arch.select(idx)
    for g in (Gemm("qkv", 1, 2048, 4608, 12288), Gemm("bmm", 12, 2048, 2048, 128), Gemm("odd", 3, 50257, 77, 1600)):
        for cores in (1, sub.num_tc):
            vec = gemm_latency_s(g, sub, cores)
            c = np.broadcast_to(cores, (len(sub),))
            loop = [gemm_latency_s(g, sub.accelerator(i).as_arrays(), int(c[i]))[0] for i in range(len(sub))]
            assert np.array_equal(vec, loop)


def test_bad_cores_are_config_errors():
    g = Gemm("g", 1, 128, 128, 128)
    with pytest.raises(ConfigError):
        gemm_latency_s(g, chip(), 0)
    with pytest.raises(ConfigError):
        gemm_latency_s(g, chip(num_tc=4), 8)
    with pytest.raises(ConfigError):
        gemm_latency_s(Gemm("g", 1, 0, 128, 128), chip(), 1)
    with pytest.raises(ConfigError):
        op_latency_s("not an op", chip(), 1)


dims = st.integers(1, 6000)


@settings(max_examples=60, deadline=None)
@given(m=dims, n=dims, k=dims, b=st.integers(1, 16), i=st.integers(0, len(CANDS) - 1), c=st.integers(0, 12))
def test_monotone(m, n, k, b, i, c):
    g = Gemm("g", b, m, n, k)
    a = CANDS.arch.accelerator(i)
    base = ArchArrays.from_accelerators([a])
    few = min(2**c, a.num_tc)
    modes = [gemm_latency_s(g, base, x)[0] for x in range(1, a.num_tc + 1)] if a.num_tc <= 16 else \
        [gemm_latency_s(g, base, x)[0] for x in sorted({1, few, max(1, a.num_tc // 2), a.num_tc})]
    assert all(y <= x * (1 + 1e-12) for x, y in zip(modes, modes[1:]))   # more cores: never slower
    from dataclasses import replace
    for field, factor in (("hbm_bandwidth_Bps", 2.0), ("glb_bytes", 2), ("glb_bytes", 64)):
        better = ArchArrays.from_accelerators([replace(a, **{field: getattr(a, field) * factor})])
        for x in (1, few, a.num_tc):
            assert gemm_latency_s(g, better, x)[0] <= gemm_latency_s(g, base, x)[0] * (1 + 1e-12)


def test_glb_traffic_monotone_dense_sweep():
    rng = np.random.default_rng(1)
    glbs = np.array([2**p for p in range(10, 31)])
    for _ in range(300):
        m, n, k = (int(x) for x in rng.integers(1, 20000, 3))
        rows = np.full(len(glbs), int(2 ** rng.integers(1, 9)))
        t = gemm_hbm_bytes(Gemm("g", 1, m, n, k), glbs, rows)
        assert np.all(np.diff(t) <= 0) and t[-1] >= Gemm("g", 1, m, n, k).bytes_moved
