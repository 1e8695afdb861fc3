"""Vector-op cost and dispatch."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze.cost import core_modes, op_latency_s, vector_latency_s
from phaze.errors import ConfigError
from phaze.hardware import Accelerator, enumerate_space
from phaze.hardware.space import PAPER_SPACE
from phaze.workload.ops import Collective, VectorOp

CANDS = enumerate_space(PAPER_SPACE)  # the paper template (the chip model: test_cost_chip.py)


def chip(num_vc=8, lanes=128, bw=1200e9, **kw):
    return Accelerator("t", 1, 128, 128, num_vc, lanes, 2**21, 2**35, bw, 1e9, **kw).as_arrays()


def test_memory_bound_is_bytes_over_bandwidth():
    op = VectorOp("add", "add", 10**6, 1.0, 4 * 10**6)
    # compute: ceil(1e6 / (8*128)) = 977 cycles = 0.977 us < memory 4e6 / 1.2e12 = 3.33 us
    assert vector_latency_s(op, chip(), 8)[0] == pytest.approx(4e6 / 1200e9, rel=1e-12)
    assert vector_latency_s(op, chip(memory_efficiency=0.9), 8)[0] == pytest.approx(4e6 / 1080e9, rel=1e-12)


def test_compute_bound_hand_computed():
    op = VectorOp("gelu", "gelu", 10**6, 14.0, 4 * 10**6)
    # one core of 128 lanes: ceil(1e6/128) = 7813 waves x 14 ops = 109,382 cycles at 1 GHz
    assert vector_latency_s(op, chip(), 1)[0] == pytest.approx(109_382e-9, rel=1e-12)
    assert vector_latency_s(op, chip(op_overhead_s=2e-6), 1)[0] == pytest.approx(109_382e-9 + 2e-6, rel=1e-12)


def test_vectorized_equals_scalar_loop():
    idx = np.random.default_rng(2).choice(len(CANDS), 200, replace=False)
    sub = CANDS.arch.select(idx)
    op = VectorOp("softmax", "softmax", 12 * 2048 * 2048, 7.0, 4 * 12 * 2048 * 2048)
    vec = vector_latency_s(op, sub, sub.num_vc)
    loop = [vector_latency_s(op, sub.accelerator(i).as_arrays(), int(sub.num_vc[i]))[0] for i in range(len(sub))]
    assert np.array_equal(vec, loop)


@settings(max_examples=60, deadline=None)
@given(e=st.integers(1, 10**8), f=st.floats(0, 30), b=st.integers(0, 10**9), i=st.integers(0, len(CANDS) - 1))
def test_monotone_in_cores_and_bandwidth(e, f, b, i):
    op = VectorOp("v", "x", e, f, b)
    a = CANDS.arch.select([i])
    lat = [vector_latency_s(op, a, c)[0] for c in core_modes(int(a.num_vc[0]))]
    assert all(y <= x for x, y in zip(lat, lat[1:]))
    from dataclasses import replace
    faster = replace(a, hbm_bandwidth_Bps=a.hbm_bandwidth_Bps * 2)
    assert vector_latency_s(op, faster, 1)[0] <= vector_latency_s(op, a, 1)[0]


def test_core_modes():
    assert core_modes(1) == (1,)
    assert core_modes(8) == (1, 2, 4, 8)
    assert core_modes(6) == (1, 2, 4, 6)
    for bad in (0, -2, 2.0):
        with pytest.raises(ConfigError):
            core_modes(bad)


def test_bad_inputs():
    op = VectorOp("v", "x", 100, 1.0, 400)
    with pytest.raises(ConfigError):
        vector_latency_s(op, chip(), 0)
    with pytest.raises(ConfigError):
        vector_latency_s(op, chip(num_vc=2), np.array([3]))
    with pytest.raises(ConfigError):
        op_latency_s(Collective("ar", "all_reduce", 100, 8), chip(), 1)      # needs a tier


def test_dispatch():
    arch = CANDS.arch.select(slice(0, 10))
    op = VectorOp("v", "x", 100, 1.0, 400)
    assert np.array_equal(op_latency_s(op, arch, 1), vector_latency_s(op, arch, 1))
    assert np.array_equal(op_latency_s(Collective("ar", "all_reduce", 100, 1), arch, 1), np.zeros(10))
