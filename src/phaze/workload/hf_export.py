"""ModelConfig -> the Hugging Face config that builds the same network in ``transformers``.

The inverse of ``phaze.workload.hf.from_hf_config`` (tested as a round trip on the zoo and the shipped
configs). Used by the cross-check against PyTorch's own parameter and FLOP counts; a model no family
can express raises a one-line ConfigError naming the field that rules each family out.
"""
from __future__ import annotations

from phaze.errors import ConfigError
from phaze.workload.config import ModelConfig

_ACT = {"gelu": "gelu_new", "relu": "relu", "swiglu": "silu", "geglu": "gelu_pytorch_tanh"}


def _uniform_bias(m: ModelConfig) -> bool:
    return m.has_bias("qkv") == m.has_bias("out") == m.has_bias("mlp") == m.bias


def _why_not(m: ModelConfig, **want) -> str | None:
    """The first field of ``m`` that differs from ``want`` (field -> required value), as 'field=value'."""
    for field, value in want.items():
        have = getattr(m, field) if field != "uniform_bias" else _uniform_bias(m)
        if have != value:
            return f"{field}={have!r}"
    return None


def _common(m: ModelConfig, vocab: int) -> dict:
    return {"vocab_size": vocab, "num_hidden_layers": m.num_layers, "hidden_size": m.hidden,
            "num_attention_heads": m.heads, "tie_word_embeddings": m.tied_embeddings}


def _rope(m: ModelConfig) -> dict:
    return {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "partial_rotary_factor": m.rotary_fraction}}


def _plain(m: ModelConfig) -> dict:
    """Fields every family below needs at their template value."""
    return dict(sliding_window=None, head_dim_override=None, embed_scale=False, extra_positions=0,
                final_norm=True, rotary_fraction=1.0, embed_proj_dim=None)


Built = tuple[dict | None, str | None]  # (the config, or None and the field that rules the family out)


def _bert(m: ModelConfig, base: dict, drop: float) -> Built:
    why = _why_not(m, norm="layernorm", mlp="gelu", position="learned", uniform_bias=True, bias=True,
                   parallel_block=False, kv_heads=None, head_bias=None, **_plain(m))
    return (None, why) if why else (dict(base, model_type="bert", intermediate_size=m.ffn, hidden_act="gelu",
                                         max_position_embeddings=m.seq_len, type_vocab_size=2,
                                         hidden_dropout_prob=drop, attention_probs_dropout_prob=drop), None)


def _opt(m: ModelConfig, base: dict, drop: float) -> Built:
    plain = dict(_plain(m), extra_positions=2, final_norm=m.final_norm, embed_proj_dim=m.embed_proj_dim)
    why = _why_not(m, norm="layernorm", kv_heads=None, uniform_bias=True, head_bias=None, parallel_block=False,
                   tied_embeddings=True, **plain) or (None if m.mlp in ("gelu", "relu") else f"mlp={m.mlp!r}")
    return (None, why) if why else (dict(base, model_type="opt", ffn_dim=m.ffn, max_position_embeddings=m.seq_len,
                                         word_embed_proj_dim=m.embed_proj_dim or m.hidden,
                                         do_layer_norm_before=m.final_norm, activation_function=m.mlp,
                                         enable_bias=m.bias, dropout=drop, attention_dropout=0.0), None)


def _gpt2(m: ModelConfig, base: dict, drop: float) -> Built:
    why = _why_not(m, norm="layernorm", kv_heads=None, uniform_bias=True, bias=True, head_bias=None,
                   parallel_block=False, mlp="gelu", **_plain(m))
    return (None, why) if why else (dict(base, model_type="gpt2", n_embd=m.hidden, n_layer=m.num_layers,
                                         n_head=m.heads, n_inner=m.ffn, n_positions=m.seq_len,
                                         activation_function="gelu_new", resid_pdrop=drop, embd_pdrop=drop,
                                         attn_pdrop=drop), None)


def _phi(m: ModelConfig, base: dict, drop: float) -> Built:
    why = _why_not(m, norm="layernorm", shared_norm=True, uniform_bias=True, bias=True, head_bias=True, mlp="gelu",
                   **dict(_plain(m), rotary_fraction=m.rotary_fraction))
    return (None, why) if why else (dict(base, **_rope(m), model_type="phi", intermediate_size=m.ffn,
                                         num_key_value_heads=m.num_kv_heads, max_position_embeddings=m.seq_len,
                                         hidden_act="gelu_new", resid_pdrop=drop), None)


def _neox(m: ModelConfig, base: dict, drop: float) -> Built:
    why = _why_not(m, norm="layernorm", shared_norm=False, qkv_bias=m.out_bias, bias=True, mlp_bias=None,
                   head_bias=None, kv_heads=None, mlp="gelu", **dict(_plain(m), rotary_fraction=m.rotary_fraction))
    return (None, why) if why else (dict(base, **_rope(m), model_type="gpt_neox", intermediate_size=m.ffn,
                                         max_position_embeddings=m.seq_len, use_parallel_residual=True,
                                         attention_bias=m.has_bias("qkv"), hidden_act="gelu",
                                         hidden_dropout=drop, attention_dropout=drop), None)


