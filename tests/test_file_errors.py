"""File errors name each bad field once, with the type expected, in one line (model, chip and space files);
a Hugging Face config.json gets one line pointing at the right tool; YAML 1.2 numbers such as 1.0e9 read."""
import json

import pytest

from phaze.cli import main

CHIP = """name: mychip
num_tc: 8
tc_rows: 128
tc_cols: 128
num_vc: 2
vc_width: 128
glb_bytes: 134217728
hbm_bytes: 34359738368
hbm_bandwidth_Bps: 1.2e12
freq_hz: 1.0e9
"""
HF = {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "intermediate_size": 11008,
      "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000,
      "max_position_embeddings": 4096, "model_type": "llama", "torch_dtype": "float16", "rope_scaling": None}


def err_of(capsys, *argv) -> str:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_chip_file_with_yaml12_exponents_reads(capsys, tmp_path):
    (tmp_path / "c.yaml").write_text(CHIP)
    assert main(["estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["accelerator"] == "mychip"


def test_chip_file_errors_name_each_field_once(capsys, tmp_path):
    bad = CHIP.replace("freq_hz: 1.0e9", 'freq_hz: "1.0e9"').replace("num_vc: 2", "num_vc: two") + "colour: red\nsize: 3\n"
    (tmp_path / "c.yaml").write_text(bad)
    msg = err_of(capsys, "estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"))
    assert "freq_hz: expected a positive number, got the text '1.0e9' (a number in quotes" in msg
    assert "num_vc: expected a positive integer, got the text 'two'" in msg
    assert "unknown fields 'colour', 'size' (allowed:" in msg
    assert msg.count("allowed:") == 1 and msg.count("freq_hz:") == 1 and "not supported" not in msg


def test_chip_file_missing_fields_listed_once(capsys, tmp_path):
    (tmp_path / "c.yaml").write_text("num_tc: 8\n")
    msg = err_of(capsys, "estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"))
    assert msg.count("missing fields") == 1 and "'tc_rows'" in msg and "'freq_hz'" in msg


def test_hugging_face_config_is_one_line(capsys, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(HF))
    msg = err_of(capsys, "show-model", str(tmp_path / "config.json"))
    assert "Hugging Face config.json" in msg and "phaze import-model" in msg and "allowed" not in msg


def test_model_file_unknown_fields_once_and_types(capsys, tmp_path):
    (tmp_path / "m.yaml").write_text("num_layers: '4'\nhidden: 256\nheads: 4\nffn: 1024\nvocab: 2000\nseq_len: 128\n"
                                     "colour: red\nshape: round\n")
    msg = err_of(capsys, "show-model", str(tmp_path / "m.yaml"))
    assert msg.count("allowed") == 1 and "unknown fields 'colour', 'shape'" in msg
    assert "field 'num_layers' must be a positive integer, got the text '4'" in msg


@pytest.mark.parametrize("text, expect", [
    ("num_tc: [1, '4']\n", "num_tc: expected a list of integers, got the text '4'"),
    ("budget_mm2: '300'\n", "budget_mm2: expected a number, got the text '300'"),
    ("budget_mm2: 3.0e2\nnum_tc: [1, 2]\n", None),
])
def test_space_file_errors_name_the_field(capsys, tmp_path, text, expect):
    (tmp_path / "s.yaml").write_text(text)
    if expect is None:
        assert main(["arch", "--space", str(tmp_path / "s.yaml"), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["budget_mm2"] == 300.0
    else:
        assert expect in err_of(capsys, "arch", "--space", str(tmp_path / "s.yaml"))
