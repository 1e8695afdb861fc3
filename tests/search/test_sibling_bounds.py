"""A chip's candidates on several networks bound each other in a batch (``phaze.search.exact.evaluate_chips``):
the result on a network at least as fast bounds the chip on a slower one, scaled by the objective weights."""
import pytest

import phaze.search.exact as exact
from phaze.hardware.chip_network import ChipNetwork
from phaze.search.exact import ChipResult, ChipTask, sibling_bounds

FAST = ChipNetwork(64, 200e9, "switch", 50e9)
SLOW = ChipNetwork(8, 100e9, "switch", 25e9)
TORUS = ChipNetwork(64, 200e9, "torus", 50e9)  # faster than SLOW on no tier count: a torus is never "at least as fast"


def task(index, base, net, incumbent=1.0, hbm=(32, 64), weights=None):
    return ChipTask(index, None, hbm, (), None, 8, 8, incumbent, weight_by_hbm=weights, base_chip=base, network=net)


def test_bound_is_the_faster_siblings_score_times_the_weight_ratio():
    fast = task(0, 7, FAST, weights={32: 2.0, 64: 4.0})
    seen = [(fast, [ChipResult(0, 64, "exact", 0.9, (), 0, 0), ChipResult(0, 32, "bounded", 0.5, (), 0, 0)])]
    # slow on the same chip, weights 1 and 2: 0.9 x 4 / 2 = 1.8 at 64 GiB, 0.5 x 2 / 1 = 1.0 at 32 GiB
    got = sibling_bounds(task(1, 7, SLOW, weights={32: 1.0, 64: 2.0}), seen)
    assert {g: b for g, (b, _) in got.items()} == pytest.approx({64: 1.8, 32: 1.0})
    assert not got[64][1] and not got[32][1]  # upper bounds, not strict
    assert sibling_bounds(task(2, 8, SLOW), seen) == {}  # another chip
    assert sibling_bounds(task(3, 7, FAST), [(task(4, 7, SLOW), seen[0][1])]) == {}  # a slower network bounds nothing
    assert sibling_bounds(task(5, 7, SLOW), [(task(6, 7, TORUS), seen[0][1])]) == {}
    assert sibling_bounds(task(7, 7, None), seen) == {}  # no network axis


def test_a_chip_below_the_incumbent_on_its_fastest_network_is_not_evaluated_on_slower_ones(monkeypatch):
    calls = []

    def fake(t):
        calls.append((t.index, t.hbm_gib))
        score = {0: 0.8, 2: 1.5}[t.index]
        return [ChipResult(t.index, g, "exact", score * (g / 64), (), 0, 0) for g in sorted(t.hbm_gib, reverse=True)]

    monkeypatch.setattr(exact, "evaluate_chip", fake)
    # chip 7 on FAST scores 0.8 / 0.4 < incumbent 1.0: on SLOW it is bounded by those, never evaluated; chip 9's
    # slow candidate has no faster sibling in the batch and is evaluated
    out = exact.evaluate_chips((task(0, 7, FAST), task(1, 7, SLOW), task(2, 9, SLOW)))
    assert calls == [(0, (32, 64)), (2, (32, 64))]
    assert [(r.hbm_gib, r.status, r.score) for r in out[1]] == [(64, "bounded", 0.8), (32, "bounded", 0.4)]
    assert [r.status for r in out[2]] == ["exact", "exact"]


def test_a_sibling_bound_above_the_incumbent_leaves_that_size_to_the_exact_evaluation(monkeypatch):
    calls = []

    def fake(t):
        calls.append((t.index, t.hbm_gib))
        return [ChipResult(t.index, g, "exact", {64: 1.2, 32: 0.6}[g], (), 0, 0) for g in sorted(t.hbm_gib, reverse=True)]

    monkeypatch.setattr(exact, "evaluate_chip", fake)
    out = exact.evaluate_chips((task(0, 7, FAST), task(1, 7, SLOW)))
    # FAST: 1.2 at 64 GiB (above the incumbent: SLOW must be evaluated there), 0.6 at 32 GiB (SLOW bounded)
    assert calls == [(0, (32, 64)), (1, (64,))]
    assert [(r.hbm_gib, r.status) for r in out[1]] == [(64, "exact"), (32, "bounded")]


def test_a_strict_bound_equal_to_the_incumbent_rules_the_slower_sibling_out(monkeypatch):
    """A chip proven below the incumbent on its fastest network (its bounded result carries that incumbent as
    its score, strict) is below it on every slower network too, although the score equals the incumbent; a
    non-strict upper bound equal to the incumbent does not rule it out (a tie is evaluated)."""
    calls = []

    def fake(t):
        calls.append(t.index)
        strict = t.index in (0, 10)
        return [ChipResult(t.index, g, "bounded" if strict else "exact", 1.0, (), 0, 0, strict=strict)
                for g in sorted(t.hbm_gib, reverse=True)]

    monkeypatch.setattr(exact, "evaluate_chip", fake)
    out = exact.evaluate_chips((task(0, 7, FAST), task(1, 7, SLOW)))
    assert calls == [0]
    assert all(r.status == "bounded" and r.strict and r.score == 1.0 for r in out[1])
    # a later incumbent below the strict bound's leaves the sibling to the exact evaluation
    calls.clear()
    exact.evaluate_chips((task(10, 7, FAST), task(11, 7, SLOW, incumbent=0.9)))
    assert calls == [10, 11]
    # an exact score equal to the incumbent (a tie) bounds nothing
    calls.clear()
    exact.evaluate_chips((task(2, 7, FAST), task(3, 7, SLOW)))
    assert calls == [2, 3]
