"""The fourth held-out set: dgxc-benchmarking v24.11.1's Nemotron-4 340B pre-training on 128-2048 H100 GPUs, BF16
and FP8, with the whole configuration (scripts/build_held_out4.py). Evaluated once, after the optimizer-state
change; nothing was set from it."""
import json
from importlib import resources

import pytest
from script_loader import load_script

from phaze.validation import validate
from phaze.validation.cases import (HELD_OUT2_FILE, HELD_OUT3_FILE, HELD_OUT4_FILE, HELD_OUT_FILE, load_cases,
                                    packaged_cases)
from phaze.validation.goals import goal

HELD_OUT = goal("held_out")  # the goal for runs the model was not built on (data/goals.json)
HELD_OUT_GOAL = (HELD_OUT.mean_abs_pct, HELD_OUT.max_abs_pct)


@pytest.fixture(scope="module")
def held_out_4():
    return validate("held-out-4")


def test_packaged_with_sources_and_reproduced_by_its_script():
    text = resources.files("phaze.validation").joinpath("data", HELD_OUT4_FILE).read_text()
    assert json.dumps(load_script("build_held_out4").document(), indent=1) + "\n" == text
    runs = json.loads(text)["runs"]
    assert len(runs) == 10
    for r in runs:
        assert r["source"] and r["conversion"] and r["assumptions"]
        # weak scaling: GBS = GPUs / 4 over d = GPUs / 64 -> 16 micro-batches of 1 at every scale
        assert r["global_batch"] // (r["mbs"] * r["dp"]) == 16 and r["tp"] * r["pp"] * r["dp"] == r["devices"]
        assert r["optimizer_state"] == {"bf16": "bf16", "fp8": "bf16-master"}[r["precision"]]
    labels = {c.label for c in packaged_cases(HELD_OUT4_FILE).time}
    others = set()
    for f in (HELD_OUT_FILE, HELD_OUT2_FILE, HELD_OUT3_FILE):
        others |= {c.label for c in packaged_cases(f).time}
    assert len(labels) == 10 and not labels & (others | {c.label for c in load_cases().time})


def test_goal_met_and_every_published_plan_fits(held_out_4):
    """First evaluation: 1.74% mean, 3.84% max (BF16 +0.7..+2.8%, FP8 -3.8..+1.6%); all 10 fit. With the fp32 Adam
    state the model charged before this set was collected, the two 128-GPU runs would not fit (BF16 79.4 GiB, FP8
    73.1 GiB of the 71.5 usable). 2.11% / 3.22% with the H100 FP8 rate from the H100 tutorial's FP8 run (1.845x
    the BF16 rate, not the H200 NVL's 1.905x): FP8 -3.2..+3.2%. The tighter bounds only catch regressions."""
    assert held_out_4.time_mean_abs_pct <= HELD_OUT_GOAL[0] and held_out_4.time_max_abs_pct <= HELD_OUT_GOAL[1]
    assert held_out_4.time_mean_abs_pct <= 2.2 and held_out_4.time_max_abs_pct <= 3.3
    assert len(held_out_4.time) == 10 and all(r.fits for r in held_out_4.time)
