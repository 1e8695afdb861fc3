"""The 23 published runs (SC21 Table 1 on A100, NeMo on H100): packaged with their sources, every plan fits,
and the time error per group stays within the bounds achieved today (NOT the issue's 5% / 10% goal: see the
README's validation section for the figures)."""
import json
from importlib import resources

import pytest

from phaze.validation import validate
from phaze.validation.cases import RUNS_FILE, packaged_cases

# |error| bounds actually achieved per group (mean, max), to catch regressions; the goal is 5% / 10%.
ACHIEVED = {"SC21-T1": (4.5, 10.0), "NeMo": (8.0, 13.0)}


@pytest.fixture(scope="module")
def report():
    return validate(packaged_cases(RUNS_FILE))


def test_runs_are_packaged_with_sources():
    data = json.loads(resources.files("phaze.validation").joinpath("data", RUNS_FILE).read_text())
    assert len(data["runs"]) == 23
    for r in data["runs"]:
        assert r["source"] and r["measured_iteration_time_s"] > 0 and r["assumptions"]
    cases = packaged_cases(RUNS_FILE)
    nemo = [c for c in cases.time if c.group == "NeMo"]
    assert len(nemo) == 13 and all(c.attention == "flash" and c.tp_overlap and c.dp_overlap and c.zero1 for c in nemo)
    sc21 = [c for c in cases.time if c.group == "SC21-T1"]
    assert len(sc21) == 10 and not any(c.dp_overlap or c.zero1 or c.attention == "flash" for c in sc21)


def test_every_published_run_fits(report):
    """They all trained on 80 GB GPUs: a plan the memory model rejects is a false negative."""
    assert all(r.fits for r in report.time), [(r.case, r.memory_gib) for r in report.time if not r.fits]
    assert all(r.memory_gib <= r.capacity_gib for r in report.time)


def test_time_error_per_group_within_achieved_bounds(report):
    groups = {g.group: g for g in report.groups}
    assert set(groups) == set(ACHIEVED)
    for name, (mean, mx) in ACHIEVED.items():
        g = groups[name]
        assert g.time_mean_abs_pct <= mean and g.time_max_abs_pct <= mx, g
        errs = [abs(r.error_pct) for r in report.time if r.group == name]
        assert g.time_mean_abs_pct == pytest.approx(sum(errs) / len(errs))


def test_held_out_runs_are_separate_and_reported():
    """The held-out runs (Llama 3.1 on H100, BF16 and FP8, context parallelism) are never in the default set
    the model is checked against; their figures are reported as they come (README), here only that they
    evaluate and that the bounds achieved today hold (the goal, 6% / 12%, is NOT met)."""
    from phaze.validation.cases import HELD_OUT_FILE, load_cases
    held = packaged_cases(HELD_OUT_FILE)
    assert len(held.time) == 34 and all(c.cp == 2 for c in held.time)
    assert not {c.label for c in held.time} & {c.label for c in load_cases().time}
    rep = validate("held-out")
    groups = {g.group: g for g in rep.groups}
    assert set(groups) == {"dgxc Llama 3.1 BF16", "dgxc Llama 3.1 FP8"}
    assert groups["dgxc Llama 3.1 BF16"].time_mean_abs_pct <= HELD_OUT_ACHIEVED[0]
    assert rep.time_max_abs_pct <= HELD_OUT_ACHIEVED[1]


HELD_OUT_ACHIEVED = (4.5, 15.5)  # BF16 group mean, overall max |error| % today
