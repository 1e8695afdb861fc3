"""Zoo contents, parameter counts against published sizes, and one-line errors for bad model files."""
from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from phaze.errors import ConfigError
from phaze.workload import get_model, list_models, load_model_file, param_count

PAPER_MODELS = ["bert-large", "megatron-bert", "gpt2-xl", "megatron-gpt2-2.5b", "megatron-gpt2-8.3b",
                "gpt3-175b", "opt-350m", "llama2-7b"]
EXTRA_MODELS = ["megatron-22b", "llama2-70b", "llama3-8b", "llama3-70b"]

# Published sizes (model cards / papers). BERT-Large: 335.17e6 counts the MLM head, no pooler/NSP
# (HF BertModel with pooler is 335.14e6, BertForPreTraining 336.2e6).
PUBLISHED = [
    ("gpt3-175b", 174.6e9, 0.005), ("llama2-7b", 6.74e9, 0.01), ("gpt2-xl", 1.558e9, 0.01),
    ("bert-large", 335e6, 0.01), ("opt-350m", 331e6, 0.01), ("llama3-8b", 8.03e9, 0.01),
    ("llama2-70b", 68.98e9, 0.01), ("megatron-gpt2-8.3b", 8.3e9, 0.02), ("megatron-gpt2-2.5b", 2.5e9, 0.02),
    ("megatron-22b", 22.0e9, 0.02), ("llama3-70b", 70.6e9, 0.01),
]


def test_zoo_has_every_model():
    names = [m.name for m in list_models()]
    assert set(PAPER_MODELS + EXTRA_MODELS) <= set(names)
    assert len(names) == len(set(names))


def test_paper_table_values():
    g = get_model("gpt3-175b")
    assert (g.num_layers, g.hidden, g.heads, g.ffn, g.vocab, g.seq_len, g.max_tp) == (96, 12288, 96, 49152, 50257, 2048, 8)
    assert get_model("megatron-gpt2-2.5b").max_tp == 4 and get_model("gpt2-xl").max_tp == 1
    assert get_model("megatron-gpt2-8.3b").padded_vocab(8) == 51200  # multiple of 128 * 8
    assert get_model("megatron-bert").padded_vocab(1) == 30592
    bert = get_model("bert-large")
    assert bert.arch == "encoder" and bert.position == "learned" and bert.mlp == "gelu"
    assert get_model("opt-350m").embed_proj_dim == 512
    llama = get_model("llama2-7b")
    assert (llama.norm, llama.mlp, llama.position, llama.bias, llama.dropout, llama.tied_embeddings) == (
        "rmsnorm", "swiglu", "rotary", False, False, False)
    assert get_model("llama3-70b").num_kv_heads == 8 and get_model("LLaMA3-8B").vocab == 128256


@pytest.mark.parametrize("name,published,tol", PUBLISHED)
def test_param_count_matches_published(name, published, tol):
    assert param_count(get_model(name)) == pytest.approx(published, rel=tol)


def test_param_count_exact_gpt2_xl():
    # 48 * (12 h^2 + 13 h) + vocab*h + positions*h + final LayerNorm 2h, tied head
    h = 1600
    assert param_count(get_model("gpt2-xl")) == 48 * (12 * h * h + 13 * h) + 50257 * h + 1024 * h + 2 * h


def test_user_yaml_and_json_roundtrip(tmp_path):
    fields = {k: v for k, v in asdict(get_model("llama3-8b")).items()}
    fields["name"] = "mine"
    (tmp_path / "m.json").write_text(json.dumps(fields))
    assert get_model(str(tmp_path / "m.json")) == get_model("llama3-8b").__class__(**fields)
    (tmp_path / "tiny.yaml").write_text("num_layers: 2\nhidden: 64\nheads: 4\nffn: 256\nvocab: 100\nseq_len: 32\n")
    m = load_model_file(tmp_path / "tiny.yaml")
    assert m.name == "tiny" and m.num_layers == 2 and m.norm == "layernorm"


def _err(path_or_name) -> str:
    with pytest.raises(ConfigError) as info:
        get_model(path_or_name)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_unknown_model_lists_known_names():
    msg = _err("gpt-5")
    assert "unknown model 'gpt-5'" in msg and "gpt3-175b" in msg and "llama2-7b" in msg


@pytest.mark.parametrize("text,expect", [
    ("num_layers: [1\n", "does not parse"),
    ("num_layers: 2\nhidden: 64\nheads: 4\nffn: 256\nvocab: 100\n", "missing required field 'seq_len'"),
    ("num_layers: -2\nhidden: 64\nheads: 4\nffn: 256\nvocab: 100\nseq_len: 8\n", "'num_layers' must be a positive"),
    ("num_layers: 2\nhidden: 64\nheads: 4\nffn: 256\nvocab: 100\nseq_len: 8\nhiden: 3\n", "unknown field 'hiden'"),
    ("num_layers: 2\nhidden: 64\nheads: 5\nffn: 256\nvocab: 100\nseq_len: 8\n", "divisible by heads"),
    ("num_layers: 2\nhidden: 64\nheads: 4\nffn: 256\nvocab: 100\nseq_len: 8\nnorm: batchnorm\n", "field 'norm'"),
    ("- 1\n- 2\n", "expected a mapping"),
])
def test_bad_yaml_one_line_naming_file_and_field(tmp_path, text, expect):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    msg = _err(str(p))
    assert str(p) in msg and expect in msg


def test_bad_json_and_missing_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    assert "does not parse as JSON" in _err(str(p))
    assert "does not exist" in _err(str(tmp_path / "nope.yaml"))
