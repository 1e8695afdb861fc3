"""Memory of one layer on one device: parameters, gradients, optimizer state, stashed activations.

Activations follow Korthikanti et al. 2022 (arXiv 2205.05198, sec. 4, eq. 1-6), tensor by tensor, so for
a GPT block (MHA, GELU, ffn = 4h, dropout) they reduce to the paper's closed forms (bytes, per microbatch):
  none:            s*b*h*(10 + 24/t + 5*a*s/(h*t))     sequence parallel:      s*b*h/t*(34 + 5*a*s/h)
  selective:       s*b*h*(10 + 24/t)                   SP + selective:         34*s*b*h/t
  full:            2*s*b*h  (/t with SP: only the layer input is kept)
and generalise: no dropout drops the masks (and the dropout output), SwiGLU keeps gate and up, GQA
keeps smaller K and V.
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.errors import ConfigError
from phaze.workload.config import ADAM_GRAD_BYTES, ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import LAYERS, check_setting
from phaze.workload.traced import TracedModel, traced_activation_bytes

# bytes per parameter: (weight, gradient, optimizer state)
# adam: fp16 weight, fp32 main grad, fp32 master copy + m + v (Megatron mixed precision: 18 B/param,
# which reproduces Korthikanti et al. Fig. 1); sgd: the Phaze reference (fp16 weight and grad, no state).
OPTIMIZERS: dict[str, tuple[int, int, int]] = {"adam": (2, 4, 12), "sgd": (2, 2, 0)}
# Adam's gradient bytes per parameter by the setting's ``grad_dtype``: ADAM_GRAD_BYTES, kept beside GRAD_DTYPES in
# phaze.workload.config (the layer graphs read it too) and imported here.
# Adam's state bytes per parameter by the setting's ``optimizer_state`` (phaze.workload.config.OPTIMIZER_STATES):
# "fp32" 4 (master) + 4 (m) + 4 (v), the OPTIMIZERS entry above. The other three are Apex's
# DistributedFusedAdam (NeMo 1.x's ``distributed_fused_adam``) as NeMo sets it up: ``dtype`` is "datatype for
# optimizer state" (default fp32), and NeMo decides whether the optimizer keeps a master copy
# (nemo/collections/nlp/models/language_modeling/megatron_base_model.py ``setup_optimization``, github NVIDIA/NeMo
# at 46aa1ee, Sep 2024): with ``fp8_params`` store_params (a copy in the state dtype); else with the state
# dtype equal to the model's no copy; else, fp32 state and a bf16 model, ``store_param_remainders`` (Apex:
# "store bits required to reconstruct FP32 params", the 16 bits a bf16 weight lacks). Hence
# "fp32-remainders" 8 + 2, "bf16-master" 2 + 2 + 2, "bf16" 2 + 2.
ADAM_STATE_BYTES: dict[str, int] = {"fp32": 12, "fp32-remainders": 10, "bf16-master": 6, "bf16": 4}
# FP8 weights per parameter: Transformer Engine with FP8 parameters (NeMo's ``fp8_params=True``, as its H100
# recipes set: github NVIDIA/dgxc-benchmarking llama3.1/configure.sh) keeps each linear weight as an FP8
# tensor plus its FP8 transpose (Hopper's FP8 GEMMs take both operands K-major), 1 byte each, instead of the
# 16-bit weight; the fp32 master copy stays in the optimizer state.
FP8_WEIGHT_BYTES = 2


@dataclass(frozen=True)
class LayerMemory:
    """Per-device memory of one layer. ``activation_bytes`` is kept per microbatch for the backward;
    ``tied_params`` are also counted in the embedding layer (subtract them if both sit on one stage);
    ``recompute_working_bytes`` is held transiently, beyond the stash, while this layer runs: the tensors its
    backward re-materialises, and for the head the 16-bit logits beside their fp32 copy
    (``head_transient_bytes``)."""

    params: int
    weight_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    activation_bytes: int
    boundary_fwd_bytes: int
    boundary_bwd_bytes: int
    tied_params: int = 0
    recompute_working_bytes: int = 0
    # what ZeRO-1 (the distributed optimizer) divides over the d x cp data-parallel ranks, relative to the
    # state: 1, except an MoE block's routed experts, whose state is sharded over the expert-data-parallel
    # group (d x cp x t / (ep x etp) ranks, Megatron-Core), i.e. (ep x etp / t) times its local share over d x cp
    zero1_scale: float = 1.0

    @property
    def static_bytes(self) -> int:
        """Weights + gradients + optimizer state."""
        return self.weight_bytes + self.grad_bytes + self.optimizer_bytes


def _norm_params(model: ModelConfig) -> int:
    return 2 * model.hidden if model.norm == "layernorm" else model.hidden


def layer_params(model: ModelConfig, layer: str, tp: int = 1, vocab: int | None = None) -> int:
    """Parameters of one layer on one of ``tp`` devices (Megatron sharding; norms, row-parallel biases and
    positions replicated). ``vocab`` defaults to the padded vocabulary for ``tp``."""
    h = model.hidden
    v = model.padded_vocab(tp) if vocab is None else vocab
    width = model.embed_proj_dim or h
    if layer in ("block", "dense_block"):
        return block_params(model, tp, moe=model.is_moe and layer == "block")
    if layer == "embedding":
        n = -(-v // tp) * width
        if model.position == "learned":  # OPT keeps extra_positions rows it never reads
            n += (model.seq_len + model.extra_positions) * h + (2 * h if model.arch == "encoder" else 0)  # BERT: 2 token types
        if model.arch == "encoder":
            n += _norm_params(model)
        if model.embed_proj_dim:
            n += width * h  # OPT project_in (no bias)
        return n
    if layer == "head":
        # final/MLM norm + LM head (a copy, if tied) + its bias (BERT's MLM output bias, Phi's head bias)
        n = _norm_params(model) * (model.final_norm or model.arch == "encoder") + -(-v // tp) * width
        n += model.has_bias("head") * -(-v // tp)
        if model.arch == "encoder":
            n += h * h + model.bias * h  # BERT MLM transform dense
        if model.embed_proj_dim:
            n += h * width  # OPT project_out (no bias)
        return n
    raise ConfigError(f"unknown layer kind {layer!r}; use one of {', '.join(LAYERS)}")


def _attention_params(model: ModelConfig) -> tuple[int, int]:
    """(tensor-parallel sharded, replicated) parameters of a block's attention, norms excluded."""
    h = model.hidden
    if model.mla:  # DeepSeek-V2/V3: down projections and latent norms replicated, up projections sharded
        nope, rope, v, a = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim, model.heads
        ql, kvl = model.q_lora_rank, model.kv_lora_rank
        q_up = (ql if ql else h) * a * (nope + rope)
        replicated = (h * ql + ql if ql else 0) + h * (kvl + rope) + kvl
        sharded = q_up + kvl * a * (nope + v) + a * v * h + (a if model.attention_sinks else 0)
        return sharded, replicated + model.has_bias("out") * h
    qkv = (model.heads + 2 * model.num_kv_heads) * model.head_dim
    sharded = h * qkv + model.heads * model.head_dim * h + model.has_bias("qkv") * qkv
    sharded += model.heads if model.attention_sinks else 0  # GPT-OSS: one sink logit per head
    qk_norm = 2 * model.head_dim if model.qk_norm else 0  # Qwen3's per-head query and key norms (replicated)
    return sharded, model.has_bias("out") * h + qk_norm  # the row-parallel output bias is replicated


