"""Hugging Face config import (no torch needed): published sizes, the template variants, one-line refusals,
the round trip through to_hf_config, and the op graphs of the new block shapes."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from phaze.errors import ConfigError
from phaze.workload import TrainSetting, block_forward_gemm_flops, get_model, layer_graph, list_models, param_count
from phaze.workload.hf import IMPORTED_SEQ_LEN, from_hf_config
from phaze.workload.zoo import load_hf_config
from phaze.workload.hf_export import to_hf_config
from phaze.workload.memory import activation_terms, layer_memory
from phaze.workload.zoo import load_model_file, model_to_yaml

CONFIGS = Path(__file__).parent / "hf_configs"
SHIPPED = sorted(p.stem for p in CONFIGS.glob("*.json"))


def cfg(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def hf(name: str):
    return load_hf_config(CONFIGS / f"{name}.json")


# Parameter counts as published: the Pythia paper (Biderman et al. 2023, Table 1: 162,322,944), the Gemma
# report (Gemma Team 2024, Table 2: embedding + non-embedding parameters), Falcon/Phi/Qwen/Mistral/Llama
# model cards (rounded), GPT-2 small 124.4M, OPT-125M, BERT-base 110M (MLM head, no pooler).
PUBLISHED = [
    ("pythia-160m", 162_322_944, 0), ("gemma-2b", 524_288_000 + 1_981_884_416, 0),
    ("gemma-7b", 786_432_000 + 7_751_248_896, 0), ("gpt2", 124.44e6, 1e-3), ("opt-125m", 125.2e6, 1e-3),
    ("bert-base-uncased", 110e6, 0.01), ("falcon-7b", 6.92e9, 1e-3), ("phi-2", 2.78e9, 1e-2),
    ("qwen2-0.5b", 0.49e9, 1e-2), ("mistral-7b-v0.1", 7.24e9, 1e-3), ("llama3-8b", 8.03e9, 1e-3),
    ("tinyllama-1.1b", 1.1e9, 1e-2), ("opt-350m", 331e6, 1e-2),
]


@pytest.mark.parametrize("name,published,tol", PUBLISHED)
def test_imported_param_count_matches_published(name, published, tol):
    n = param_count(hf(name))
    assert n == published if tol == 0 else n == pytest.approx(published, rel=tol)


def test_falcon_7b_by_hand():
    # multi-query (1 kv head of 64), one shared LayerNorm, no biases, tied head (tiiuae/falcon-7b)
    h, d, L, v = 4544, 64, 32, 65024
    block = h * (71 + 2) * d + h * h + 2 * h * 4 * h + 2 * h
    assert param_count(hf("falcon-7b")) == L * block + v * h + 2 * h == 6_921_720_704


def test_family_variants():
    phi, neox, gemma, qwen, mistral, opt = (hf(n) for n in ("phi-2", "pythia-160m", "gemma-7b", "qwen2-0.5b",
                                                             "mistral-7b-v0.1", "opt-350m"))
    assert (phi.parallel_block, phi.shared_norm, phi.has_bias("head"), phi.rotary_fraction) == (True, True, True, 0.4)
    assert (neox.parallel_block, neox.shared_norm, neox.rotary_fraction, neox.tied_embeddings) == (True, False, 0.25, False)
    assert (gemma.mlp, gemma.head_dim, gemma.embed_scale, gemma.tied_embeddings) == ("geglu", 256, True, True)
    assert [qwen.has_bias(p) for p in ("qkv", "out", "mlp", "head")] == [True, False, False, False]
    assert (qwen.num_kv_heads, qwen.sliding_window) == (2, None)  # use_sliding_window: false
    assert (mistral.sliding_window, mistral.num_kv_heads, mistral.bias) == (4096, 8, False)
    assert (opt.mlp, opt.final_norm, opt.extra_positions, opt.embed_proj_dim) == ("relu", False, 2, 512)
    assert hf("opt-350m") == replace(get_model("opt-350m"), name="opt-350m", max_tp=8)


@pytest.mark.parametrize("name,change,field", [
    ("falcon-7b", {"alibi": True}, "alibi"),
    ("phi-2", {"qk_layernorm": True}, "qk_layernorm"),
    ("qwen2-0.5b", {"use_sliding_window": True, "max_window_layers": 12}, "max_window_layers"),
    ("qwen2-0.5b", {"layer_types": ["full_attention", "sliding_attention"]}, "layer_types"),
    ("pythia-160m", {"hidden_act": "relu2"}, "hidden_act"),
    ("llama3-8b", {"hidden_act": "relu"}, "hidden_act"),
    ("bert-base-uncased", {"position_embedding_type": "relative_key"}, "position_embedding_type"),
    ("gpt2", {"add_cross_attention": True}, "add_cross_attention"),
    ("gpt2", {"model_type": "t5"}, "model_type"),
])
def test_unsupported_settings_are_one_line_naming_the_field(name, change, field):
    with pytest.raises(ConfigError) as info:
        from_hf_config({**cfg(name), **change}, "x.json", name)
    msg = str(info.value)
    assert "\n" not in msg and f"field '{field}' = {change[field]!r}" in msg


def test_missing_field_and_bad_json(tmp_path):
    bad = {k: v for k, v in cfg("llama3-8b").items() if k != "hidden_size"}
    with pytest.raises(ConfigError, match="missing field 'hidden_size'"):
        from_hf_config(bad, "x.json", "x")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="does not parse as JSON"):
        get_model(f"hf:{tmp_path / 'config.json'}")
    with pytest.raises(ConfigError, match="does not exist"):
        get_model("hf:/nonexistent/config.json")
    (tmp_path / "ours.json").write_text(json.dumps({"num_layers": 2}))
    with pytest.raises(ConfigError, match="no 'model_type' field"):
        get_model(f"hf:{tmp_path / 'ours.json'}")


def test_hf_prefix_plain_json_and_yaml_round_trip(tmp_path):
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg("llama3-8b")))
    via_prefix = get_model(f"hf:{folder / 'config.json'}")
    assert via_prefix.name == "Meta-Llama-3-8B"
    with pytest.raises(ConfigError, match="pass it as hf:"):  # a config.json given as a phaze model file
        get_model(str(folder / "config.json"))
    # the imported Llama 3 8B is the zoo's (the zoo's max_tp and the name aside; an imported rotary model trains
    # at IMPORTED_SEQ_LEN, not at max_position_embeddings, issue 35)
    zoo = get_model("llama3-8b")
    assert via_prefix.seq_len == min(zoo.seq_len, IMPORTED_SEQ_LEN) == 4096
    assert replace(via_prefix, name="llama3-8b", seq_len=zoo.seq_len) == zoo
    for name in SHIPPED:
        m = hf(name)
        (tmp_path / "m.yaml").write_text(model_to_yaml(m))
        assert load_model_file(tmp_path / "m.yaml") == m


def _exportable(m):
    try:
        return to_hf_config(m)
    except ConfigError:
        return None


def test_every_zoo_model_and_shipped_config_round_trips_through_transformers_config():
    for m in list_models() + [hf(n) for n in SHIPPED]:
        out = to_hf_config(m)
        back = from_hf_config(out, "export", m.name)
        # the HF config has no tensor-parallel limit or Megatron padding; a rotary model comes back at the
        # imported training length (max_position_embeddings is not one)
        seq = min(m.seq_len, IMPORTED_SEQ_LEN) if m.position == "rotary" else m.seq_len
        assert back == replace(m, max_tp=8, vocab_pad_multiple=1, seq_len=seq), m.name


def test_sliding_window_null_is_full_attention():
    """Issue 35: Mistral-7B v0.2+ and Mistral-Nemo set "sliding_window": null, which is full attention (it was
    read as transformers' 4,096 default, losing 9.9% of Mistral-Nemo's FLOPs per block); absent, the default."""
    base = {"model_type": "mistral", "hidden_size": 5120, "num_hidden_layers": 40, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "vocab_size": 131072,
            "max_position_embeddings": 1024000, "tie_word_embeddings": False}
    assert from_hf_config({**base, "sliding_window": None}, "nemo", "nemo").sliding_window is None
    assert from_hf_config(base, "m", "m").sliding_window == 4096
    assert from_hf_config({**base, "sliding_window": 2048}, "m", "m").sliding_window == 2048
    assert from_hf_config(base, "m", "m").seq_len == 4096  # not the 1,024,000-token context


def test_export_refusal_names_the_field():
    m = replace(get_model("llama2-7b"), norm="layernorm")
    with pytest.raises(ConfigError, match="norm='layernorm'"):
        to_hf_config(m)


SETTINGS = [TrainSetting(2, 512, 1), TrainSetting(1, 1024, 2, True), TrainSetting(1, 8192, 1)]


@pytest.mark.parametrize("name", SHIPPED)
def test_closed_form_and_fwd_bwd_ratio_for_imported_models(name):
    m = hf(name)
    for st in SETTINGS:
        if not m.valid_tp(st.tp) or (m.position == "learned" and st.seq_len > m.seq_len):
            continue
        fwd, bwd = layer_graph(m, st, "block", "fwd"), layer_graph(m, st, "block", "bwd")
        assert fwd.gemm_flops == block_forward_gemm_flops(m, st)
        assert bwd.gemm_flops == 2 * fwd.gemm_flops


def test_parallel_block_data_flow():
    st = TrainSetting(1, 256)
    for name, norms in (("pythia-160m", ["norm1", "norm2"]), ("phi-2", ["norm1"])):
        g = layer_graph(hf(name), st, "block", "fwd")
        names = [o.name for o in g.ops]
        assert [n for n in names if n.startswith("norm")] == norms
        preds = {names[b]: {names[a] for a, bb in g.edges if bb == b} for b in range(len(names))}
        # the MLP does not wait for attention: fc1 reads a norm of the block input
        assert preds["fc1"] == {norms[-1]} and preds.get(norms[-1], set()) == set()
        assert preds["mlp_residual"] == {"fc2", "attn_residual"}
    seq = layer_graph(get_model("gpt2-xl"), st, "block", "fwd")
    names = [o.name for o in seq.ops]
    assert (names.index("attn_residual"), names.index("norm2")) in seq.edges


def test_parallel_block_keeps_the_block_input_once():
    st = TrainSetting(1, 256)
    assert "norm2.input" not in activation_terms(hf("pythia-160m"), st, "block")
    assert "fc1.input" in activation_terms(hf("pythia-160m"), st, "block")
    assert not {"norm2.input", "fc1.input"} & set(activation_terms(hf("phi-2"), st, "block"))


def test_sliding_window_caps_the_attended_keys():
    m = hf("mistral-7b-v0.1")
    short, long_ = TrainSetting(1, 4096), TrainSetting(1, 16384)
    ops = {o.name: o for o in layer_graph(m, long_, "block", "fwd").ops}
    assert (ops["attn_scores"].n, ops["attn_v"].k, ops["softmax"].elements) == (4096, 4096, 32 * 16384 * 4096)
    full = replace(m, sliding_window=None)
    assert layer_graph(m, short, "block", "fwd") == layer_graph(full, short, "block", "fwd")
    assert (layer_memory(m, long_, "block").activation_bytes
            < layer_memory(full, long_, "block").activation_bytes)


def test_gemma_head_dim_and_geglu_shapes():
    m, st = hf("gemma-7b"), TrainSetting(1, 1024)
    ops = {o.name: o for o in layer_graph(m, st, "block", "fwd").ops}
    assert (ops["qkv"].n, ops["out_proj"].k, ops["attn_scores"].k) == (3 * 16 * 256, 16 * 256, 256)
    assert ops["fc1"].n == 2 * 24576 and ops["geglu"].elements == 1024 * 24576
    emb = [o.name for o in layer_graph(m, st, "embedding", "fwd").ops]
    assert emb == ["word_gather", "embed_scale"]


def test_search_fingerprint_leaves_template_valued_variant_fields_out():
    """Stores written before the variant fields existed still resume: a template model's fingerprint has
    exactly the fields ModelConfig had before them; a model that uses a variant shows it."""
    from phaze.search.spec import SearchSpec

    before = {"name", "num_layers", "hidden", "heads", "ffn", "vocab", "seq_len", "kv_heads", "norm", "mlp",
              "tied_embeddings", "arch", "position", "bias", "dropout", "max_tp", "vocab_pad_multiple",
              "embed_proj_dim"}
    fp = SearchSpec(models=(get_model("gpt2-xl"), hf("pythia-160m"))).fingerprint()["models"]
    assert set(fp[0]) == before
    assert set(fp[1]) - before == {"parallel_block", "rotary_fraction", "qkv_bias", "out_bias"}
