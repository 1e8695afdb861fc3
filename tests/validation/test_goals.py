"""One source for each validation goal: src/phaze/validation/data/goals.json, read by phaze.validation.goals."""
import pytest

from phaze.validation.chip import GOAL_MAX_PCT, GOAL_MEAN_PCT
from phaze.validation.chip_energy import ENERGY_GOAL_MAX_PCT, ENERGY_GOAL_MEAN_PCT
from phaze.validation.goals import Goal, goal, goals


def test_every_goal_has_its_figures_and_its_source():
    table = goals()
    assert set(table) == {"published_runs", "held_out", "korthikanti", "chip_gemm_latency", "chip_gemm_energy",
                          "memory_fits", "moe_dev"}
    for name, g in table.items():
        assert isinstance(g, Goal) and g.name == name and g.what and g.source
        if name != "memory_fits":
            assert 0 < g.mean_abs_pct <= g.max_abs_pct
    assert (goal("published_runs").mean_abs_pct, goal("published_runs").max_abs_pct) == (5.0, 10.0)
    assert goal("held_out").text() == "6% mean / 12% max"


def test_the_code_constants_read_the_file():
    assert (GOAL_MEAN_PCT, GOAL_MAX_PCT) == (goal("chip_gemm_latency").mean_abs_pct, goal("chip_gemm_latency").max_abs_pct)
    assert (ENERGY_GOAL_MEAN_PCT, ENERGY_GOAL_MAX_PCT) == (goal("chip_gemm_energy").mean_abs_pct,
                                                        goal("chip_gemm_energy").max_abs_pct)
    assert all(isinstance(v, float) for v in (GOAL_MEAN_PCT, GOAL_MAX_PCT))  # "15.0" in --json, as before


def test_met_and_unknown_names():
    g = goal("chip_gemm_latency")
    assert g.met(3.9, 15.0) and not g.met(3.9, 21.0) and not g.met(5.1, 10.0)
    with pytest.raises(KeyError, match="known"):
        goal("nope")
