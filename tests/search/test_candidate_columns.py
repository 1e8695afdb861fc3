"""``search.candidate_columns``: the columns the bounds of (chip, network) candidates are stored in (one per chip
and class of networks with the same tensor-parallel tiers), and the distinct columns a unit's pipeline bound is
computed on; either way every candidate gets back its own times."""
import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.chip_network import ChipNetwork, fastest, network_cluster
from phaze.hardware.presets import TPUV4_LIKE
from phaze.search.candidate_columns import NetworkCandidates, distinct_columns, network_columns


def test_one_column_per_chip_when_a_chips_columns_agree():
    chip_of = np.array([2, 0, 2, 1, 0, 2])
    per_chip = np.array([[1.0, 5.0, 3.0], [2.0, 6.0, 4.0]])  # [slot, chip]
    lower = per_chip[:, chip_of]
    cols, back = distinct_columns(lower, chip_of)
    assert cols.shape == (2, 3)  # one per chip, not one per column
    assert np.array_equal(cols[:, back], lower)


def test_distinct_columns_when_a_chip_has_two_sets_of_times():
    chip_of = np.array([0, 0, 1, 1])
    lower = np.array([[1.0, 1.5, 3.0, 3.0], [2.0, 2.0, 4.0, 4.0]])  # chip 0's second column differs (t > 1)
    cols, back = distinct_columns(lower, chip_of)
    assert cols.shape == (2, 3)
    assert np.array_equal(cols[:, back], lower)


def _candidates():
    # three networks: two switches of 16 chips that differ only in their scale-out (the same tier for a tensor-
    # parallel group of 2 or 4 chips, inside the domain), and one with twice the scale-up bandwidth
    nets = [ChipNetwork(16, 50e9, "switch", 12.5e9), ChipNetwork(16, 50e9, "switch", 25e9),
            ChipNetwork(16, 100e9, "switch", 12.5e9)]
    clusters = tuple(network_cluster(n, 64) for n in nets)
    base = ArchArrays.from_accelerators([TPUV4_LIKE, TPUV4_LIKE])
    chip_index = np.array([0, 0, 0, 1, 1, 1, 0])
    network_index = np.array([0, 1, 2, 0, 1, 2, 1])
    return NetworkCandidates(base, chip_index, network_index, clusters, network_cluster(fastest(nets), 64))


def test_networks_with_the_same_tiers_share_a_column():
    net = _candidates()
    at_t1 = network_columns(net, {1})  # no collective: one column per chip
    assert len(at_t1.chip) == 2 and np.array_equal(at_t1.chip[at_t1.of], net.chip_index)
    cols = network_columns(net, {1, 2, 4})
    assert len(cols.chip) == 4  # per chip: networks 0 and 1 together, network 2 alone
    assert np.array_equal(cols.chip[cols.of], net.chip_index)
    assert cols.of[0] == cols.of[1] == cols.of[6] and cols.of[2] != cols.of[0] and cols.of[3] == cols.of[4]
    for c in range(len(net.chip_index)):  # each column's network has the candidate's own tier at every t
        mine, its = net.clusters[net.network_index[c]], net.clusters[cols.network[cols.of[c]]]
        for t in (2, 4):
            assert mine.tier_for_group(t) == its.tier_for_group(t)
