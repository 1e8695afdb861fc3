"""The five MoE families against transformers on the meta device: a reduced-size config of each dev-set model
(few blocks, small widths, fewer experts; everything else as published) built by transformers and imported by
phaze, with the same parameter count, in total and per block (MoE block and dense block)."""
import json
from importlib import resources

import pytest

from phaze.workload.hf import from_hf_config
from phaze.workload.memory import block_params, layer_params, param_count

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

RUNS = {r["hf_config"]["model_type"] + ("-30b" if "30B" in r["hf_model"] else ""): r["hf_config"] for r in json.loads(
    resources.files("phaze.validation.data").joinpath("moe_runs.json").read_text(encoding="utf-8"))["runs"]}

# per family: the published config with its sizes cut down (kept: the family's structure, norms, biases, routing)
REDUCED = {
    "mixtral": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                    intermediate_size=96, num_local_experts=4, num_experts_per_tok=2, vocab_size=512),
    "qwen3_moe": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2, head_dim=32,
                      intermediate_size=256, moe_intermediate_size=48, num_experts=8, num_experts_per_tok=2,
                      vocab_size=512, max_window_layers=2),
    "qwen3_moe-30b": dict(hidden_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                          head_dim=16, intermediate_size=128, moe_intermediate_size=32, num_experts=6,
                          num_experts_per_tok=3, vocab_size=300, max_window_layers=3),
    "gpt_oss": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, head_dim=16,
                    intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, experts_per_token=2,
                    vocab_size=512, layer_types=["sliding_attention", "full_attention"] * 2),
    "deepseek_v3": dict(hidden_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                        intermediate_size=256, moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
                        n_group=2, topk_group=1, first_k_dense_replace=1, q_lora_rank=48, kv_lora_rank=32,
                        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16, vocab_size=512),
}
QWEN2_MOE = dict(model_type="qwen2_moe", hidden_size=128, num_hidden_layers=2, num_attention_heads=8,
                 num_key_value_heads=2, intermediate_size=256, moe_intermediate_size=48, num_experts=8,
                 num_experts_per_tok=2, shared_expert_intermediate_size=192, decoder_sparse_step=1,
                 mlp_only_layers=[], vocab_size=512, max_position_embeddings=2048, tie_word_embeddings=False,
                 hidden_act="silu", use_sliding_window=False)


def _configs():
    out = {k: dict({k2: v for k2, v in RUNS[k].items() if k2 not in ("quantization_config",)}, **v)
           for k, v in REDUCED.items()}
    out["qwen2_moe"] = QWEN2_MOE
    return out


CONFIGS = _configs()


def _meta_module(cfg: dict):
    c = dict(cfg)
    family = c.pop("model_type")
    c.pop("architectures", None)
    hf = transformers.AutoConfig.for_model(family, **c)
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(hf)


def _blocks(module):
    return next(sub for name, sub in module.named_modules() if name.endswith("layers")
                and isinstance(sub, torch.nn.ModuleList))


@pytest.mark.parametrize("key", sorted(CONFIGS))
def test_parameters_equal_transformers_on_the_meta_device(key):
    cfg = CONFIGS[key]
    ours = from_hf_config(cfg, f"{key} (reduced)", key)
    module = _meta_module(cfg)
    total = sum(p.numel() for p in module.parameters())
    blocks = list(_blocks(module))
    assert len(blocks) == ours.num_layers
    for i, blk in enumerate(blocks):
        theirs = sum(p.numel() for p in blk.parameters())
        assert block_params(ours, moe=ours.is_moe_layer(i)) == theirs, (key, i, ours.is_moe_layer(i))
    embed = layer_params(ours, "embedding", 1, ours.vocab)
    assert embed == module.get_input_embeddings().weight.numel()
    assert param_count(ours) == total, key
