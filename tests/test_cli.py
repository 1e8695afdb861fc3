"""The `phaze` command end to end (in-process): JSON shapes, figures, and one-line errors with exit 2."""
import json

import pytest
from clirunner import run_phaze as run


def run_json(capsys, *argv):
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_models_lists_the_zoo(capsys):
    data = run_json(capsys, "models")
    names = {m["name"]: m for m in data}
    assert {"bert-large", "gpt3-175b", "llama2-7b", "megatron-22b", "llama3-70b"} <= set(names)
    assert names["gpt3-175b"]["params"] == pytest.approx(174.6e9, rel=5e-3)


def test_show_model_params_and_flops(capsys):
    d = run_json(capsys, "show-model", "llama2-7b")
    assert d["params"] == pytest.approx(6.74e9, rel=1e-2)
    # training FLOPs per token ~ 6 N + attention: between 6N and 8N for a 4k-token Llama-2-7B
    assert 6 * d["params"] < d["train_flops_per_token"] < 8 * d["params"]


def test_arch_reports_the_paper_space(capsys):
    d = run_json(capsys, "arch", "--space", "paper")
    assert (d["candidates"], d["tc_configs"], d["vc_configs"]) == (29360, 4186, 697)
    assert d["budget_mm2"] == pytest.approx(278.83, abs=0.01)
    tpu = next(p for p in d["presets"] if p["name"] == "tpuv4-like-paper")
    assert tpu["area_mm2"] == pytest.approx(278.83, abs=0.01)


def test_schedule_json_shape_and_validity(capsys):
    d = run_json(capsys, "schedule", "--model", "bert-large", "--accelerator", "tpuv4-like", "--layer", "block")
    assert [(r["layer"], r["direction"]) for r in d] == [("block", "fwd"), ("block", "bwd")]
    for r in d:
        assert r["lower_bound_s"] <= r["makespan_s"] * (1 + 1e-9)
        assert max(o["end_s"] for o in r["ops"]) == pytest.approx(r["makespan_s"])
        assert all(o["cores"] and all(c[:2] in ("tc", "vc", "ne") for c in o["cores"]) for o in r["ops"])


def test_plan_beats_or_matches_its_baselines(capsys):
    d = run_json(capsys, "plan", "--model", "gpt2-xl", "--accelerator", "a100-80g", "--devices", "64",
                 "--global-batch", "512", "--mbs", "1,2,4")
    best = d["best"]
    assert best["tp"] * best["pp"] * best["dp"] <= 64 and best["fits"]
    assert best["memory_bytes_per_device"] <= best["memory_capacity_bytes"]
    for b in d["baselines"]:
        if b["fits"]:
            assert best["iteration_time_s"] <= b["iteration_time_s"] * (1 + 1e-9)
    assert best["throughput_seq_per_s"] == pytest.approx(512 / best["iteration_time_s"])


def test_evaluate_one_plan(capsys):
    d = run_json(capsys, "evaluate", "--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "64",
                 "--global-batch", "64", "--tp", "8", "--pp", "8", "--dp", "1", "--mbs", "1", "--interleave", "3",
                 "--recompute", "full")
    assert d["iteration_time_s"] == pytest.approx(18.13, rel=0.06)  # Korthikanti et al. 2022, Table 5
    assert 0 < d["mfu"] < 1


def test_evaluate_per_stage_recompute(capsys):
    """One mode per stage: each stage's breakdown carries its mode, and full recompute on the first half
    sits between all-none and all-full in time."""
    args = ("evaluate", "--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "64", "--global-batch",
            "64", "--tp", "8", "--pp", "4", "--dp", "1", "--mbs", "1", "--recompute")
    mixed = run_json(capsys, *args, "full,full,none,none")
    assert [s["recompute"] for s in mixed["stage_breakdown"]] == ["full", "full", "none", "none"]
    assert mixed["recompute"] == ["full", "full", "none", "none"]
    t = {m: run_json(capsys, *args, m)["iteration_time_s"] for m in ("none", "full")}
    assert t["none"] < mixed["iteration_time_s"] < t["full"]


def test_validate_json_groups_and_fits(capsys):
    d = run_json(capsys, "validate")
    groups = {g["group"]: g for g in d["groups"]}
    kort = next(g for name, g in groups.items() if name.startswith("Korthikanti"))
    # the cases it was built on: the 6% max holds; the 3% mean they were fitted to does not since Megatron's A100
    # attention kernels run at their measured bandwidth (4.33%: README "Accuracy against measured clusters")
    assert kort["time_mean_abs_pct"] <= 4.5 and kort["time_max_abs_pct"] <= 6.0
    assert d["memory_max_abs_pct"] <= 3.0
    assert {"SC21-T1", "NeMo"} <= set(groups) and len(d["time"]) == 27
    assert all(r["fits"] is True for r in d["time"])  # every published run trained on its GPUs
    errs = [abs(r["error_pct"]) for r in d["time"]]
    assert d["time_mean_abs_pct"] == pytest.approx(sum(errs) / len(errs))
    assert d["time_max_abs_pct"] == pytest.approx(max(errs))


