"""Collectives on a network tier, hand-computed."""
import numpy as np
import pytest

from phaze.cost import (all_gather_latency_s, allreduce_latency_s, collective_latency_s, op_latency_s,
                        p2p_latency_s, reduce_scatter_latency_s)
from phaze.errors import ConfigError
from phaze.hardware import NetworkTier, enumerate_space, get_cluster
from phaze.hardware.space import PAPER_SPACE
from phaze.workload.ops import Collective

TIER = NetworkTier("t", 8, 100e9, 1e-6, 0.5)   # effective 50e9 B/s


def test_allreduce():
    assert allreduce_latency_s(1e9, 8, TIER) == pytest.approx(2 * 7 / 8 * 1e9 / 50e9 + 14e-6, rel=1e-12)


def test_reduce_scatter_and_all_gather():
    expect = 3 / 4 * 4e8 / 50e9 + 3e-6
    assert reduce_scatter_latency_s(4e8, 4, TIER) == pytest.approx(expect, rel=1e-12)
    assert all_gather_latency_s(4e8, 4, TIER) == pytest.approx(expect, rel=1e-12)


def test_p2p():
    assert p2p_latency_s(5e9, TIER) == pytest.approx(0.1 + 1e-6, rel=1e-12)


def test_group_of_one_is_free():
    assert allreduce_latency_s(1e9, 1, TIER) == 0.0
    assert collective_latency_s(Collective("x", "all_gather", 10**9, 1), TIER) == 0.0


def test_collective_dispatch():
    for kind, fn in (("all_reduce", allreduce_latency_s), ("reduce_scatter", reduce_scatter_latency_s),
                     ("all_gather", all_gather_latency_s)):
        assert collective_latency_s(Collective("c", kind, 10**8, 8), TIER) == fn(10**8, 8, TIER)
    assert collective_latency_s(Collective("c", "p2p", 10**8, 2), TIER) == p2p_latency_s(10**8, TIER)


def test_paper_network_and_dgx():
    flat = get_cluster("flat-4gib").tier_for_group(8)
    assert allreduce_latency_s(2**30, 8, flat) == pytest.approx(2 * 7 / 8 / 4, rel=1e-12)   # 1 GiB at 4 GiB/s
    nv = get_cluster("dgx-a100").tier_for_group(8)
    assert allreduce_latency_s(1e9, 8, nv) == pytest.approx(1.75e9 / 230e9 + 14 * 3e-6, rel=1e-12)


def test_op_latency_collective_is_per_chip_constant():
    arch = enumerate_space(PAPER_SPACE).arch
    lat = op_latency_s(Collective("ar", "all_reduce", 10**8, 8), arch, 1, TIER)
    assert lat.shape == (len(arch),) and np.all(lat == allreduce_latency_s(10**8, 8, TIER))


def test_bad_collectives():
    with pytest.raises(ConfigError):
        collective_latency_s(Collective("c", "broadcast", 10, 8), TIER)
    with pytest.raises(ConfigError):
        allreduce_latency_s(-1, 8, TIER)
    with pytest.raises(ConfigError):
        allreduce_latency_s(10, 0, TIER)