def _dense_mlp_params(model: ModelConfig, f: int) -> tuple[int, int]:
    """(sharded, replicated) parameters of a dense MLP of intermediate width ``f``."""
    h = model.hidden
    fc1 = 2 * f if model.gated_mlp else f
    return h * fc1 + f * h + model.has_bias("mlp") * fc1, model.has_bias("mlp") * h


def expert_params(model: ModelConfig) -> int:
    """Parameters of one routed expert (a gated MLP of moe_ffn; GPT-OSS adds biases)."""
    f, h = model.moe_ffn or 0, model.hidden
    fc1 = 2 * f if model.gated_mlp else f
    return h * fc1 + f * h + (fc1 + h if model.expert_bias else 0)


def block_params(model: ModelConfig, tp: int = 1, moe: bool = False, ep: int = 1, etp: int = 1) -> int:
    """Parameters of one block on one device: attention and shared experts sharded over ``tp``, routed
    experts over ``ep`` x ``etp`` (Megatron-Core), the router, norms and row-parallel biases replicated."""
    a_sh, a_rep = _attention_params(model)
    norms = model.block_norms * _norm_params(model)
    if not moe:
        m_sh, m_rep = _dense_mlp_params(model, model.ffn)
        return (a_sh + m_sh) // tp + a_rep + m_rep + norms
    s_sh, s_rep = _dense_mlp_params(model, model.shared_expert_ffn) if model.shared_experts else (0, 0)
    router = model.hidden * model.num_experts + (model.num_experts if model.router_bias else 0)
    gate = model.hidden if getattr(model, "shared_expert_gate", False) else 0
    experts = model.num_experts * expert_params(model) // (ep * etp)
    return (a_sh + s_sh) // tp + a_rep + s_rep + router + gate + experts + norms


