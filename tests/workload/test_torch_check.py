"""The workload model against PyTorch's own counts, and the torch.export importer ([torch] extra).

Compared (see phaze.workload.torch_check): parameters exactly; GEMM FLOPs per block and for embedding +
head, forward and backward, within 1%. PyTorch's flop counter counts only matmul-family ATen ops
(mm, addmm, bmm, ...); our side counts only our GEMMs (vector ops are left out on both sides).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the [torch] extra (torch==2.13.0) is not installed: pip install -e '.[torch]'")
pytest.importorskip("transformers", reason="the [torch] extra (transformers) is not installed: pip install -e '.[torch]'")

from phaze.errors import ConfigError  # noqa: E402
from phaze.workload import Gemm, TrainSetting, get_model, layer_graph, list_models  # noqa: E402
from phaze.workload import torch_check  # noqa: E402
from phaze.workload.zoo import load_hf_config  # noqa: E402
from phaze.workload.torch_check import check_against_torch  # noqa: E402
from phaze.workload.torch_import import import_torch_module  # noqa: E402

HERE = Path(__file__).parent
SHIPPED = sorted(p.stem for p in (HERE / "hf_configs").glob("*.json"))
MODELS = [m.name for m in list_models()] + [f"hf:{HERE / 'hf_configs' / n}.json" for n in SHIPPED]


@pytest.mark.parametrize("name", MODELS, ids=[n.rpartition("/")[2] for n in MODELS])
def test_counts_match_pytorch(name):
    m = get_model(name)
    chk = check_against_torch(m, 1, min(m.seq_len, 256))
    assert chk.row("parameters (total)").ours == chk.row("parameters (total)").torch
    assert chk.row("parameters per block").ours == chk.row("parameters per block").torch
    for r in chk.rows:
        assert r.torch > 0 or "embedding" in r.quantity
        assert abs(r.rel_error) <= 0.01, (r.quantity, r.ours, r.torch)
    assert {"aten.mm", "aten.bmm"} <= set(chk.counted_ops)


def test_check_detects_a_wrong_count(monkeypatch):
    """The comparison can fail: drop the norms from our block parameters and it no longer matches."""
    real = torch_check.layer_params
    monkeypatch.setattr(torch_check, "layer_params",
                        lambda model, layer, tp=1, vocab=None: real(model, layer, tp, vocab) - 2 * model.hidden)
    chk = check_against_torch(get_model("gpt2-xl"), 1, 64)
    assert chk.row("parameters per block").rel_error < 0
    assert chk.row("fwd GEMM FLOPs per block").rel_error == 0


def test_sliding_window_beyond_the_window_differs_as_documented():
    """Eager attention scores every key and masks; our model counts the band a windowed kernel computes."""
    m = load_hf_config(HERE / "hf_configs" / "mistral-7b-v0.1.json")
    from dataclasses import replace
    s, w, a, d = 256, 64, 32, 128
    chk = check_against_torch(replace(m, sliding_window=w), 1, s)
    row = chk.row("fwd GEMM FLOPs per block")
    assert row.torch - row.ours == 4 * s * (s - w) * a * d  # scores and probs x V over the masked keys
    assert chk.row("parameters (total)").rel_error == 0


@pytest.fixture
def factories(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))
    yield
    sys.modules.pop("torch_factories", None)


def test_torch_import_of_a_transformers_model(factories):
    res = import_torch_module("torch_factories:tiny_llama", 2, 64)
    kinds = {l.kind: l for l in res.layers}
    assert [l.kind for l in res.layers] == ["embedding", "block", "head"] and kinds["block"].count == 3
    # the traced block's GEMMs are ours, with Q, K and V as three products instead of one fused QKV
    ours = layer_graph(res.model, TrainSetting(2, 64), "block", "fwd")
    traced = [o for o in kinds["block"].graph.ops if isinstance(o, Gemm)]
    assert sum(o.flops for o in traced) == ours.gemm_flops == res.analytic_block_gemm_flops
    assert sorted((o.batch, o.m, o.n, o.k) for o in traced if o.name.startswith("mlp")) == sorted(
        [(1, 128, 5632, 2048), (1, 128, 5632, 2048), (1, 128, 2048, 5632)])
    attn = [o for o in traced if "matmul" in o.name]
    assert [(o.batch, o.m, o.n, o.k) for o in attn] == [(2 * 32, 64, 64, 64), (2 * 32, 64, 64, 64)]
    head = [o for o in kinds["head"].graph.ops if isinstance(o, Gemm)]
    assert [(o.m, o.n, o.k) for o in head] == [(128, 32000, 2048)]
    assert res.model.num_layers == 3 and res.model.num_kv_heads == 4
    assert all(u.flops_share < 1e-3 for u in res.unmapped)


def test_torch_import_groups_identical_blocks_and_lists_unmapped(factories):
    res = import_torch_module("torch_factories:mlp_stack")
    blocks = [(l.kind, l.count) for l in res.layers if l.kind.startswith("block")]
    assert blocks == [("block", 2), ("block_2", 1)]
    first = next(l.graph for l in res.layers if l.kind == "block")
    names = [o.name for o in first.ops]
    assert names == ["norm.layer_norm", "up", "relu", "down", "add"]
    assert first.edges == ((0, 1), (1, 2), (2, 3), (3, 4))
    up = first.ops[1]
    assert (up.batch, up.m, up.n, up.k) == (1, 32, 256, 64)
    (cumsum,) = res.unmapped
    assert cumsum.aten_op == "aten.cumsum" and cumsum.count == 1 and 0 < cumsum.flops_share < 0.01
    assert res.model is None


def test_torch_import_bad_factory_is_one_line(factories):
    for spec, text in (("torch_factories:nope", "cannot load the factory"), ("nomodule", "expected MODULE:FACTORY")):
        with pytest.raises(ConfigError, match=text) as info:
            import_torch_module(spec)
        assert "\n" not in str(info.value)


def test_missing_extra_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ConfigError, match=r"pip install 'phaze\[torch\]'"):
        check_against_torch(get_model("gpt2-xl"))


SMALL = {"hidden_size": 256, "num_attention_heads": 8, "num_hidden_layers": 2, "vocab_size": 1000,
         "max_position_embeddings": 256}
VARIANTS = {  # small configs for the family variants the shipped configs do not cover
    "falcon-new-2-norms": {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 2},
    "falcon-new-1-norm": {"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 2,
                          "num_ln_in_parallel_attn": 1},
    "llama-biases": {"model_type": "llama", "intermediate_size": 704, "attention_bias": True, "mlp_bias": True,
                     "num_key_value_heads": 4, "tie_word_embeddings": True},
    "qwen2-window": {"model_type": "qwen2", "intermediate_size": 704, "use_sliding_window": True,
                     "sliding_window": 512, "max_window_layers": 2},
    "gemma-mha": {"model_type": "gemma", "intermediate_size": 704, "head_dim": 64, "num_key_value_heads": 8},
    "pythia-no-bias": {"model_type": "gpt_neox", "intermediate_size": 1024, "attention_bias": False,
                       "rotary_pct": 0.5},
    "opt-gelu-no-bias": {"model_type": "opt", "ffn_dim": 1024, "activation_function": "gelu", "enable_bias": False},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_family_variants_match_pytorch(variant):
    from phaze.workload.hf import from_hf_config
    m = from_hf_config({**SMALL, **VARIANTS[variant]}, variant, variant)
    chk = check_against_torch(m, 2, 128)
    assert chk.row("parameters (total)").rel_error == 0 and chk.row("parameters per block").rel_error == 0
    assert all(abs(r.rel_error) <= 0.01 for r in chk.rows), [(r.quantity, r.ours, r.torch) for r in chk.rows]
