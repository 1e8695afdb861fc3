"""Per-layer memory: Korthikanti et al. 2022 closed forms, their Figure 1 numbers, optimizers, boundaries."""
from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaze.errors import ConfigError
from phaze.workload import ModelConfig, TrainSetting, get_model, layer_memory, param_count
from phaze.workload.memory import layer_params

GiB = 2**30

# Korthikanti et al. 2022 (arXiv 2205.05198) Figure 1, as in src/phaze/validation/data/published_measurements.json:
# (model, tp, pp, microbatch, interleaving, params+grads+optimizer GiB, {mode: activation GiB}) on the first stage.
FIGURE1 = [
    ("megatron-22b", 8, 1, 4, 1, 45.5625, {"none": 59.25, "seqsel": 9.5625}),
    ("gpt3-175b", 8, 8, 1, 3, 45.5625, {"none": 66.84375, "seqsel": 12.3515625}),
]
MODE = {"none": (False, "none"), "seqsel": (True, "selective")}


def gpt(h, a, s, dropout=True):
    return ModelConfig(name="gpt", num_layers=2, hidden=h, heads=a, ffn=4 * h, vocab=51200, seq_len=s, dropout=dropout)


@given(b=st.integers(1, 8), s=st.sampled_from([256, 512, 2048]), a=st.sampled_from([8, 16, 32]),
       hm=st.integers(1, 4), t=st.sampled_from([1, 2, 4, 8]))
@settings(max_examples=60, deadline=None)
def test_block_activations_reproduce_korthikanti_closed_forms(b, s, a, hm, t):
    h = 128 * a * hm // 4 * 4
    m, sbh = gpt(h, a, s), s * b * h
    act = lambda sp, rc: layer_memory(m, TrainSetting(b, s, t, sp, rc), "block").activation_bytes
    assert act(False, "none") * h * t == sbh * (10 * h * t + 24 * h + 5 * a * s)
    assert act(False, "selective") * t == sbh * (10 * t + 24)
    if t > 1:
        assert act(True, "none") * t * h == sbh * (34 * h + 5 * a * s)
        assert act(True, "selective") * t == 34 * sbh
        assert act(True, "full") * t == 2 * sbh
    assert act(False, "full") == 2 * sbh


def test_generalisations_no_dropout_swiglu_gqa():
    b, s, t = 1, 1024, 1
    base = layer_memory(gpt(1024, 16, s), TrainSetting(b, s, t), "block").activation_bytes
    nodrop = layer_memory(gpt(1024, 16, s, dropout=False), TrainSetting(b, s, t), "block").activation_bytes
    # no dropout: no attention mask (a s^2 b) nor its output (2 a s^2 b), no two hidden masks (2 s b h)
    assert base - nodrop == 3 * 16 * s * s * b + 2 * s * b * 1024
    llama = get_model("llama2-70b")
    st_ = TrainSetting(1, 4096, 8, True, "selective")
    mem = layer_memory(llama, st_, "block").activation_bytes
    s, h, b, t, f, kv = 4096, 8192, 1, 8, 28672, 1024
    # SP-sharded: norm1, qkv in, norm2, fc1 in (8 s b h / t) + Q (2 s b h / t) + K,V (4 s b kv / t)
    # + out_proj in (2 s b h / t) + SwiGLU gate+up (4 s b f / t) + fc2 in (2 s b f / t)
    assert mem == (8 * s * b * h + 2 * s * b * h + 4 * s * b * kv + 2 * s * b * h + 6 * s * b * f) // t


@pytest.mark.parametrize("name,t,pp,mb,v,static_gib,acts", FIGURE1)
@pytest.mark.parametrize("mode", ["none", "seqsel"])
def test_figure1_memory_within_5_percent(name, t, pp, mb, v, static_gib, acts, mode):
    m = replace(get_model(name), vocab=51200)  # the measurements use vocab 51200 (paper zoo: 50257)
    sp, rc = MODE[mode]
    setting = TrainSetting(mb, 2048, t, sp, rc)
    block, emb = layer_memory(m, setting, "block"), layer_memory(m, setting, "embedding")
    layers = m.num_layers // pp  # first stage: num_layers/pp blocks (over its v chunks) + embedding
    static = layers * block.static_bytes + emb.static_bytes
    assert static / GiB == pytest.approx(static_gib, rel=0.05)
    # 1F1B keeps pp microbatches in flight on the first stage; interleaving adds (pp-1)/(pp*v)
    # (Korthikanti et al. 2022, sec. 4.2.3)
    in_flight = pp * (1 + (pp - 1) / (pp * v)) if pp > 1 else 1
    activations = (layers * block.activation_bytes + emb.activation_bytes) * in_flight
    assert activations / GiB == pytest.approx(acts[mode], rel=0.05)


