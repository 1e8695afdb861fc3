"""``search.bounds._distinct_columns``: the columns a unit's pipeline bound is computed on, one per chip when
every candidate of a chip has its chip's lower times, the distinct columns otherwise; either way they give back
every candidate's column."""
import numpy as np

from phaze.search.bounds import _distinct_columns


def test_one_column_per_chip_when_a_chips_candidates_agree():
    chip_index = np.array([2, 0, 2, 1, 0, 2])
    per_chip = np.array([[1.0, 5.0, 3.0], [2.0, 6.0, 4.0]])  # [slot, chip]
    lower = per_chip[:, chip_index]
    cols, back = _distinct_columns(lower, chip_index)
    assert cols.shape == (2, 3)  # one per chip, not one per candidate
    assert np.array_equal(cols[:, back], lower)


def test_distinct_columns_when_a_chip_has_two_sets_of_times():
    chip_index = np.array([0, 0, 1, 1])
    lower = np.array([[1.0, 1.5, 3.0, 3.0], [2.0, 2.0, 4.0, 4.0]])  # chip 0's second candidate differs (t > 1)
    cols, back = _distinct_columns(lower, chip_index)
    assert cols.shape == (2, 3)
    assert np.array_equal(cols[:, back], lower)
