"""Hugging Face ``config.json`` <-> ModelConfig, for the common decoder and encoder families.

``from_hf_config`` reads a config (a local file; nothing is downloaded) of GPT-2, BERT, OPT, Llama,
Mistral, Qwen2, GPT-NeoX/Pythia, Falcon, Gemma or Phi. A setting our workload model cannot represent is
refused with one line naming the field and its value. ``to_hf_config`` goes the other way (the
family that builds a ModelConfig in ``transformers``), for the cross-check against PyTorch's counts.
Defaults are those of the transformers configuration classes (a field absent from config.json takes them).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from phaze.errors import ConfigError
from phaze.workload.config import ModelConfig

HF_PREFIX = "hf:"
# The training sequence length of an imported rotary-position model unless --seq says otherwise (a config's
# max_position_embeddings is its longest context, not a training length); learned positions keep their table
IMPORTED_SEQ_LEN = 4096
_GELU = ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "gelu_accurate", "gelu_10")
_SILU = ("silu", "swish")


class _Reader:
    """Field access on one config mapping; ``refuse`` raises the one-line error."""

    def __init__(self, cfg: dict[str, Any], source: str):
        self.cfg, self.source = cfg, source

    def get(self, *keys: str, default: Any = None) -> Any:
        for k in keys:
            if k in self.cfg and self.cfg[k] is not None:
                return self.cfg[k]
        return default

    def need(self, *keys: str) -> Any:
        v = self.get(*keys)
        if v is None:
            raise ConfigError(f"{self.source}: missing field '{keys[0]}'; a {self.cfg.get('model_type')} "
                              f"config.json needs it")
        return v

    def refuse(self, field: str, value: Any, why: str) -> ConfigError:
        return ConfigError(f"{self.source}: field '{field}' = {value!r} is not supported: {why}")

    def require(self, field: str, expected: Any, default: Any, why: str) -> None:
        value = self.get(field, default=default)
        if value != expected:
            raise self.refuse(field, value, why)

    def dropout(self, *keys_defaults: tuple[str, float]) -> bool:
        return any(float(self.get(k, default=d)) > 0 for k, d in keys_defaults)

    def activation(self, field: str, default: str, gated: bool) -> str:
        act = self.get(field, default=default)
        if gated:
            if act in _SILU:
                return "swiglu"
            if act in _GELU:
                return "geglu"
            raise self.refuse(field, act, "gated MLPs are modelled with SiLU (SwiGLU) or GELU (GeGLU)")
        if act in _GELU:
            return "gelu"
        if act == "relu":
            return "relu"
        raise self.refuse(field, act, "MLPs are modelled with GELU or ReLU (gated: SiLU, GELU)")

    def rotary_fraction(self, default: float) -> float:
        rope = self.get("rope_parameters", "rope_scaling", default={}) or {}
        return float(self.get("partial_rotary_factor", "rotary_pct",
                              default=rope.get("partial_rotary_factor", default)))


def _head_dim(r: _Reader, hidden: int, heads: int, default: int | None = None) -> int | None:
    d = r.get("head_dim", default=default)
    return None if d is None or d * heads == hidden else int(d)


def _gpt2(r: _Reader) -> dict:
    r.require("add_cross_attention", False, False, "cross-attention layers are not modelled")
    h = r.need("n_embd", "hidden_size")
    return dict(num_layers=r.need("n_layer", "num_hidden_layers"), hidden=h, heads=r.need("n_head", "num_attention_heads"),
                ffn=r.get("n_inner", default=4 * h), vocab=r.need("vocab_size"), seq_len=r.need("n_positions", "max_position_embeddings"),
                mlp=r.activation("activation_function", "gelu_new", gated=False),
                tied_embeddings=r.get("tie_word_embeddings", default=True),
                dropout=r.dropout(("resid_pdrop", 0.1), ("embd_pdrop", 0.1), ("attn_pdrop", 0.1)))


def _bert(r: _Reader) -> dict:
    r.require("type_vocab_size", 2, 2, "the BERT embedding is modelled with 2 token types")
    r.require("position_embedding_type", "absolute", "absolute", "only absolute (learned) positions are modelled")
    r.require("is_decoder", False, False, "BERT is modelled as an encoder")
    return dict(num_layers=r.need("num_hidden_layers"), hidden=r.need("hidden_size"), heads=r.need("num_attention_heads"),
                ffn=r.need("intermediate_size"), vocab=r.need("vocab_size"), seq_len=r.get("max_position_embeddings", default=512),
                arch="encoder", mlp=r.activation("hidden_act", "gelu", gated=False),
                tied_embeddings=r.get("tie_word_embeddings", default=True),
                dropout=r.dropout(("hidden_dropout_prob", 0.1), ("attention_probs_dropout_prob", 0.1)))


def _opt(r: _Reader) -> dict:
    r.require("layer_norm_elementwise_affine", True, True, "LayerNorms are modelled with weight and bias")
    h = r.need("hidden_size")
    proj = r.get("word_embed_proj_dim", default=h)
    pre = r.get("do_layer_norm_before", default=True)
    # OPTLearnedPositionalEmbedding stores max_position_embeddings + 2 rows (an offset of 2)
    return dict(num_layers=r.need("num_hidden_layers"), hidden=h, heads=r.need("num_attention_heads"),
                ffn=r.need("ffn_dim"), vocab=r.need("vocab_size"), seq_len=r.get("max_position_embeddings", default=2048),
                mlp=r.activation("activation_function", "relu", gated=False), bias=r.get("enable_bias", default=True),
                tied_embeddings=r.get("tie_word_embeddings", default=True), extra_positions=2,
                embed_proj_dim=None if proj == h else proj,
                final_norm=bool(pre and not r.get("_remove_final_layer_norm", default=False)),
                dropout=r.dropout(("dropout", 0.1), ("attention_dropout", 0.0)))


def _llama_like(r: _Reader, family: str) -> dict:
    h, heads = r.need("hidden_size"), r.need("num_attention_heads")
    gemma = family == "gemma"
    act_field = "hidden_activation" if gemma and "hidden_activation" in r.cfg else "hidden_act"
    out = dict(num_layers=r.need("num_hidden_layers"), hidden=h, heads=heads,
               kv_heads=r.get("num_key_value_heads", default=heads), ffn=r.need("intermediate_size"),
               vocab=r.need("vocab_size"), seq_len=r.need("max_position_embeddings"), norm="rmsnorm",
               mlp=r.activation(act_field, "gelu_pytorch_tanh" if gemma else "silu", gated=True), position="rotary",
               head_dim_override=_head_dim(r, h, heads, 256 if gemma else None),
               tied_embeddings=r.get("tie_word_embeddings", default=family in ("gemma",)),
               dropout=r.dropout(("attention_dropout", 0.0)), embed_scale=gemma,
               rotary_fraction=r.rotary_fraction(1.0))
    if family == "qwen2":  # Qwen2 biases Q, K and V only
        out.update(bias=False, qkv_bias=True)
        types = r.get("layer_types")
        if types is not None and len(set(types)) > 1:
            raise r.refuse("layer_types", sorted(set(types)), "blocks must be identical (mixed sliding and full "
                                                              "attention); set use_sliding_window to false")
        if r.get("use_sliding_window", default=False):
            if r.get("max_window_layers", default=28) < out["num_layers"]:
                raise r.refuse("max_window_layers", r.get("max_window_layers", default=28),
                               "blocks must be identical; only some layers would use the sliding window")
            out["sliding_window"] = r.get("sliding_window")
    else:
        attn_bias, mlp_bias = bool(r.get("attention_bias", default=False)), bool(r.get("mlp_bias", default=False))
        out.update(bias=attn_bias, mlp_bias=None if mlp_bias == attn_bias else mlp_bias)
        if family == "mistral":  # Mistral's projections have no biases whatever the config says
            # "sliding_window": null means full attention (transformers' MistralConfig default is 4096 only when the
            # field is absent); Mistral-7B v0.2+ and Mistral-Nemo set null
            window = r.cfg.get("sliding_window", 4096) if "sliding_window" in r.cfg else 4096
            out.update(bias=False, mlp_bias=False, sliding_window=window)
    return out


def _neox(r: _Reader) -> dict:
    bias = bool(r.get("attention_bias", default=True))
    return dict(num_layers=r.need("num_hidden_layers"), hidden=r.need("hidden_size"), heads=r.need("num_attention_heads"),
                ffn=r.need("intermediate_size"), vocab=r.need("vocab_size"), seq_len=r.get("max_position_embeddings", default=2048),
                mlp=r.activation("hidden_act", "gelu", gated=False), position="rotary",
                parallel_block=bool(r.get("use_parallel_residual", default=True)),
                qkv_bias=bias, out_bias=bias, bias=True,  # the MLP of GPT-NeoX always has biases
                tied_embeddings=r.get("tie_word_embeddings", default=False), rotary_fraction=r.rotary_fraction(0.25),
                dropout=r.dropout(("hidden_dropout", 0.0), ("attention_dropout", 0.0)))


def _falcon(r: _Reader) -> dict:
    r.require("alibi", False, False, "ALiBi positions are not modelled (rotary and learned are)")
    heads = r.need("num_attention_heads", "n_head")
    new = bool(r.get("new_decoder_architecture", default=False))
    parallel = bool(r.get("parallel_attn", default=True))
    if new and not parallel:
        raise r.refuse("parallel_attn", False, "the new Falcon decoder architecture is modelled with parallel attention")
    kv = r.get("num_kv_heads", default=heads) if new else (1 if r.get("multi_query", default=True) else heads)
    n_ln = r.get("num_ln_in_parallel_attn", default=2 if new else 1)
    h = r.need("hidden_size", "n_embed")
    return dict(num_layers=r.need("num_hidden_layers", "n_layer"), hidden=h, heads=heads, kv_heads=kv,
                ffn=r.get("ffn_hidden_size", default=4 * h), vocab=r.need("vocab_size"),
                seq_len=r.get("max_position_embeddings", default=2048),
                mlp=r.activation("activation", "gelu", gated=False), position="rotary",
                bias=bool(r.get("bias", default=False)), parallel_block=parallel,
                shared_norm=parallel and (not new or n_ln == 1),
                tied_embeddings=r.get("tie_word_embeddings", default=True),
                dropout=r.dropout(("hidden_dropout", 0.0), ("attention_dropout", 0.0)))


def _phi(r: _Reader) -> dict:
    r.require("qk_layernorm", False, False, "LayerNorms on queries and keys are not modelled")
    heads = r.need("num_attention_heads")
    return dict(num_layers=r.need("num_hidden_layers"), hidden=r.need("hidden_size"), heads=heads,
                kv_heads=r.get("num_key_value_heads", default=heads), ffn=r.need("intermediate_size"),
                vocab=r.need("vocab_size"), seq_len=r.get("max_position_embeddings", default=2048),
                mlp=r.activation("hidden_act", "gelu_new", gated=False), position="rotary",
                parallel_block=True, shared_norm=True, head_bias=True,
                tied_embeddings=r.get("tie_word_embeddings", default=False), rotary_fraction=r.rotary_fraction(0.5),
                dropout=r.dropout(("resid_pdrop", 0.0), ("embd_pdrop", 0.0), ("attention_dropout", 0.0)))


FAMILIES: dict[str, Callable[[_Reader], dict]] = {
    "gpt2": _gpt2, "bert": _bert, "opt": _opt,
    "llama": lambda r: _llama_like(r, "llama"), "mistral": lambda r: _llama_like(r, "mistral"),
    "qwen2": lambda r: _llama_like(r, "qwen2"), "gemma": lambda r: _llama_like(r, "gemma"),
    "gpt_neox": _neox, "falcon": _falcon, "phi": _phi,
}


def from_hf_config(cfg: Any, source: str, name: str) -> ModelConfig:
    """The ModelConfig of a Hugging Face config mapping; unsupported settings raise a one-line ConfigError."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{source}: expected a JSON object (a Hugging Face config.json)")
    family = cfg.get("model_type")
    if family not in FAMILIES:
        raise ConfigError(f"{source}: field 'model_type' = {family!r} is not supported; supported families: "
                          f"{', '.join(FAMILIES)}")
    r = _Reader(cfg, source)
    fields = FAMILIES[family](r)
    fields["tied_embeddings"] = bool(fields["tied_embeddings"])
    if fields.get("position") == "rotary":
        # max_position_embeddings is the longest context the model takes, not a training sequence length
        # (Mistral-Nemo's is 1,024,000): an imported rotary model trains at IMPORTED_SEQ_LEN unless told (--seq)
        fields["seq_len"] = min(int(fields["seq_len"]), IMPORTED_SEQ_LEN)
    if fields.get("kv_heads") == fields["heads"]:
        fields["kv_heads"] = None  # multi-head attention, as the zoo writes it
    if fields.get("rotary_fraction", 1.0) == 1.0:
        fields.pop("rotary_fraction", None)
    try:
        return ModelConfig(name=name, **fields)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except TypeError as exc:  # a field of the wrong JSON type, e.g. a string where a number belongs
        raise ConfigError(f"{source}: a field has the wrong type ({exc}); fix config.json") from None