def _falcon(m: ModelConfig, base: dict, drop: float) -> Built:
    """Falcon-7B style (one norm, multi-query or multi-head) or the new decoder (kv groups, 1 or 2 norms)."""
    why = _why_not(m, norm="layernorm", uniform_bias=True, bias=False, head_bias=None, mlp="gelu", **_plain(m))
    new = not m.shared_norm or m.num_kv_heads not in (1, m.heads)
    return (None, why) if why else (dict(base, **_rope(m), model_type="falcon", ffn_hidden_size=m.ffn,
                                         max_position_embeddings=m.seq_len, new_decoder_architecture=new,
                                         num_kv_heads=m.num_kv_heads, multi_query=m.num_kv_heads == 1,
                                         num_ln_in_parallel_attn=1 if m.shared_norm else 2, parallel_attn=True,
                                         bias=False, alibi=False, hidden_dropout=drop, attention_dropout=drop), None)


def _llama_base(m: ModelConfig, base: dict, drop: float) -> dict:
    return dict(base, **_rope(m), intermediate_size=m.ffn, num_key_value_heads=m.num_kv_heads,
                max_position_embeddings=m.seq_len, head_dim=m.head_dim, attention_dropout=drop)


def _rotary_plain(m: ModelConfig, **over) -> dict:
    return dict(_plain(m), head_dim_override=m.head_dim_override, rotary_fraction=m.rotary_fraction, **over)


def _gemma(m: ModelConfig, base: dict, drop: float) -> Built:
    why = _why_not(m, norm="rmsnorm", mlp="geglu", uniform_bias=True, bias=False, head_bias=None,
                   **_rotary_plain(m, embed_scale=True))
    return (None, why) if why else (dict(_llama_base(m, base, drop), model_type="gemma", hidden_act="gelu_pytorch_tanh",
                                         hidden_activation="gelu_pytorch_tanh"), None)


def _qwen2(m: ModelConfig, base: dict, drop: float) -> Built:
    why = _why_not(m, norm="rmsnorm", mlp="swiglu", head_bias=None, **_rotary_plain(m, sliding_window=m.sliding_window))
    if not why and not (m.has_bias("qkv") and not m.has_bias("out") and not m.has_bias("mlp")):
        why = f"bias={m.bias!r} (Qwen2 biases Q, K, V only)"
    window = {"use_sliding_window": m.sliding_window is not None, "max_window_layers": 0,
              "sliding_window": m.sliding_window}
    return (None, why) if why else (dict(_llama_base(m, base, drop), **window, model_type="qwen2", hidden_act="silu"), None)


def _llama(m: ModelConfig, base: dict, drop: float) -> Built:
    """Llama (attention and MLP biases as flags), or Mistral when there is a sliding window (no biases)."""
    why = _why_not(m, norm="rmsnorm", mlp="swiglu", head_bias=None, qkv_bias=m.out_bias,
                   **_rotary_plain(m, sliding_window=m.sliding_window))
    if not why and m.sliding_window is not None and (m.bias or m.has_bias("mlp")):
        why = "bias=True (Mistral, the family with a sliding window, has no biases)"
    if why:
        return None, why
    cfg = dict(_llama_base(m, base, drop), attention_bias=m.has_bias("qkv"), mlp_bias=m.has_bias("mlp"), hidden_act="silu")
    if m.sliding_window is not None:
        return dict(cfg, model_type="mistral", sliding_window=m.sliding_window), None
    return dict(cfg, model_type="llama"), None


def to_hf_config(model: ModelConfig, vocab: int | None = None) -> dict:
    """A config dict (``model_type`` + fields) for ``transformers.AutoConfig.for_model``; ``vocab``
    overrides the vocabulary (e.g. the padded one a Megatron model trains with)."""
    m = model
    if getattr(m, "is_moe", False) or getattr(m, "mla", False):
        # not built yet: a dense family would build a different network and compare wrongly (the MoE families'
        # parameter counts are checked against transformers in tests/workload/test_moe_torch.py)
        raise ConfigError(f"model {m.name!r}: --check-torch does not yet build Mixture-of-Experts or MLA models "
                          f"(num_experts={m.num_experts}, kv_lora_rank={m.kv_lora_rank}) in transformers")
    if m.arch == "encoder":
        families = {"BERT": _bert}
    elif m.position == "learned":
        families = {"OPT": _opt, "GPT-2": _gpt2}
    elif m.parallel_block:
        families = {"Phi": _phi, "GPT-NeoX": _neox, "Falcon": _falcon}
    else:
        families = {"Gemma": _gemma, "Qwen2": _qwen2, "Llama": _llama}
    base, drop, reasons = _common(m, vocab or m.vocab), 0.1 if m.dropout else 0.0, []
    for family, build in families.items():
        cfg, why = build(m, base, drop)
        if cfg is not None:
            return cfg
        reasons.append(f"{family} needs other {why}")
    raise ConfigError(f"model {m.name!r}: no transformers family builds this model ({'; '.join(reasons)})")