def test_optimizers_and_sharding():
    m = get_model("megatron-22b")
    adam = layer_memory(m, TrainSetting(1, 2048, 8), "block")
    sgd = layer_memory(m, TrainSetting(1, 2048, 8), "block", optimizer="sgd")
    assert adam.static_bytes == 18 * adam.params and sgd.static_bytes == 4 * sgd.params
    assert (adam.weight_bytes, adam.grad_bytes, adam.optimizer_bytes) == (2 * adam.params, 4 * adam.params, 12 * adam.params)
    assert sgd.optimizer_bytes == 0
    h = 6144
    assert adam.params == 12 * h * h // 8 + (3 * h + 4 * h) // 8 + 2 * h + 4 * h  # sharded + replicated biases/norms
    one = layer_memory(m, TrainSetting(1, 2048, 1), "block").params
    assert one == 12 * h * h + 13 * h
    assert layer_params(m, "embedding", 8) == 51200 // 8 * h + 2048 * h  # vocab-parallel + replicated positions
    with pytest.raises(ConfigError):
        layer_memory(m, TrainSetting(1, 2048, 8), "block", optimizer="lamb")


def test_boundaries_and_tied_head():
    m, b, s, h = get_model("gpt3-175b"), 2, 2048, 12288
    for sp, div in ((False, 1), (True, 8)):
        setting = TrainSetting(b, s, 8, sp)
        emb, blk, head = (layer_memory(m, setting, layer) for layer in ("embedding", "block", "head"))
        assert (emb.boundary_fwd_bytes, emb.boundary_bwd_bytes) == (2 * b * s * h // div, 0)
        assert blk.boundary_fwd_bytes == blk.boundary_bwd_bytes == 2 * b * s * h // div
        assert (head.boundary_fwd_bytes, head.boundary_bwd_bytes) == (0, 2 * b * s * h // div)
    head = layer_memory(m, TrainSetting(1, 2048, 8), "head")
    assert head.tied_params == m.padded_vocab(8) // 8 * h and head.params == head.tied_params + 2 * h
    assert head.activation_bytes >= 4 * 2048 * m.padded_vocab(8) // 8  # fp32 softmax of the loss
    llama = layer_memory(get_model("llama2-7b"), TrainSetting(1, 4096), "head")
    assert llama.tied_params == 0 and llama.params == 32000 * 4096 + 4096


def test_recompute_working_bytes_and_total_param_consistency():
    m = get_model("gpt3-175b")
    none = layer_memory(m, TrainSetting(1, 2048, 8), "block")
    full = layer_memory(m, TrainSetting(1, 2048, 8, recompute="full"), "block")
    assert full.activation_bytes + full.recompute_working_bytes == none.activation_bytes
    assert none.recompute_working_bytes == 0
    # per-layer params at t = 1 with the unpadded vocabulary add up to param_count (tied head counted once)
    for name in ("gpt2-xl", "llama2-7b", "bert-large", "opt-350m"):
        mm = get_model(name)
        total = sum(layer_params(mm, layer, 1, mm.vocab) for layer in mm.layer_sequence())
        tied = mm.vocab * (mm.embed_proj_dim or mm.hidden) if mm.tied_embeddings else 0
        assert total - tied == param_count(mm)


def test_head_holds_its_16_bit_logits_beside_the_fp32_copy():
    # Llama-2-7B, t = 2, microbatch 2, sequence 4096: the vocabulary 32000 padded to a multiple of 128 x 2
    # (32000 already is) and split over 2 devices -> 16000 logits per token; 2 x 4096 x 16000 x 2 B transient
    m = get_model("llama2-7b")
    assert m.padded_vocab(2) == 32000
    head = layer_memory(m, TrainSetting(2, 4096, 2), "head")
    assert head.recompute_working_bytes == 2 * 4096 * 16000 * 2
    assert head.activation_bytes >= 4 * 2 * 4096 * 16000  # the fp32 copy is stashed, the 16-bit one is not
    # only the head has logits: a block without recompute holds nothing transient
    assert layer_memory(m, TrainSetting(2, 4096, 2), "block").recompute_working_bytes == 0
