"""`phaze import-model`, `--model hf:CONFIG.json` in plan / evaluate / search, and `show-model --check-torch`."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tinysearch import SPACE_YAML

CONFIGS = Path(__file__).parent / "hf_configs"
# a Llama-style config small enough to search over a tiny space in seconds
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2000, "max_position_embeddings": 128,
        "hidden_act": "silu", "tie_word_embeddings": False}


def test_import_model_writes_a_model_file_that_plans_like_the_config(cli, tmp_path):
    src = CONFIGS / "tinyllama-1.1b.json"
    code, out, err = cli("import-model", str(src), "-o", str(tmp_path / "m.yaml"))
    assert code == 0 and "written to" in out, err
    text = (tmp_path / "m.yaml").read_text()
    assert "kv_heads: 4" in text and "mlp: swiglu" in text
    plans = []
    for model in (f"hf:{src}", str(tmp_path / "m.yaml")):
        code, out, err = cli("plan", "--model", model, "--accelerator", "a100-80g", "--devices", "8",
                             "--global-batch", "16", "--json")
        assert code == 0, err
        plans.append(json.loads(out)["best"])
    assert plans[0] == plans[1]
    code, out, err = cli("evaluate", "--model", f"hf:{src}", "--accelerator", "a100-80g", "--devices", "8",
                         "--global-batch", "16", "--tp", "1", "--pp", "2", "--dp", "4", "--mbs", "1", "--json")
    assert code == 0 and json.loads(out)["iteration_time_s"] > 0, err


def test_import_model_prints_yaml_and_refuses_in_one_line(cli, tmp_path):
    code, out, err = cli("import-model", str(CONFIGS / "gemma-7b.json"))
    assert code == 0 and "head_dim_override: 256" in out and "mlp: geglu" in out
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**json.loads((CONFIGS / "falcon-7b.json").read_text()), "alibi": True}))
    code, out, err = cli("import-model", str(bad))
    assert code == 2 and "field 'alibi' = True" in err and len(err.strip().splitlines()) == 1
    code, out, err = cli("show-model", f"hf:{bad}")
    assert code == 2 and "field 'alibi' = True" in err


def test_search_takes_an_imported_model(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    (tmp_path / "s.yaml").write_text(SPACE_YAML)
    code, out, err = cli("search", "--model", f"hf:{tmp_path / 'config.json'}", "--space",
                         str(tmp_path / "s.yaml"), "--devices", "8", "--global-batch", "16", "--mbs", "1,2",
                         "--hbm-gib", "1,2", "--store", str(tmp_path / "r.db"), "--workers", "1", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["best"]["score"] > 0 and res["counts"]["candidates"] == res["counts"]["chips"] * 2


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
                    reason="the [torch] extra (torch==2.13.0, transformers) is not installed")
def test_show_model_check_torch(cli):
    code, out, err = cli("show-model", f"hf:{CONFIGS / 'phi-2.json'}", "--seq", "128", "--check-torch", "--json")
    assert code == 0, err
    chk = json.loads(out)["torch_check"]
    assert chk["hf_family"] == "phi" and chk["seq_len"] == 128
    assert {r["quantity"]: r["rel_error"] for r in chk["rows"]}["parameters (total)"] == 0
    assert all(abs(r["rel_error"]) <= 0.01 for r in chk["rows"])
    code, out, err = cli("show-model", "gpt2-xl", "--check-torch")
    assert code == 0 and "against PyTorch" in out and "+0.0000%" in out
