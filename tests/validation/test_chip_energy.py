"""phaze's GEMM energy against ZigZag's minimum-energy mapping under the same per-access energies (the stored
energy panel; docs/chip-energy-validation.md)."""
import pytest

from phaze.validation.chip_energy import (COMPARED_PARTS, ENERGY_GOAL_MAX_PCT, ENERGY_GOAL_MEAN_PCT, energy_costs_pj,
                                          load_energy_panel, validate_chip_energy)
from phaze.validation.goals import goal

REPORT = validate_chip_energy()
ENERGY_GOAL = goal("chip_gemm_energy")  # src/phaze/validation/data/goals.json
PANEL = load_energy_panel()
# attention scores (K <= R): one weight tile, so ZigZag keeps the final sums at 16 bits in the accumulator
# where phaze's fp32 accumulator writes and reads whole rows (docs/chip-energy-validation.md)
ONE_TILE = [c for c in REPORT.cases if ".scores" in c.name]
OTHERS = [c for c in REPORT.cases if ".scores" not in c.name]
# cases whose faster orientation moved with the accumulator's port rate (issue 34 item 1a), with their bound
FLIPPED = {"256x256 gpt3.fc2 mb1 M/2/K/8/N/24 @512B/c": 1.1, "64x64 gpt2-xl.fc1 mb4 M/8/K/6.25/N/25 @64B/c": 3.1}


def test_the_panel_was_made_with_phazes_constants():
    # ZigZag ran with the energies phaze charges now; a change of a constant or of a chip rule needs
    # scripts/chip_energy_panel.py again
    assert len(PANEL["cases"]) == len(REPORT.cases) == 62
    for c in PANEL["cases"]:
        assert c["energy_costs_pj"] == pytest.approx(energy_costs_pj(c), rel=1e-9), c["name"]


def test_every_case_has_zigzag_in_phazes_orientation_and_the_macs_agree():
    for c in REPORT.cases:
        assert c.zigzag_pj is not None, c.name
        assert set(c.phaze_pj) == set(COMPARED_PARTS)
        assert c.phaze_pj["mac"] == pytest.approx(c.zigzag_pj["mac"], rel=1e-9), c.name  # same count, same constant


def test_the_counts_agree_where_the_conventions_do():
    # beyond the one-tile GEMMs every case is within 1.5% of ZigZag on phaze's schedule (or, for the 9 whose
    # K is not a multiple of the rows, of ZigZag's best mapping in phaze's orientation): the GLB and the
    # operand buffer to 0.1% on phaze's schedule, the accumulator 0-8% below ZigZag's (ZigZag also reads
    # the first tile's partial sums back; docs/chip-energy-validation.md)
    assert len(OTHERS) == 58
    assert sum(c.reference == "schedule" for c in OTHERS) == 49
    for c in OTHERS:
        if c.name in FLIPPED:
            # issue 34's accumulator rate made phaze take the other orientation here; the stored ZigZag run
            # counts the schedule of the orientation it took before (regenerate scripts/chip_energy_panel.py)
            assert 0.05 < c.error_pct < FLIPPED[c.name], c.name
            continue
        assert -1.5 < c.error_pct < 0.05, c.name
        if c.reference == "schedule":
            for part in ("glb", "operand_buffer"):
                assert c.phaze_pj[part] == pytest.approx(c.zigzag_pj[part], rel=1e-3), (c.name, part)
            assert 0.9 < c.phaze_pj["accumulator"] / c.zigzag_pj["accumulator"] <= 1.0 + 1e-9, c.name


def test_phazes_schedule_is_never_cheaper_than_zigzags_best_mapping():
    # phaze's latency-first schedule costs at least what ZigZag's minimum-energy searches find, within the
    # accumulator convention (1.5%); where it picked the orientation for speed it costs up to 11.5% more
    for c in REPORT.cases:
        assert c.min_error_pct > -1.5, c.name
    assert max(c.min_error_pct for c in OTHERS) == pytest.approx(11.5, abs=0.1)


def test_one_tile_gemms_differ_by_the_final_sums_precision_only():
    # the accumulator part is exactly 2x ZigZag's (fp32 rows written and read vs 16-bit finals); the other
    # parts agree
    assert len(ONE_TILE) == 4
    for c in ONE_TILE:
        assert c.phaze_pj["accumulator"] / c.zigzag_pj["accumulator"] == pytest.approx(2.0, rel=1e-6)
        for part in ("mac", "glb", "operand_buffer"):
            assert c.phaze_pj[part] == pytest.approx(c.zigzag_pj[part], rel=0.02), (c.name, part)


def test_the_figures_the_readme_reports():
    """README's trust table and docs/chip-energy-validation.md: 1.5% mean, 25.3% max over 62 cases, 60 within 15%,
    lowest -1.4%. A change (better or worse) must update the docs; the goal is the strict xfail below."""
    assert len(REPORT.cases) == 62 and REPORT.within_goal == 60
    assert round(REPORT.mean_abs_pct, 1) == 1.5 and round(REPORT.max_abs_pct, 1) == 25.3
    assert round(REPORT.lowest_pct, 1) == -1.4
    assert not REPORT.goal_met


# Not met today: an unconditional strict xfail, so meeting the goal fails the suite until the marker is removed.
@pytest.mark.xfail(strict=True, reason=f"not met ({ENERGY_GOAL.text()}, {ENERGY_GOAL.source}): "
                                       f"{REPORT.mean_abs_pct:.1f}% mean, {REPORT.max_abs_pct:.1f}% max; the four "
                                       "one-tile (K <= R) GEMMs are +12..+25% (the final sums' precision in the "
                                       "accumulator, a convention; docs/chip-energy-validation.md)")
def test_energy_goal():
    assert REPORT.goal_met
    assert REPORT.max_abs_pct <= ENERGY_GOAL_MAX_PCT and REPORT.mean_abs_pct <= ENERGY_GOAL_MEAN_PCT


def test_cli_validate_chip_json_carries_the_energy_check(capsys):
    import json

    from clirunner import run_phaze
    code, out, err = run_phaze(capsys, "validate", "--chip", "--json")
    assert code == 0, err
    e = json.loads(out)["energy"]
    assert len(e["cases"]) == 62 and e["goal"] == {"max_abs_pct": ENERGY_GOAL.max_abs_pct,
                                                   "mean_abs_pct": ENERGY_GOAL.mean_abs_pct, "met": False}
    assert e["mean_abs_pct"] == pytest.approx(REPORT.mean_abs_pct) and e["lowest_pct"] == pytest.approx(REPORT.lowest_pct)
    assert {c["reference"] for c in e["cases"]} == {"schedule", "search"}
