"""MoE parameter counts: the five dev-set families imported from their published configs (the ``hf_config`` of
each run in the packaged ``phaze/validation/data/moe_runs.json``) against the published totals, and a small MoE
block counted by hand (router, routed experts, shared experts; sharding over tp and ep x etp)."""
import json
from importlib import resources

import pytest

from phaze.workload.config import ModelConfig
from phaze.workload.hf import from_hf_config
from phaze.workload.memory import active_param_count, block_params, layer_memory, layer_params, param_count
from phaze.workload.runtime import Runtime, TrainSetting

RUNS = {r["hf_model"]: r for r in json.loads(
    resources.files("phaze.validation.data").joinpath("moe_runs.json").read_text(encoding="utf-8"))["runs"]}


def _model(hf_model: str) -> ModelConfig:
    return from_hf_config(RUNS[hf_model]["hf_config"], "moe_runs.json", hf_model.split("/")[-1])


def _embedding(m: ModelConfig) -> int:
    return layer_params(m, "embedding", 1, m.vocab)


def test_the_dev_set_holds_the_five_families():
    assert {r["hf_config"]["model_type"] for r in RUNS.values()} == {"deepseek_v3", "qwen3_moe", "gpt_oss",
                                                                     "mixtral"}
    assert len(RUNS) == 5


def test_deepseek_v3_671b_total_37b_active():
    """DeepSeek-V3 Technical Report (arXiv 2412.19437), abstract: "671B total parameters with 37B activated for
    each token"; the HF checkpoint's main model is 671,026,404,352 parameters (the 14B MTP module apart)."""
    m = _model("deepseek-ai/DeepSeek-V3")
    assert param_count(m) == 671_026_404_352
    active = active_param_count(m)
    assert active // 10**9 == 37  # 37.55B: the report's "37B" truncates
    assert (m.num_experts, m.experts_per_token, m.num_moe_layers, m.mtp_layers) == (256, 8, 58, 1)


@pytest.mark.parametrize("hf_model, total, active, non_embedding", [
    # Qwen3 model cards (huggingface.co/Qwen/...): "Number of Parameters: 235B in total and 22B activated;
    # Number of Parameters (Non-Embedding): 234B" and "30.5B in total and 3.3B activated; ... 29.9B"
    ("Qwen/Qwen3-235B-A22B", 235, 22, 234),
    ("Qwen/Qwen3-30B-A3B", 30.5, 3.3, 29.9),
])
def test_qwen3_totals_match_the_model_cards(hf_model, total, active, non_embedding):
    m = _model(hf_model)
    digits = 0 if isinstance(total, int) else 1
    scale = 10 ** digits
    assert round(param_count(m) / 1e9, digits) == total
    # the cards truncate the active count (30B-A3B: 3.353B is "3.3B")
    assert int(active_param_count(m) / 1e9 * scale) / scale == active
    untied_tables = 2 * _embedding(m)  # embedding and LM head (tie_word_embeddings: false)
    assert round((param_count(m) - untied_tables) / 1e9, digits) == non_embedding


def test_gpt_oss_120b_model_card():
    """OpenAI, gpt-oss-120b & gpt-oss-20b Model Card (Aug 2025), Table 1: 116.83B total parameters and 5.13B
    active per token, the active count leaving out the embedding (but not the unembedding)."""
    m = _model("openai/gpt-oss-120b")
    assert round(param_count(m) / 1e9, 2) == 116.83
    assert round((active_param_count(m) - _embedding(m)) / 1e9, 2) == 5.13
    assert (m.num_experts, m.experts_per_token, m.sliding_window_period, m.attention_sinks) == (128, 4, 2, True)


def test_mixtral_8x7b_46_7b_total_12_9b_active():
    """Mistral AI, "Mixtral of experts" (arXiv 2401.04088), sec. 2: 47B parameters, 13B active per token; the
    announcement (mistral.ai/news/mixtral-of-experts): "46.7B total parameters but only uses 12.9B"."""
    m = _model("mistralai/Mixtral-8x7B-v0.1")
    assert param_count(m) == 46_702_792_704
    assert round(param_count(m) / 1e9, 1) == 46.7
    assert round(active_param_count(m) / 1e9, 1) == 12.9


@pytest.mark.parametrize("hf_model", sorted(RUNS))
def test_active_is_total_less_the_idle_experts(hf_model):
    m = _model(hf_model)
    idle = (m.num_experts - m.experts_per_token) * m.num_moe_layers
    per_expert = (param_count(m) - active_param_count(m)) // idle
    assert per_expert * idle == param_count(m) - active_param_count(m)
    f, h = m.moe_ffn, m.hidden
    assert per_expert == 3 * h * f + (2 * f + h if m.expert_bias else 0)  # gated MLP (+ GPT-OSS's biases)


# a small MoE model counted by hand: h 64, 4 heads of 16 (2 kv heads), SwiGLU, RMSNorm, no biases, 8 experts of
# FFN 32, top-2, one shared expert of 32, the first block dense
TINY = ModelConfig(name="tiny-moe", num_layers=3, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=100, seq_len=64,
                   norm="rmsnorm", mlp="swiglu", position="rotary", bias=False, dropout=False,
                   tied_embeddings=False, num_experts=8, experts_per_token=2, moe_ffn=32, shared_experts=1,
                   first_dense_layers=1)
ATTN = 64 * 64 + 2 * 64 * 32 + 64 * 64  # q, k and v (2 kv heads x 16), out
NORMS = 2 * 64
ROUTER = 64 * 8
EXPERT = 3 * 64 * 32  # gate, up, down
SHARED = 3 * 64 * 32


def test_small_moe_block_by_hand():
    assert block_params(TINY, moe=True) == ATTN + NORMS + ROUTER + 8 * EXPERT + SHARED == 68_224
    assert block_params(TINY) == ATTN + NORMS + 3 * 64 * 128  # the dense first block
    # tp 2 shards attention and the shared expert, ep 4 x etp 2 the routed experts; router and norms replicated
    assert block_params(TINY, tp=2, moe=True, ep=4, etp=2) == (ATTN + SHARED) // 2 + NORMS + ROUTER + 8 * EXPERT // 8
    embed = head = 100 * 64
    assert param_count(TINY) == embed + (ATTN + NORMS + 3 * 64 * 128) + 2 * 68_224 + 64 + head
    assert active_param_count(TINY) == param_count(TINY) - 2 * 6 * EXPERT


def test_expert_state_shards_over_ep_x_etp():
    """The block's memory on one device holds the device's 1/(ep x etp) of the experts; ZeRO-1 shards the
    routed experts' state over the expert-data-parallel group (scale ep x etp / tp relative to the rest)."""
    rt = Runtime(attention="flash", moe_routing="balanced")
    whole = layer_memory(TINY, TrainSetting(1, 64, runtime=rt), "block")
    split = layer_memory(TINY, TrainSetting(1, 64, runtime=rt, ep=4, etp=2), "block")
    assert whole.params - split.params == 8 * EXPERT - 8 * EXPERT // 8
    assert whole.zero1_scale == 1.0
    rest = split.params - EXPERT
    assert split.zero1_scale == pytest.approx((rest + EXPERT * 8) / split.params)
