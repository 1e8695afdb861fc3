"""The (chip, network) candidates of a space with a network axis, and the columns their layer-time bounds are
stored in.

A candidate's layer times depend on its chip and, through the tensor-parallel collectives, on the tier its
network gives a group of t chips. Networks whose tiers agree for every t a model searches time every layer
alike, so the bounds keep one column per (chip, class of such networks) rather than one per candidate: at
t = 1 alone, one per chip (the demo's GPT-2 XL: 70,502 columns for 558,084 candidates).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.cluster import Cluster


@dataclass(frozen=True)
class NetworkCandidates:
    """What the bounds of (chip, network) candidates need: the distinct chips, each candidate's chip row and
    network, and each network's cluster (``phaze.hardware.chip_network.network_cluster``)."""

    base: ArchArrays
    chip_index: np.ndarray
    network_index: np.ndarray
    clusters: tuple[Cluster, ...]
    fastest: Cluster  # a network at least as fast as every choice (``phaze.hardware.chip_network.fastest``)


@dataclass(frozen=True)
class Columns:
    """``of[candidate]``: its column; per column, its chip row (``chip``) and a network of its class
    (``network``: every network of the class has that network's tiers for each t searched)."""

    of: np.ndarray
    chip: np.ndarray
    network: np.ndarray


def tier_key(tier) -> tuple:
    """What a layer's time reads of a tensor-parallel tier."""
    return (tier.bandwidth_Bps, tier.latency_s, tier.efficiency)


def network_columns(net: NetworkCandidates, tps) -> Columns:
    """The columns of ``net``'s candidates for a model whose settings use the tensor-parallel widths ``tps``:
    one per chip and class of networks with the same tier for every t > 1 in ``tps`` (module docstring)."""
    widths = sorted({int(t) for t in tps if t > 1})
    classes: dict = {}
    class_of = np.array([classes.setdefault(tuple(tier_key(cl.tier_for_group(t)) for t in widths), len(classes))
                         for cl in net.clusters], dtype=np.int64)
    first = np.zeros(len(classes), dtype=np.int64)  # a network of each class: its first
    for k in reversed(range(len(class_of))):
        first[class_of[k]] = k
    n_chips = len(net.base)
    keys, of = np.unique(class_of[net.network_index] * n_chips + np.asarray(net.chip_index), return_inverse=True)
    return Columns(of.reshape(-1), keys % n_chips, first[keys // n_chips])


def distinct_columns(lower: np.ndarray, chip_of: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(columns, back) with ``columns[:, back]`` equal to ``lower`` [slot, column]: a chip's columns often have
    the same lower times (every class at t = 1), so a bound over them is computed once per distinct column.
    When every column equals its chip's first one (checked), one per chip (a sort of integers); otherwise the
    distinct columns (a sort of 6-float rows)."""
    _, first, inv = np.unique(chip_of, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    per_chip = lower[:, first]
    if np.array_equal(per_chip[:, inv], lower):
        return per_chip, inv
    cols, back = np.unique(lower, axis=1, return_inverse=True)
    return cols, back.reshape(-1)