def param_count(model: ModelConfig) -> int:
    """Whole-model parameters, unsharded, unpadded vocabulary, tied embeddings counted once.
    BERT counts the MLM head (dense, norm, output bias) but not the pooler/NSP head."""
    if isinstance(model, TracedModel):
        return model.total_params
    tied = model.vocab * (model.embed_proj_dim or model.hidden) if model.tied_embeddings else 0
    moe = model.num_moe_layers if model.is_moe else 0
    blocks = moe * block_params(model, moe=True) + (model.num_layers - moe) * block_params(model)
    return layer_params(model, "embedding", 1, model.vocab) + blocks + layer_params(model, "head", 1, model.vocab) - tied


def active_param_count(model: ModelConfig) -> int:
    """Parameters one token uses: the routed experts counted experts_per_token times, not num_experts."""
    if not getattr(model, "is_moe", False):
        return param_count(model)
    unused = (model.num_experts - model.experts_per_token) * expert_params(model)
    return param_count(model) - model.num_moe_layers * unused


def activation_terms(model: ModelConfig, setting: TrainSetting, layer: str) -> dict[str, int]:
    """Tensors kept for the backward (bytes per microbatch per device) before recompute is applied."""
    b, s, h, t, e = setting.microbatch_size, setting.local_seq_len, model.hidden, setting.tp, setting.bytes_per_element
    sl = s // t if setting.sequence_parallel and t > 1 else s  # replicated region, sharded by SP
    drop, width = model.dropout, model.embed_proj_dim or h
    if layer == "embedding":
        terms = {"token_ids": 8 * b * s}  # int64 ids for the gather backward
        if model.embed_proj_dim:
            terms["project_in.input"] = e * b * sl * width
        if model.arch == "encoder":
            terms["embed_norm.input"] = e * b * sl * h
        if drop:
            terms["embed_dropout.mask"] = b * sl * h
        return terms
    if layer == "head":
        terms = {}
        if model.arch == "encoder":
            terms.update({"mlm_dense.input": e * b * sl * h, "mlm_gelu.input": e * b * sl * h})
        if model.final_norm or model.arch == "encoder":
            terms["norm.input"] = e * b * sl * h
        if model.embed_proj_dim:
            terms["project_out.input"] = e * b * sl * h
        terms["lm_head.input"] = e * b * sl * width  # with SP the shard is kept and re-gathered
        terms["cross_entropy.softmax"] = 4 * b * s * (model.padded_vocab(t) // t)  # fp32 (Korthikanti 4sbv/t)
        return terms
    a, g, d, f = model.heads // t, model.num_kv_heads // t, model.head_dim, model.ffn // t
    kv = model.attended_keys(s)
    # FP8 (Transformer Engine): the inputs of the linear layers are saved for the backward as FP8 casts
    le = setting.linear_bytes_per_element
    terms = {"norm1.input": e * b * sl * h, "qkv.input": le * b * sl * h,
             "q,k": e * b * s * (a + g) * d, "v": e * b * s * g * d}
    if model.mla:  # the latents and their norms' inputs, the up projections' inputs, per-head q, k, v
        ql, kvl, dv = model.q_lora_rank, model.kv_lora_rank, model.v_head_dim
        terms.update({"q,k": e * b * s * 2 * a * d, "v": e * b * s * a * dv,
                      "kv_norm.input": e * b * s * kvl, "kv_up.input": le * b * s * kvl})
        if ql:
            terms.update({"q_norm.input": e * b * s * ql, "q_up.input": le * b * s * ql})
    if setting.attention == "flash":
        # the kernel keeps no score matrix: only the fp32 log-sum-exp per query row for its backward
        # (FlashAttention-2, Algorithm 1 output L); the dropout mask is regenerated from the RNG state
        terms["flash.logsumexp"] = 4 * b * a * s
    else:
        terms["softmax.output"] = e * b * a * s * kv
        if drop:
            terms.update({"attn_dropout.mask": b * a * s * kv, "attn_dropout.output": e * b * a * s * kv})
    terms["out_proj.input"] = le * b * s * a * (model.v_head_dim if model.mla else d)
    if not model.parallel_block:  # a parallel block's norm2 reads the block input, kept once as norm1.input
        terms["norm2.input"] = e * b * sl * h
    if layer == "block" and model.is_moe:
        terms.update(moe_activation_terms(model, setting))
    else:
        if not model.shared_norm:  # a shared norm feeds FC1 the tensor kept as qkv.input
            terms["fc1.input"] = le * b * sl * h
        terms.update({"fc1.output": e * b * s * (2 * f if model.gated_mlp else f), "fc2.input": le * b * s * f})
    if drop:
        terms.update({"attn_residual.mask": b * sl * h, "mlp_residual.mask": b * sl * h})
    return terms


def moe_activation_terms(model: ModelConfig, setting: TrainSetting) -> dict[str, int]:
    """What an MoE layer keeps for its backward (bytes per microbatch per device): the router's input and its
    fp32 scores, the permuted tokens the experts read (their expert_fc1 input), the experts' FC1 output and
    FC2 input, the expert outputs the unpermute weighs, and the shared experts' tensors as a dense MLP's."""
    from phaze.workload.graphs import moe_tokens

    b, s, h, t, e = setting.microbatch_size, setting.local_seq_len, model.hidden, setting.tp, setting.bytes_per_element
    le = setting.linear_bytes_per_element
    tokens, assigned, _ = moe_tokens(model, setting)
    fm = model.moe_ffn // setting.etp
    terms = {"router.input": e * tokens * h, "router.scores": 4 * tokens * model.num_experts,
             "expert_fc1.input": le * assigned * h,
             "expert_fc1.output": e * assigned * (2 * fm if model.gated_mlp else fm),
             "expert_fc2.input": le * assigned * fm,
             "moe_unpermute.input": e * tokens * model.experts_per_token * h}
    if model.shared_experts:
        fs = model.shared_expert_ffn // t
        terms.update({"shared_fc1.input": le * tokens * h,
                      "shared_fc1.output": e * b * s * (2 * fs if model.gated_mlp else fs),
                      "shared_fc2.input": le * b * s * fs})
    return terms


def head_transient_bytes(model: ModelConfig, setting: TrainSetting) -> int:
    """Bytes the LM head holds beyond its stash while it runs: its 16-bit logits (e B per logit of the device's
    vocabulary shard). The loss casts them to the fp32 copy it keeps (``cross_entropy.softmax``), and both
    live until the forward returns (Megatron-Core ``GPTModel.forward`` keeps ``logits`` while
    ``vocab_parallel_cross_entropy`` runs on ``logits.float()``); in the backward the fp32 gradient (written
    over the softmax) is cast back to 16 bit for the LM-head GEMMs, again e B beside 4 B."""
    b, s, t = setting.microbatch_size, setting.local_seq_len, setting.tp
    return setting.bytes_per_element * b * s * (model.padded_vocab(t) // t)


def bytes_per_param(optimizer: str, setting: TrainSetting) -> tuple[int, int, int]:
    """(weight, gradient, optimizer state) bytes per parameter: ``OPTIMIZERS``, with Adam's gradient at the
    setting's ``grad_dtype`` (``ADAM_GRAD_BYTES``) and its state at the setting's ``optimizer_state``
    (``ADAM_STATE_BYTES``). "sgd" (the Phaze reference, 16-bit everything, no state) ignores both."""
    wb, gb, ob = OPTIMIZERS[optimizer]
    if optimizer == "adam":
        gb = ADAM_GRAD_BYTES[setting.grad_dtype]
        ob = ADAM_STATE_BYTES[setting.optimizer_state]
    return wb, gb, ob


def layer_memory(model: ModelConfig, setting: TrainSetting, layer: str, optimizer: str = "adam") -> LayerMemory:
    """Per-device memory of ``layer`` under ``setting`` (see module docstring for the activation model).
    Gradients at ``bytes_per_param``: Adam's 4 B fp32 main grad, 2 B with ``setting.grad_dtype`` "bf16";
    SGD's 2 B either way."""
    if optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {optimizer!r}; use one of {', '.join(OPTIMIZERS)}")
    if layer not in LAYERS and not (layer == "dense_block" and getattr(model, "is_moe", False)):
        raise ConfigError(f"unknown layer kind {layer!r}; use one of {', '.join(LAYERS)}")
    check_setting(model, setting)
    if isinstance(model, TracedModel):
        return _traced_memory(model, setting, layer, optimizer)
    t = setting.tp
    params = layer_params(model, layer, t)
    zero1_scale = 1.0
    if layer == "block" and model.is_moe:
        params = block_params(model, t, moe=True, ep=setting.ep, etp=setting.etp)
        experts = model.num_experts * expert_params(model) // (setting.ep * setting.etp)
        zero1_scale = (params - experts + experts * setting.ep * setting.etp / t) / params
    wb, gb, ob = bytes_per_param(optimizer, setting)
    if layer in ("block", "dense_block") and setting.precision == "fp8":
        wb = FP8_WEIGHT_BYTES  # the FP8 weight and its transpose replace the 16-bit weight
    terms = activation_terms(model, setting, layer)
    kept = total = sum(terms.values())
    if layer in ("block", "dense_block") and setting.recompute == "selective":
        from phaze.workload.recompute_modules import freed_terms
        kept = total - sum(terms.get(k, 0) for k in freed_terms(setting.runtime.recompute_modules))
    elif layer in ("block", "dense_block") and setting.recompute == "full":
        kept = terms["norm1.input"]  # only the layer input (Korthikanti et al. 2022, sec. 4.3: 2sbh)
    sl = setting.local_seq_len // t if setting.sequence_parallel and t > 1 else setting.local_seq_len
    boundary = setting.bytes_per_element * setting.microbatch_size * sl * model.hidden
    tied = -(-model.padded_vocab(t) // t) * (model.embed_proj_dim or model.hidden)
    return LayerMemory(
        params=params, weight_bytes=wb * params, grad_bytes=gb * params, optimizer_bytes=ob * params,
        activation_bytes=kept,
        boundary_fwd_bytes=0 if layer == "head" else boundary,
        boundary_bwd_bytes=0 if layer == "embedding" else boundary,
        tied_params=tied if layer == "head" and model.tied_embeddings else 0,
        recompute_working_bytes=total - kept + (head_transient_bytes(model, setting) if layer == "head" else 0),
        zero1_scale=zero1_scale,
    )


def _traced_memory(model: TracedModel, setting: TrainSetting, layer: str, optimizer: str) -> LayerMemory:
    """A traced layer's memory (``phaze.workload.traced``): its parameters at the optimizer's bytes per
    parameter, the tensors its backward reads, and one block's output as the pipeline boundary."""
    lay = model.layer(layer)
    wb, gb, ob = bytes_per_param(optimizer, setting)
    kept, total = traced_activation_bytes(model, setting, layer)
    return LayerMemory(
        params=lay.params, weight_bytes=wb * lay.params, grad_bytes=gb * lay.params, optimizer_bytes=ob * lay.params,
        activation_bytes=kept, boundary_fwd_bytes=0 if layer == "head" else model.boundary_bytes,
        boundary_bwd_bytes=0 if layer == "embedding" else model.boundary_bytes, tied_params=lay.tied_params,
        recompute_working_bytes=total - kept)