def model_name(path: Path) -> str:
    """A model's default name: the file's stem, or its folder's name for a file called config.json."""
    return path.stem if path.stem != "config" else (path.resolve().parent.name or "hf-model")


def is_hf_config(data: Any) -> bool:
    """A mapping that looks like a Hugging Face config (it names a model_type) rather than our fields."""
    return isinstance(data, dict) and "model_type" in data


# ---- Mixture-of-Experts families --------------------------------------------------------------------------

def _routing(r: _Reader, experts_key: str) -> tuple[int, int]:
    """(experts, top-k) of an MoE config, refused in one line naming the config's own field when top-k is not
    between 1 and the experts."""
    experts, k = r.need(experts_key), r.need("num_experts_per_tok")
    for field, v in ((experts_key, experts), ("num_experts_per_tok", k)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise r.refuse(field, v, "an MoE config needs a positive integer here")
    if k > experts:
        raise r.refuse("num_experts_per_tok", k, f"each token picks its top-k of the {experts} experts "
                                                 f"('{experts_key}'), so k must be at most {experts}")
    return experts, k


def _moe_common(r: _Reader, out: dict, experts_key: str) -> dict:
    """The routed-expert fields every MoE family names alike."""
    experts, k = _routing(r, experts_key)
    out.update(num_experts=experts, experts_per_token=k,
               moe_ffn=int(r.get("moe_intermediate_size", default=out["ffn"])))
    return out


def _mixtral(r: _Reader) -> dict:
    out = _llama_like(r, "llama")
    out.update(bias=False, mlp_bias=None)
    if r.get("sliding_window") is not None:
        out["sliding_window"] = int(r.get("sliding_window"))
    return _moe_common(r, out, "num_local_experts")


def _dense_layers(r: _Reader, n: int, step_key: str) -> dict:
    """Qwen-MoE's dense blocks: ``mlp_only_layers`` must be empty and the sparse step 1 or every block's index
    grid, which ``moe_layer_freq`` expresses (block i is MoE when (i + 1) % step == 0 in transformers)."""
    only = r.get("mlp_only_layers", default=[]) or []
    if only:
        raise r.refuse("mlp_only_layers", only, "dense blocks at listed positions are not modelled (only the "
                                                "first k blocks, or a regular grid)")
    step = int(r.get(step_key, default=1))
    if step != 1:
        raise r.refuse(step_key, step, "only every block being an MoE block (1) is modelled for this family")
    return {}


def _qwen_moe(r: _Reader, family: str) -> dict:
    out = _llama_like(r, "qwen2" if family == "qwen2_moe" else "llama")
    if family == "qwen3_moe":
        out.update(bias=bool(r.get("attention_bias", default=False)), mlp_bias=None, qk_norm=True)
        if r.get("use_sliding_window", default=False):
            raise r.refuse("use_sliding_window", True, "Qwen3-MoE's windowed layers are not modelled")
        out.pop("sliding_window", None)
    _moe_common(r, out, "num_experts")
    _dense_layers(r, out["num_layers"], "decoder_sparse_step")
    shared = int(r.get("shared_expert_intermediate_size", default=0) or 0)
    if shared:
        out.update(shared_experts=1, shared_ffn=shared, shared_expert_gate=True)
    return out


def _deepseek_v3(r: _Reader) -> dict:
    h, heads = r.need("hidden_size"), r.need("num_attention_heads")
    if r.get("moe_layer_freq", default=1) != 1:
        raise r.refuse("moe_layer_freq", r.get("moe_layer_freq"), "only every block after the dense ones is MoE")
    _routing(r, "n_routed_experts")
    scoring = r.get("scoring_func", default="sigmoid")
    if scoring not in ("softmax", "sigmoid"):
        raise r.refuse("scoring_func", scoring, "routers score with softmax or sigmoid")
    out = dict(num_layers=r.need("num_hidden_layers"), hidden=h, heads=heads,
               kv_heads=r.get("num_key_value_heads", default=heads), ffn=r.need("intermediate_size"),
               vocab=r.need("vocab_size"), seq_len=r.need("max_position_embeddings"), norm="rmsnorm",
               mlp=r.activation("hidden_act", "silu", gated=True), position="rotary",
               tied_embeddings=r.get("tie_word_embeddings", default=False), bias=bool(r.get("attention_bias",
                                                                                           default=False)),
               mlp_bias=False, dropout=r.dropout(("attention_dropout", 0.0)), max_tp=heads,
               num_experts=int(r.need("n_routed_experts")), experts_per_token=int(r.need("num_experts_per_tok")),
               moe_ffn=int(r.need("moe_intermediate_size")), shared_experts=int(r.get("n_shared_experts", default=0)),
               first_dense_layers=int(r.get("first_k_dense_replace", default=0)), router_scoring=scoring,
               q_lora_rank=int(r.get("q_lora_rank", default=0) or 0), kv_lora_rank=int(r.need("kv_lora_rank")),
               qk_nope_head_dim=int(r.need("qk_nope_head_dim")), qk_rope_head_dim=int(r.need("qk_rope_head_dim")),
               v_head_dim=int(r.need("v_head_dim")), mtp_layers=int(r.get("num_nextn_predict_layers", default=0)))
    return out


def _gpt_oss(r: _Reader) -> dict:
    out = _llama_like(r, "llama")
    types = r.get("layer_types") or []
    period = 0
    if types:
        windowed = [i for i, t in enumerate(types) if t == "sliding_attention"]
        if windowed and windowed != list(range(0, len(types), 2)):
            raise r.refuse("layer_types", sorted(set(types)), "only alternating windowed (even) and full blocks are "
                                                             "modelled")
        period = 2 if windowed else 0
    out.update(bias=bool(r.get("attention_bias", default=True)), mlp_bias=None, attention_sinks=True,
               sliding_window=int(r.get("sliding_window", default=128)) if period else None,
               sliding_window_period=period, router_bias=True, expert_bias=True)
    return _moe_common(r, out, "num_local_experts")


FAMILIES.update({
    "mixtral": _mixtral, "qwen2_moe": lambda r: _qwen_moe(r, "qwen2_moe"),
    "qwen3_moe": lambda r: _qwen_moe(r, "qwen3_moe"), "deepseek_v3": _deepseek_v3, "gpt_oss": _gpt_oss,
})
