"""Collective latency on one network tier (alpha-beta model of ring algorithms; Thakur, Rabenseifner and
Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA 2005).

With n devices, B bytes per device (the full buffer, NCCL's convention), bw = tier.effective_bandwidth_Bps
(per device per direction) and a = tier.latency_s per ring step:
  all-reduce      2(n-1)/n * B / bw + 2(n-1) a      (reduce-scatter followed by all-gather)
  reduce-scatter   (n-1)/n * B / bw +  (n-1) a
  all-gather       (n-1)/n * B / bw +  (n-1) a
  point-to-point   B / bw + a
A group of one device costs nothing, as does an empty buffer.
"""
from __future__ import annotations

from phaze.errors import ConfigError
from phaze.hardware.cluster import NetworkTier
from phaze.workload.ops import Collective


def _check(nbytes, group_size: int, tier: NetworkTier) -> None:
    if nbytes < 0:
        raise ConfigError(f"collective: bytes must be >= 0, got {nbytes}")
    if group_size < 1:
        raise ConfigError(f"collective: group size must be >= 1, got {group_size}")
    if not tier.effective_bandwidth_Bps > 0:
        raise ConfigError(f"network tier {tier.name!r}: bandwidth and efficiency must be positive")


def _ring(nbytes, group_size: int, tier: NetworkTier, passes: int) -> float:
    _check(nbytes, group_size, tier)
    n = group_size
    if n == 1 or nbytes == 0:
        return 0.0
    return passes * ((n - 1) / n * nbytes / tier.effective_bandwidth_Bps + (n - 1) * tier.latency_s)


def allreduce_latency_s(nbytes, group_size: int, tier: NetworkTier) -> float:
    """Ring all-reduce of ``nbytes`` per device over ``group_size`` devices."""
    return _ring(nbytes, group_size, tier, 2)


def reduce_scatter_latency_s(nbytes, group_size: int, tier: NetworkTier) -> float:
    """Ring reduce-scatter; ``nbytes`` is the full (unsharded) buffer per device."""
    return _ring(nbytes, group_size, tier, 1)


def all_gather_latency_s(nbytes, group_size: int, tier: NetworkTier) -> float:
    """Ring all-gather; ``nbytes`` is the full (gathered) buffer per device."""
    return _ring(nbytes, group_size, tier, 1)


def p2p_latency_s(nbytes, tier: NetworkTier) -> float:
    """One send of ``nbytes`` between two devices on ``tier``."""
    _check(nbytes, 2, tier)
    return 0.0 if nbytes == 0 else nbytes / tier.effective_bandwidth_Bps + tier.latency_s


def collective_latency_s(coll: Collective, tier: NetworkTier) -> float:
    """Latency of a Collective op on ``tier`` (a group of one costs 0)."""
    if coll.group_size <= 1:
        _check(coll.bytes, max(coll.group_size, 1), tier)
        return 0.0
    if coll.kind == "all_reduce":
        return allreduce_latency_s(coll.bytes, coll.group_size, tier)
    if coll.kind == "reduce_scatter":
        return reduce_scatter_latency_s(coll.bytes, coll.group_size, tier)
    if coll.kind == "all_gather":
        return all_gather_latency_s(coll.bytes, coll.group_size, tier)
    if coll.kind == "p2p":
        return p2p_latency_s(coll.bytes, tier)
    raise ConfigError(f"collective {coll.name!r}: unknown kind {coll.kind!r} "
                      "(all_reduce, reduce_scatter, all_gather, p2p)")
