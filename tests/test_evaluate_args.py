"""Issue 35 item 2: `plan --json` gives each plan's `evaluate_args`, and `phaze evaluate` with them (uneven stages
as --stage-layers) reproduces the plan's iteration time to the digit."""
import json

import pytest

GPT3 = ("--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "64", "--global-batch", "128")


@pytest.mark.parametrize("extra", [(), ("--tp-overlap", "--dp-overlap", "--recompute", "none,full")])
def test_best_plans_re_evaluate_exactly(cli, extra):
    code, out, err = cli("plan", *GPT3, *extra, "--top", "2", "--json")
    assert code == 0, err
    d = json.loads(out)
    for p in [d["best"], *d["alternatives"]]:
        code, out2, err2 = cli("evaluate", *GPT3, *p["evaluate_args"], "--json")
        assert code == 0, err2
        assert json.loads(out2)["iteration_time_s"] == p["iteration_time_s"], p["evaluate_args"]


def test_stage_layers_are_checked(cli):
    base = (*GPT3, "--tp", "8", "--pp", "4", "--dp", "2", "--mbs", "1")
    code, _, err = cli("evaluate", *base, "--stage-layers", "20,20,20,20")
    assert code == 2 and "96 blocks" in err and len(err.strip().splitlines()) == 1
    code, out, _ = cli("evaluate", *base, "--stage-layers", "23,25,25,23", "--json")
    assert code == 0 and [b - a for a, b in json.loads(out)["stages"]] == [24, 25, 25, 24]
