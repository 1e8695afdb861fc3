"""The third held-out set: Megatron-LM's CI runs (a 7B GPT on one 8-GPU H100 / A100 node) with measured iteration
time and measured peak memory of the last pipeline stage, and 13 of its small-GPT tests with measured peak memory
only (scripts/build_held_out3.py)."""
import json
from importlib import resources

import pytest
from script_loader import load_script

from phaze.errors import ConfigError
from phaze.validation import validate
from phaze.validation.cases import HELD_OUT2_FILE, HELD_OUT3_FILE, HELD_OUT_FILE, load_cases, packaged_cases
from phaze.validation.goals import goal
from phaze.validation.runs import runs_from_mapping

GiB = 2**30
HELD_OUT = goal("held_out")  # the goal for runs the model was not built on (data/goals.json)
HELD_OUT_GOAL = (HELD_OUT.mean_abs_pct, HELD_OUT.max_abs_pct)
MEMORY_GOAL_PCT = 5.0  # ours: every measured peak within 5%


@pytest.fixture(scope="module")
def held_out_3():
    return validate("held-out-3")


def test_packaged_with_sources_and_reproduced_by_its_script():
    text = resources.files("phaze.validation").joinpath("data", HELD_OUT3_FILE).read_text()
    assert json.dumps(load_script("build_held_out3").document(), indent=1) + "\n" == text
    data = json.loads(text)
    assert len(data["runs"]) == 4 + 13
    for r in data["runs"]:
        assert r["source"] and r["conversion"] and r["assumptions"] and r["measured_peak_memory_bytes"] > 0
    timed = [r for r in data["runs"] if r.get("measured_iteration_time_s")]
    assert len(timed) == 4 and all("7b" in r["case"] for r in timed)
    labels = {c.label for c in packaged_cases(HELD_OUT3_FILE).time}
    others = ({c.label for c in load_cases().time} | {c.label for c in packaged_cases(HELD_OUT_FILE).time}
              | {c.label for c in packaged_cases(HELD_OUT2_FILE).time})
    assert len(labels) == 17 and not labels & others


def test_a_run_needs_a_measurement():
    run = {k: v for k, v in json.loads(resources.files("phaze.validation").joinpath("data", HELD_OUT3_FILE)
                                       .read_text())["runs"][0].items()
           if k not in ("measured_iteration_time_s", "measured_peak_memory_bytes")}
    with pytest.raises(ConfigError, match="no measurement"):
        runs_from_mapping({"runs": [run]}, "x.json")


def test_memory_compares_the_last_stage_with_the_measured_peak(held_out_3):
    """One memory row per run: the last pipeline stage's modelled peak against mem-max-allocated-bytes; a time
    row only for the runs with a measured iteration time."""
    cases = {c.label: c for c in packaged_cases(HELD_OUT3_FILE).time}
    assert len(held_out_3.memory) == 17 and len(held_out_3.time) == 4
    for m in held_out_3.memory:
        assert m.quantity == "peak_allocated_last_stage"
        assert m.measured_gib == pytest.approx(cases[m.case].measured_peak_memory_bytes / GiB)
        assert m.error_pct == pytest.approx((m.predicted_gib / m.measured_gib - 1) * 100)


def test_memory_goal(held_out_3):
    """The 7B runs, met: 1.04% mean, 2.22% max (tp1 pp4 -0.95 / -0.57%, tp4 pp1 -0.44 / -2.22% on H100 / A100).
    Before the chunk-by-chunk interleaved stash and the LM head's transient logits the tp1 pp4 runs were +14.7 /
    +15.1% (the head's fp32 logits charged to every in-flight chunk) and tp4 pp1 -2.3 / -4.1%."""
    big = [m for m in held_out_3.memory if "7b" in m.case]
    errs = [abs(m.error_pct) for m in big]
    assert len(big) == 4 and max(errs) <= MEMORY_GOAL_PCT
    assert max(errs) <= 2.3 and sum(errs) / len(errs) <= 1.1  # regressions


def test_small_runs_miss_only_the_library_workspaces(held_out_3):
    """The 13 small-GPT runs (0.9-4.7 GB peaks): every one predicted below its measured peak by 0.08-0.12 GiB,
    2.2-12.8%: about what PyTorch allocates for cuBLAS / Transformer Engine workspaces, which we do not model
    (it is a few percent here and ~0.2% of a 7B run). Across recompute, SwiGLU, rotary, untied, bias-free, TP, CP
    with SP, the distributed optimizer and interleaving; none is off by more than that. The three with the
    distributed optimizer and one pipeline stage were 0.12-0.35 GiB low until the tied head copy was subtracted
    at the sharded optimizer state (not the whole 12 B per parameter)."""
    small = [m for m in held_out_3.memory if "small GPT" in m.case]
    assert len(small) == 13
    for m in small:
        assert -0.13 <= m.predicted_gib - m.measured_gib < -0.07, (m.case, m.predicted_gib, m.measured_gib)


def test_time_within_the_figures_reported(held_out_3):
    """15.88% mean, 18.33% max when first evaluated, every run predicted too fast (H100 -13.6 / -15.6%, A100 -18.3 /
    -16.0%); 12.15% / 16.10% with deterministic mode's fills charged (H100 -10.1 / -10.2%, A100 -16.1 / -12.3%);
    7.65% / 10.15% with FlashAttention-2's deterministic backward on the A100 runs (A100 -8.3 / -2.1%); 6.72% /
    9.40% with the runs' --no-gradient-accumulation-fusion charged (H100 -8.5 / -9.4%, A100 -7.4 / -1.6%). Not
    modelled: cuDNN's deterministic backward on H100, per-step norm logging: every run stays too fast. These
    bounds catch regressions."""
    assert held_out_3.time_mean_abs_pct <= 6.75 and held_out_3.time_max_abs_pct <= 9.45
    # the figures README's trust table quotes (an improvement must update it too)
    assert (round(held_out_3.time_mean_abs_pct, 2), round(held_out_3.time_max_abs_pct, 2)) == (6.72, 9.40)
    assert all(r.fits for r in held_out_3.time)
    assert all(r.error_pct < 0 for r in held_out_3.time)


@pytest.mark.xfail(strict=True, reason="NOT met: third held-out set 6.72% mean / 9.40% max, every run too fast "
                                      "(H100's cuDNN deterministic attention backward not modelled); "
                                      f"goal {HELD_OUT.text()} ({HELD_OUT.source})")
def test_time_goal(held_out_3):
    assert held_out_3.time_mean_abs_pct <= HELD_OUT_GOAL[0] and held_out_3.time_max_abs_pct <= HELD_OUT_GOAL[1]