@pytest.mark.parametrize("argv", [
    ("show-model", "no-such-model"),
    ("show-model", "gpt3-175b", "--tp", "5"),
    ("show-model", "gpt3-175b", "--mbs", "0"),
    ("estimate", "--model", "bert-large", "--accelerator", "no-such-chip"),
    ("schedule", "--model", "bert-large", "--accelerator", "tpuv4-like", "--time-limit", "0"),
    ("schedule", "--model", "bert-large", "--accelerator", "tpuv4-like", "--layer", "nope"),
    ("plan", "--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "8", "--global-batch", "8"),
    ("plan", "--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "128", "--global-batch", "64",
     "--cluster", "dgx-a100:64"),
    ("evaluate", "--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "8", "--global-batch", "8",
     "--tp", "8", "--pp", "2", "--dp", "1", "--mbs", "1"),
    ("evaluate", "--model", "gpt3-175b", "--accelerator", "a100-80g", "--devices", "64", "--global-batch", "64",
     "--tp", "8", "--pp", "4", "--dp", "1", "--mbs", "1", "--recompute", "full,none"),
    ("plan", "--model", "gpt2-xl", "--accelerator", "a100-80g", "--devices", "8", "--global-batch", "8",
     "--precision", "fp8"),
    ("plan", "--model", "gpt2-xl", "--accelerator", "h100-80g", "--devices", "8", "--global-batch", "8",
     "--mbs", "3"),
    ("plan", "--model", "gpt2-xl", "--accelerator", "h100-80g", "--devices", "8", "--global-batch", "8",
     "--cp", "3"),
    ("plan", "--model", "gpt2-xl", "--accelerator", "h100-80g", "--devices", "8", "--global-batch", "8",
     "--recompute", "bogus"),
    ("results", "show", "--store", "/nonexistent/phaze.db"),
    ("arch", "--budget-mm2", "-5"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "error" in err
    assert "Traceback" not in err
    assert out == ""  # no half-written result (plan printed its setting table before failing until 2026-12-02)


def test_bad_model_file_names_the_field(capsys, tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("name: x\nnum_layers: 2\nhidden: -4\nheads: 2\nffn: 8\nvocab: 10\nseq_len: 4\n")
    code, out, err = run(capsys, "show-model", str(f))
    assert code == 2 and "hidden" in err and len(err.strip().splitlines()) == 1
    f.write_text("name: [unclosed\n")
    code, out, err = run(capsys, "show-model", str(f))
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_chip_with_zero_cores_is_refused(capsys, tmp_path):
    f = tmp_path / "chip.yaml"
    f.write_text("num_tc: 0\ntc_rows: 128\ntc_cols: 128\nnum_vc: 2\nvc_width: 128\nglb_bytes: 134217728\n"
                 "hbm_bytes: 34359738368\nhbm_bandwidth_Bps: 1.2e12\nfreq_hz: 1.0e9\n")
    code, out, err = run(capsys, "schedule", "--model", "bert-large", "--accelerator", str(f))
    assert code == 2 and "num_tc" in err and len(err.strip().splitlines()) == 1



def test_validate_held_out_sets(capsys):
    """--held-out alone is the first held-out set (34 Llama 3.1 runs), --held-out 2 the second (19 runs), --held-out 3
    the third (Megatron-LM CI runs: 4 timed, 17 with their measured peak memory), --held-out 4 the fourth (10
    Nemotron-4 340B runs)."""
    one = run_json(capsys, "validate", "--held-out")
    two = run_json(capsys, "validate", "--held-out", "2")
    assert len(one["time"]) == 34 and {g["group"] for g in one["groups"]} == {"dgxc Llama 3.1 BF16",
                                                                              "dgxc Llama 3.1 FP8"}
    assert len(two["time"]) == 19 and "MT-NLG 530B A100" in {g["group"] for g in two["groups"]}
    three = run_json(capsys, "validate", "--held-out", "3")
    assert len(three["time"]) == 4 and [m["quantity"] for m in three["memory"]] == ["peak_allocated_last_stage"] * 17
    assert three["memory_max_abs_pct"] == max(abs(m["error_pct"]) for m in three["memory"])
    four = run_json(capsys, "validate", "--held-out", "4")
    assert len(four["time"]) == 10 and {g["group"] for g in four["groups"]} == {"dgxc Nemotron-4 340B BF16",
                                                                               "dgxc Nemotron-4 340B FP8"}
    code, out, err = run(capsys, "validate", "--held-out", "2", "--cases", "x.json")
    assert code == 2 and not out and len(err.strip().splitlines()) == 1 and "--held-out" in err
