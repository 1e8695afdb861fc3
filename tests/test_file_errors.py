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


def err_of(cli, *argv) -> str:
    code, out, err = cli(*argv)
    assert code == 2, out
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_chip_file_with_yaml12_exponents_reads(capsys, tmp_path):
    (tmp_path / "c.yaml").write_text(CHIP)
    assert main(["estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["accelerator"] == "mychip"


def test_chip_file_errors_name_each_field_once(cli, tmp_path):
    bad = CHIP.replace("freq_hz: 1.0e9", 'freq_hz: "1.0e9"').replace("num_vc: 2", "num_vc: two") + "colour: red\nsize: 3\n"
    (tmp_path / "c.yaml").write_text(bad)
    msg = err_of(cli, "estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"))
    assert "freq_hz: expected a positive number, got the text '1.0e9' (a number in quotes" in msg
    assert "num_vc: expected a positive integer, got the text 'two'" in msg
    assert "unknown fields 'colour', 'size' (allowed:" in msg
    assert msg.count("allowed:") == 1 and msg.count("freq_hz:") == 1 and "not supported" not in msg


def test_chip_file_missing_fields_listed_once(cli, tmp_path):
    (tmp_path / "c.yaml").write_text("num_tc: 8\n")
    msg = err_of(cli, "estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"))
    assert msg.count("missing fields") == 1 and "'tc_rows'" in msg and "'freq_hz'" in msg


def test_hugging_face_config_is_one_line(cli, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(HF))
    msg = err_of(cli, "show-model", str(tmp_path / "config.json"))
    assert "Hugging Face config.json" in msg and "phaze import-model" in msg and "allowed" not in msg


def test_model_file_unknown_fields_once_and_types(cli, tmp_path):
    (tmp_path / "m.yaml").write_text("num_layers: '4'\nhidden: 256\nheads: 4\nffn: 1024\nvocab: 2000\nseq_len: 128\n"
                                     "colour: red\nshape: round\n")
    msg = err_of(cli, "show-model", str(tmp_path / "m.yaml"))
    assert msg.count("allowed") == 1 and "unknown fields 'colour', 'shape'" in msg
    assert "field 'num_layers' must be a positive integer, got the text '4'" in msg


@pytest.mark.parametrize("text, expect", [
    ("num_tc: [1, '4']\n", "num_tc: expected a list of integers, got the text '4'"),
    ("budget_mm2: '300'\n", "budget_mm2: expected a number, got the text '300'"),
    ("budget_mm2: 3.0e2\nnum_tc: [1, 2]\n", None),
    ("net_scale_up_chips: 8\nnet_scale_up_Bps: [1.0e11]\nnet_topologies: [switch]\nnet_scale_out_Bps: [fast]\n",
     "network scale-out bandwidth must be a positive finite number of B/s, got 'fast'"),
    ("net_scale_up_chips: [8.5]\nnet_scale_up_Bps: 1.0e11\nnet_topologies: switch\nnet_scale_out_Bps: 0\n",
     "network scale-up domain must be an integer of at least 2 chips, got 8.5"),
])
def test_space_file_errors_name_the_field(cli, capsys, tmp_path, text, expect):
    (tmp_path / "s.yaml").write_text(text)
    if expect is None:
        assert main(["arch", "--space", str(tmp_path / "s.yaml"), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["budget_mm2"] == 300.0
    else:
        assert expect in err_of(cli, "arch", "--space", str(tmp_path / "s.yaml"))


DOCS = __import__("pathlib").Path(__file__).resolve().parents[1] / "docs"


def doc_example(name: str, tmp_path):
    import re
    text = (DOCS / name).read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", text, flags=re.S).group(1)
    p = tmp_path / "example.yaml"
    p.write_text(block)
    return text, p


def documented_fields(text: str) -> set[str]:
    import re
    return set(re.findall(r"^\| `([A-Za-z_0-9]+)`", text, flags=re.M))


def test_docs_model_example_loads_and_lists_every_field(tmp_path):
    import dataclasses
    from phaze.workload.config import ModelConfig
    from phaze.workload.zoo import get_model
    text, p = doc_example("model-file.md", tmp_path)
    m = get_model(str(p))
    assert (m.name, m.num_layers, m.num_kv_heads, m.mlp) == ("my-llama", 32, 8, "swiglu")
    assert documented_fields(text) == {f.name for f in dataclasses.fields(ModelConfig)}


def test_docs_chip_example_loads_and_lists_every_field(tmp_path):
    import dataclasses
    from phaze.hardware.accelerator import Accelerator
    from phaze.hardware.presets import TPUV4_LIKE, get_accelerator
    text, p = doc_example("chip-file.md", tmp_path)
    acc = get_accelerator(str(p))
    assert dataclasses.replace(acc, name=TPUV4_LIKE.name) == TPUV4_LIKE
    assert documented_fields(text) == {f.name for f in dataclasses.fields(Accelerator)}


def test_docs_space_example_loads_and_lists_every_field(tmp_path):
    import dataclasses
    from phaze.hardware.space import DesignSpace, load_space
    text, p = doc_example("space-file.md", tmp_path)
    ds = load_space(p)
    assert ds.num_tc == (1, 2, 4, 8, 16, 32, 64, 128, 256) and ds.glb_bytes[0] == 8 * 2**20
    names = {f.name for f in dataclasses.fields(DesignSpace)} - {"glb_bytes"} | {"glb_mib"}
    assert documented_fields(text) == names


def test_bad_input_staging_is_one_line(cli, tmp_path):
    """issue 34 item 1d: input_staging not a boolean, or true without the hierarchy, in a chip or space file."""
    (tmp_path / "c.yaml").write_text(CHIP + "input_staging: maybe\n")
    msg = err_of(cli, "estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "c.yaml"))
    assert "input_staging: expected true or false" in msg
    (tmp_path / "p.yaml").write_text(CHIP + "input_staging: true\n")
    msg = err_of(cli, "estimate", "--model", "bert-large", "--accelerator", str(tmp_path / "p.yaml"))
    assert "'input_staging' needs the on-chip hierarchy" in msg
    (tmp_path / "s.yaml").write_text("input_staging: [false, maybe]\n")
    msg = err_of(cli, "arch", "--space", str(tmp_path / "s.yaml"))
    assert "input_staging: expected true, false or a list of them, got the text 'maybe'" in msg
    (tmp_path / "t.yaml").write_text("template: paper\ninput_staging: true\n")
    msg = err_of(cli, "arch", "--space", str(tmp_path / "t.yaml"))
    assert "input_staging: true needs the chip template" in msg
