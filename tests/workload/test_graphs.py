"""Layer graphs: DAG structure, closed-form FLOPs, fwd:bwd = 1:2, sharding, collectives, recompute."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze.errors import ConfigError
from phaze.workload import (Collective, Gemm, ModelConfig, TrainSetting, VectorOp, block_forward_gemm_flops,
                            get_model, layer_graph, layer_graphs)
from phaze.workload.graphs import LAYERS

MODES = [(sp, rc) for sp in (False, True) for rc in ("none", "selective", "full")]
ZOO_SETTINGS = [("gpt3-175b", 1, 2048, 8), ("llama2-70b", 2, 4096, 8), ("megatron-bert", 4, 512, 4),
                ("opt-350m", 2, 2048, 1), ("llama2-7b", 1, 4096, 1), ("bert-large", 8, 512, 1)]


def by_name(g):
    return {op.name: op for op in g.ops}


def assert_dag(g):
    n = len(g.ops)
    assert len({op.name for op in g.ops}) == n, "op names must be unique"
    assert len(set(g.edges)) == len(g.edges)
    for a, b in g.edges:
        assert 0 <= a < b < n, f"edge {a}->{b} not in topological order"


@pytest.mark.parametrize("name,b,s,t", ZOO_SETTINGS)
@pytest.mark.parametrize("sp,rc", MODES)
def test_every_graph_is_a_topological_dag(name, b, s, t, sp, rc):
    graphs = layer_graphs(get_model(name), TrainSetting(b, s, t, sp, rc))
    assert set(graphs) == {(l, d) for l in LAYERS for d in ("fwd", "bwd")}
    for (layer, d), g in graphs.items():
        assert (g.layer, g.direction) == (layer, d)
        assert_dag(g)
        has_coll = any(isinstance(op, Collective) for op in g.ops)
        if t == 1 or d == "fwd":  # (the embedding backward of a non-SP all_reduce is the identity)
            assert has_coll == (t > 1), "collectives exactly when t > 1"


def gpt(h=1024, a=16, layers=2, **kw):
    return ModelConfig(name="gpt", num_layers=layers, hidden=h, heads=a, ffn=4 * h, vocab=50304, seq_len=2048, **kw)


@given(b=st.integers(1, 8), s=st.sampled_from([128, 256, 1024, 2048]), hm=st.integers(1, 16),
       a=st.sampled_from([8, 16]), t=st.sampled_from([1, 2, 4, 8]), sp=st.booleans())
@settings(max_examples=60, deadline=None)
def test_block_forward_flops_closed_form(b, s, hm, a, t, sp):
    h = 64 * a * hm // 8 * 8
    m, setting = gpt(h, a), TrainSetting(b, s, t, sp)
    fwd = layer_graph(m, setting, "block", "fwd")
    # Narayanan et al. 2021: 24 b s h^2 + 4 b s^2 h per block forward (ffn = 4h, MHA), split over t devices
    assert fwd.gemm_flops * t == 24 * b * s * h * h + 4 * b * s * s * h
    assert fwd.gemm_flops == block_forward_gemm_flops(m, setting)
    bwd = layer_graph(m, setting, "block", "bwd")
    assert bwd.gemm_flops == 2 * fwd.gemm_flops
    # op by op: each forward GEMM (m x k by k x n) has two backward GEMMs over the same three sizes, the
    # input gradient reducing over n and the weight (or second operand) gradient over m
    for op in (o for o in fwd.ops if isinstance(o, Gemm)):
        grads = [g for g in bwd.ops if isinstance(g, Gemm) and g.name.split(".")[0] == op.name]
        assert len(grads) == 2, op.name
        assert all(sorted((g.m, g.n, g.k)) == sorted((op.m, op.n, op.k)) and g.batch == op.batch for g in grads)
        assert sorted(g.k for g in grads) == sorted((op.m, op.n)), op.name


@pytest.mark.parametrize("name", ["llama2-70b", "llama3-8b", "opt-350m", "bert-large", "gpt3-175b"])
@pytest.mark.parametrize("layer", LAYERS)
def test_training_gemm_flops_are_three_times_forward(name, layer):
    m = get_model(name)
    t = min(m.max_tp, 8)
    setting = TrainSetting(2, 512, t)
    fwd, bwd = layer_graph(m, setting, layer, "fwd"), layer_graph(m, setting, layer, "bwd")
    assert bwd.gemm_flops == 2 * fwd.gemm_flops
    if layer == "block":
        assert fwd.gemm_flops == block_forward_gemm_flops(m, setting)
        # vector ops are counted separately and are a small share of a block
        assert 0 < sum(op.flops for op in fwd.ops if isinstance(op, VectorOp)) < 0.05 * fwd.gemm_flops


def test_gqa_swiglu_shapes():
    m, setting = get_model("llama2-70b"), TrainSetting(1, 4096, 8)
    ops = by_name(layer_graph(m, setting, "block", "fwd"))
    assert (ops["qkv"].m, ops["qkv"].k, ops["qkv"].n) == (4096, 8192, (64 + 2 * 8) * 128 // 8)
    assert (ops["attn_scores"].batch, ops["attn_scores"].m, ops["attn_scores"].n, ops["attn_scores"].k) == (8, 4096, 4096, 128)
    assert ops["fc1"].n == 2 * 28672 // 8 and ops["fc2"].k == 28672 // 8
    assert ops["swiglu"].elements == 4096 * 28672 // 8
    assert "rotary" in ops and "attn_dropout" not in ops and ops["norm1"].kind == "rmsnorm"


@given(t=st.sampled_from([2, 4, 8]), sp=st.booleans())
@settings(max_examples=12, deadline=None)
def test_sharded_shapes_scale_with_one_over_t(t, sp):
    m = get_model("gpt3-175b")
    one = {**by_name(layer_graph(m, TrainSetting(2, 1024, 1), "block", "fwd")),
           **by_name(layer_graph(m, TrainSetting(2, 1024, 1), "head", "fwd"))}
    sh = {**by_name(layer_graph(m, TrainSetting(2, 1024, t, sp), "block", "fwd")),
          **by_name(layer_graph(m, TrainSetting(2, 1024, t, sp), "head", "fwd"))}
    for name in ("qkv", "fc1"):  # column-parallel: N / t
        assert sh[name].n * t == one[name].n and sh[name].k == one[name].k
    for name in ("out_proj", "fc2"):  # row-parallel: K / t
        assert sh[name].k * t == one[name].k and sh[name].n == one[name].n
    for name in ("attn_scores", "attn_v", "softmax"):  # heads / t
        assert sh[name].flops * t == one[name].flops
    assert sh["lm_head"].n == m.padded_vocab(t) // t
    for name in ("norm1", "norm2", "attn_residual"):  # replicated, or sequence-sharded with SP
        assert sh[name].elements * (t if sp else 1) == one[name].elements


def test_megatron_collectives_without_and_with_sp():
    m, b, s, h = get_model("megatron-22b"), 4, 2048, 6144
    fwd = by_name(layer_graph(m, TrainSetting(b, s, 8), "block", "fwd"))
    bwd = by_name(layer_graph(m, TrainSetting(b, s, 8), "block", "bwd"))
    colls = lambda ops: sorted((o.name, o.kind) for o in ops.values() if isinstance(o, Collective))
    assert colls(fwd) == [("attn.all_reduce", "all_reduce"), ("mlp.all_reduce", "all_reduce")]
    assert colls(bwd) == [("fc1.dgrad_all_reduce", "all_reduce"), ("qkv.dgrad_all_reduce", "all_reduce")]
    assert all(fwd[n].bytes == 2 * b * s * h and fwd[n].group_size == 8 for n in ("attn.all_reduce", "mlp.all_reduce"))
    fwd = by_name(layer_graph(m, TrainSetting(b, s, 8, True), "block", "fwd"))
    bwd = by_name(layer_graph(m, TrainSetting(b, s, 8, True), "block", "bwd"))
    assert [k for _, k in colls(fwd)].count("all_gather") == 2 and [k for _, k in colls(fwd)].count("reduce_scatter") == 2
    # backward: conjugates (all_gather <-> reduce_scatter) plus the re-gather of X for the column-parallel dW
    assert bwd["qkv.all_gather.bwd"].kind == "reduce_scatter" and bwd["attn.reduce_scatter.bwd"].kind == "all_gather"
    assert bwd["qkv.input_all_gather"].kind == "all_gather" and bwd["fc1.input_all_gather"].bytes == 2 * b * s * h


def test_backward_gemms_and_wgrad_independence():
    m = get_model("gpt3-175b")
    g = layer_graph(m, TrainSetting(1, 2048, 8), "block", "bwd")
    ops = by_name(g)
    for name in ("qkv", "out_proj", "fc1", "fc2"):
        assert isinstance(ops[name + ".dgrad"], Gemm) and isinstance(ops[name + ".wgrad"], Gemm)
    for name in ("attn_scores.dq", "attn_scores.dk", "attn_v.dprobs", "attn_v.dv"):
        assert isinstance(ops[name], Gemm)
    preds, idx = g.preds(), {op.name: i for i, op in enumerate(g.ops)}
    succs = {i: [b for a, b in g.edges if a == i] for i in range(len(g.ops))}
    for name in ("qkv", "out_proj", "fc1", "fc2"):
        w, d = idx[name + ".wgrad"], idx[name + ".dgrad"]
        assert succs[w] == [], "wgrad feeds nothing in the layer"
        assert preds[w] == preds[d], "wgrad depends only on the upstream gradient (like dgrad)"
    kinds = {op.kind for op in g.ops if isinstance(op, VectorOp)}
    assert kinds == {"layernorm_bwd", "dropout_add_bwd", "gelu_bwd", "dropout_bwd", "softmax_bwd"}


def test_recompute_prepends_forward():
    m = get_model("gpt3-175b")
    base = TrainSetting(1, 2048, 8, True)
    fwd = layer_graph(m, base, "block", "fwd")
    none = layer_graph(m, base, "block", "bwd")
    full = layer_graph(m, TrainSetting(1, 2048, 8, True, "full"), "block", "bwd")
    sel = layer_graph(m, TrainSetting(1, 2048, 8, True, "selective"), "block", "bwd")
    fwd_names = [op.name for op in fwd.ops]
    assert [op.name for op in full.ops[:len(fwd.ops)]] == ["recompute." + n for n in fwd_names]
    assert full.gemm_flops == none.gemm_flops + fwd.gemm_flops
    assert [op.name for op in sel.ops[:4]] == ["recompute." + n for n in ("attn_scores", "softmax", "attn_dropout", "attn_v")]
    assert not any(op.name.startswith("recompute.") for op in sel.ops[4:])
    ops = by_name(fwd)
    assert sel.gemm_flops == none.gemm_flops + ops["attn_scores"].flops + ops["attn_v"].flops
    # with full recompute the stored-sharded input is re-gathered by the recomputed all_gather
    assert "qkv.input_all_gather" not in by_name(full) and "qkv.input_all_gather" in by_name(sel)
    # embedding and head are never recomputed
    for layer in ("embedding", "head"):
        assert layer_graph(m, TrainSetting(1, 2048, 8, True, "full"), layer, "bwd") == layer_graph(m, base, layer, "bwd")


def test_embedding_and_head_ops():
    m = get_model("opt-350m")
    emb = by_name(layer_graph(m, TrainSetting(2, 2048), "embedding", "fwd"))
    assert emb["word_gather"].kind == "embedding_gather" and emb["word_gather"].elements == 2 * 2048 * 512
    assert (emb["project_in"].k, emb["project_in"].n) == (512, 1024)
    head = by_name(layer_graph(m, TrainSetting(2, 2048), "head", "fwd"))
    assert (head["project_out"].k, head["project_out"].n) == (1024, 512)
    assert (head["lm_head"].m, head["lm_head"].k, head["lm_head"].n) == (4096, 512, 50272)
    assert head["cross_entropy"].elements == 4096 * 50272
    g = get_model("gpt3-175b")
    head = by_name(layer_graph(g, TrainSetting(1, 2048, 8), "head", "fwd"))
    assert {n for n, o in head.items() if isinstance(o, Collective)} == {
        "ce_max.all_reduce", "ce_sum.all_reduce", "ce_target.all_reduce"}
    bert = by_name(layer_graph(get_model("megatron-bert"), TrainSetting(1, 512, 2), "embedding", "fwd"))
    assert {"word_gather", "embed.all_reduce", "position_add", "embed_norm", "embed_dropout"} == set(bert)


@pytest.mark.parametrize("bad", [
    lambda: layer_graph(get_model("gpt2-xl"), TrainSetting(1, 1024, 2), "block", "fwd"),  # 25 heads
    lambda: layer_graph(get_model("gpt3-175b"), TrainSetting(1, 2048), "decoder", "fwd"),
    lambda: layer_graph(get_model("gpt3-175b"), TrainSetting(1, 2048), "block", "sideways"),
    lambda: layer_graph(get_model("gpt2-xl"), TrainSetting(1, 4096), "embedding", "fwd"),  # > learned positions
    lambda: TrainSetting(0, 2048),
    lambda: TrainSetting(1, 2048, recompute="some"),
])
def test_bad_settings_raise_one_line_config_error(bad):
    with pytest.raises(ConfigError) as info:
        bad()
    assert "\n" not in str(info.value)
