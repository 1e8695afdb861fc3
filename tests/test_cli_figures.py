"""The figures people compare (tokens/s/GPU, model TFLOP/s/GPU, the MFU's definition, --tokens / --usd-per-gpu-hour)
and plan --emit / --emit-file on the command line, checked by hand from the evaluation's own numbers."""
from __future__ import annotations

import json
import math

import pytest

from phaze import api
from phaze.cli import main

EVAL = ["evaluate", "--model", "llama3-8b", "--accelerator", "h100-80g", "--devices", "16", "--global-batch", "64",
        "--tp", "2", "--pp", "2", "--dp", "4", "--mbs", "2", "--seq", "1024"]


def _json(capsys, argv):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_evaluate_figures_by_hand(capsys):
    d = _json(capsys, EVAL + ["--tokens", "2.5e12", "--usd-per-gpu-hour", "2.5"])
    it, used = d["iteration_time_s"], d["devices_used"]
    assert used == 16
    tps = 64 * 1024 / it / 16
    assert d["tokens_per_s_per_device"] == pytest.approx(tps, rel=1e-12)
    assert d["model_tflops_per_device"] == pytest.approx(d["model_flops_per_iteration"] / it / 16 / 1e12, rel=1e-12)
    # MFU unchanged: model TFLOP/s per GPU over the H100's dense BF16 peak (528 x 512 x 2 x 1.83 GHz)
    assert d["mfu"] == pytest.approx(d["model_tflops_per_device"] * 1e12 / (528 * 512 * 2 * 1.83e9), rel=1e-12)
    days = 2.5e12 / (tps * 16) / 86400
    assert d["train_days"] == pytest.approx(days, rel=1e-12)
    assert d["gpu_hours"] == pytest.approx(days * 24 * 16, rel=1e-12)
    assert d["energy_mwh"] == pytest.approx(days * 24 * 16 * 700 / 1e6, rel=1e-12)  # 700 W board TDP
    assert d["cost_usd"] == pytest.approx(days * 24 * 16 * 2.5, rel=1e-12)
    assert "not halved for the causal mask" in d["mfu_definition"] and "BF16" not in d["mfu_definition"].split(
        "peak = ")[0]


def test_model_flops_are_6n_plus_the_full_attention_term():
    from phaze.placement.layer_costs import model_forward_flops_per_sequence
    m = api.resolve_model("llama3-70b")
    s, h, a, g, d, f, V = m.seq_len, m.hidden, m.heads, m.num_kv_heads, m.head_dim, m.ffn, m.vocab
    block = 2 * s * h * (a + 2 * g) * d + 4 * s * s * a * d + 2 * s * a * d * h + 3 * 2 * s * h * f
    assert model_forward_flops_per_sequence(m, s) == m.num_layers * block + 2 * s * h * V


def test_fp8_mfu_is_labelled(capsys):
    argv = EVAL + ["--precision", "fp8"]
    d = _json(capsys, argv)
    assert "FP8 plan" in d["mfu_definition"] and "BF16 dense peak" in d["mfu_definition"]
    assert main(argv) == 0
    assert "of BF16 peak" in capsys.readouterr().out


@pytest.mark.parametrize("flag,value", [("--tokens", "0"), ("--tokens", "-3T"), ("--tokens", "nan"),
                                        ("--tokens", "inf"), ("--tokens", "15X"), ("--tokens", "lots"),
                                        ("--usd-per-gpu-hour", "0"), ("--usd-per-gpu-hour", "abc")])
def test_bad_figure_values_one_line_exit_2(capsys, flag, value):
    argv = EVAL + (["--tokens", "1T"] if flag != "--tokens" else []) + [f"{flag}={value}"]
    assert main(argv) == 2
    err = capsys.readouterr()
    assert err.out == "" and len(err.err.strip().splitlines()) == 1 and flag in err.err


def test_price_needs_tokens(capsys):
    assert main(EVAL + ["--usd-per-gpu-hour", "2"]) == 2
    assert "--tokens" in capsys.readouterr().err


def test_parse_count():
    assert api.parse_count("15T") == 15e12 and api.parse_count("300B") == 3e11 and api.parse_count("2.5e12") == 2.5e12
    assert api.parse_count("1.5M") == 1.5e6 and api.parse_count("7k") == 7e3


PLAN = ["plan", "--model", "llama3-8b", "--accelerator", "h100-80g", "--devices", "16", "--global-batch", "64",
        "--seq", "1024", "--top", "1", "--quiet"]


def test_plan_emit_json_and_file(capsys, tmp_path):
    d = _json(capsys, PLAN + ["--emit", "megatron", "--tokens", "15T"])
    best = d["best"]
    launch = d["launch"]["megatron"]
    a = launch["args"]
    assert a[a.index("--tensor-model-parallel-size") + 1] == str(best["tp"])
    assert a[a.index("--micro-batch-size") + 1] == str(best["microbatch_size"])
    assert isinstance(launch["warnings"], list)
    assert best["train_days"] == pytest.approx(15e12 / best["throughput_tokens_per_s"] / 86400, rel=1e-12)
    out = tmp_path / "launch.toml"
    assert main(PLAN + ["--emit", "torchtitan", "--emit-file", str(out)]) == 0
    import tomllib
    doc = tomllib.loads(out.read_text())
    assert doc["parallelism"]["tensor_parallel_degree"] == best["tp"]


def test_plan_emit_file_unwritable(capsys, tmp_path):
    assert main(PLAN + ["--emit", "nemo", "--emit-file", str(tmp_path / "no" / "such" / "f.py")]) == 2
    err = capsys.readouterr()
    assert err.out == "" and len(err.err.strip().splitlines()) == 1 and "--emit-file" in err.err
    assert main(PLAN + ["--emit-file", str(tmp_path / "f.txt")]) == 2  # without --emit
    assert "--emit" in capsys.readouterr().err


def test_plan_html_has_launch_block(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(PLAN + ["--emit", "megatron", "--html", str(out)]) == 0
    html = out.read_text()
    assert "--tensor-model-parallel-size" in html and "phazeCopy" in html and "http" not in html.split(
        "<script>function phazeCopy")[1].split("</script>")[0]
    assert "tokens/s/GPU" in html and "not halved for the causal mask" in html


def test_help_says_the_mfu_definition(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "not halved for the causal mask" in out and "BF16 dense peak" in out
    assert math.isfinite(1.0)
