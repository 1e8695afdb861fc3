"""Operator graphs of one layer (embedding, transformer block, head), Megatron tensor-parallel sharded.

Forward GEMM FLOPs of one block per device (t = setting.tp, d = head_dim, a heads, g kv heads, f ffn):
    2*b*s*h*(a + 2g)*d / t          QKV (column-parallel)
  + 4*b*s*k*a*d / t                 scores Q K^T and probs V (batched; k = s keys, or the sliding window)
  + 2*b*s*a*d*h / t                 attention output (row-parallel)
  + 2*b*s*h*f*m / t                 FC1 (m = 2 for SwiGLU/GeGLU's gate+up, 1 for GELU/ReLU) and FC2 (m = 1)
    ... i.e. 24*b*s*h^2 + 4*b*s^2*h for GPT with MHA and f = 4h, t = 1 (Narayanan et al. 2021).
A parallel block (GPT-NeoX, Falcon, Phi) has the same ops; its MLP reads the block input, not the
attention residual.
Vector ops (norms, softmax, activations, dropout) are counted separately (see vector_kinds).
"""
from __future__ import annotations

import math
from functools import lru_cache

from phaze.errors import ConfigError
from phaze.workload.autodiff import ForwardBuilder, Node, backward
from phaze.workload.config import ADAM_GRAD_BYTES, DIRECTIONS, LAYER_KINDS, ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.ops import Collective, Gemm, LayerGraph
from phaze.workload.traced import TracedModel, traced_layer_graph
from phaze.workload.vector_kinds import vector_op

LAYERS = LAYER_KINDS
# What selective recompute re-runs: phaze.workload.recompute_modules (by default the attention core only,
# Korthikanti et al. 2022, sec. 5).
# Flash attention (one fused kernel; softmax and dropout inside it) as its two GEMM halves, so the FLOPs are
# exact: forward S = Q K^T and O = P V over the keys the causal mask leaves; the backward recomputes S
# (the kernel never stores it) and computes dQ, dK, dP, dV: 5 GEMMs, i.e. 2.5x the forward (Dao et al.,
# FlashAttention-2, 2023, sec. 3.1 and its benchmark's FLOP count). The cost model times these GEMMs as
# compute inside one kernel (``phaze.cost.gpu``): the score tile never reaches HBM.
FLASH_OPS = ("flash_scores", "flash_pv")


def flash_keys(model: ModelConfig, seq_len: int) -> int:
    """Keys a query is scored against on average in a flash kernel: a decoder's causal mask leaves query i
    its i + 1 preceding keys (at most the sliding window), which the kernel skips block-wise; an encoder
    attends to every key."""
    s = seq_len
    if model.arch == "encoder":
        return model.attended_keys(s)
    w = min(s, model.sliding_window) if model.sliding_window else s
    # mean over i = 0..s-1 of min(i + 1, w) = w - w(w-1)/(2s)
    keys = max(1, -(-(w * s - w * (w - 1) // 2) // s))
    f = getattr(model, "windowed_fraction", 1.0) if model.sliding_window else 1.0
    if f < 1.0:  # GPT-OSS: the mean over its windowed and full blocks
        full = max(1, -(-(s * s - s * (s - 1) // 2) // s))
        keys = round(f * keys + (1 - f) * full)
    return keys


def cp_ring_bytes(model: ModelConfig, setting: TrainSetting, direction: str) -> int:
    """Bytes one device sends around the context-parallel ring in a block: cp - 1 steps, each passing the
    K and V chunk it holds to the next device (Liu et al., Ring Attention, 2023; Megatron-LM context
    parallelism); the backward passes K and V again plus their gradients. 0 without CP."""
    if setting.cp <= 1:
        return 0
    b, s, e = setting.microbatch_size, setting.local_seq_len, setting.bytes_per_element
    chunk = 2 * e * b * s * (model.num_kv_heads // setting.tp) * model.head_dim
    return (setting.cp - 1) * chunk * (2 if direction == "bwd" else 1)


def block_forward_gemm_flops(model: ModelConfig, setting: TrainSetting) -> int:
    """Closed form of the block's forward GEMM FLOPs per device (module docstring)."""
    b, s, h, t, d = setting.microbatch_size, setting.local_seq_len, model.hidden, setting.tp, model.head_dim
    a, g, f, k = model.heads, model.num_kv_heads, model.ffn, model.attended_keys(s)
    if setting.attention == "flash":
        k = flash_keys(model, setting.seq_len)
    m = 2 if model.gated_mlp else 1
    return (2 * b * s * h * (a + 2 * g) * d + 4 * b * s * k * a * d + 2 * b * s * a * d * h
            + 2 * b * s * h * f * m + 2 * b * s * f * h) // t


def check_setting(model: ModelConfig, setting: TrainSetting) -> None:
    """Raise ConfigError if ``setting`` cannot run ``model`` (TP width, learned-position length)."""
    setting.check_model(model)
    if isinstance(model, TracedModel):
        return
    check_moe_setting(model, setting)
    if model.position == "learned" and setting.seq_len > model.seq_len:
        raise ConfigError(f"seq_len {setting.seq_len} exceeds the {model.seq_len} learned positions of "
                          f"{model.name}; use seq_len <= {model.seq_len}")


def check_moe_setting(model: ModelConfig, setting: TrainSetting) -> None:
    """Expert parallelism must split the experts and the expert tensor parallelism their FFN; an MoE model with
    TP needs sequence parallelism (Megatron-Core's MoE layer runs on the sequence shard)."""
    if not model.is_moe:
        if setting.ep > 1 or setting.etp > 1:
            raise ConfigError(f"--ep / --etp: {model.name} is a dense model (no experts); drop them")
        return
    if model.num_experts % setting.ep:
        raise ConfigError(f"--ep {setting.ep} must divide the {model.num_experts} experts of {model.name}")
    if model.moe_ffn % setting.etp:
        raise ConfigError(f"--etp {setting.etp} must divide the experts' intermediate size {model.moe_ffn}")
    if setting.tp > 1 and not setting.sequence_parallel:
        raise ConfigError(f"{model.name} is an MoE model: tensor parallelism {setting.tp} needs --sequence-parallel "
                          f"(Megatron-Core's MoE layer runs on the sequence shard)")


def _tp_out(fb: ForwardBuilder, name: str, dep: int, nbytes: int, setting: TrainSetting) -> int:
    """Megatron's g after a row-parallel GEMM: all_reduce, or reduce_scatter with SP; nothing at t=1."""
    if setting.tp == 1:
        return dep
    kind = "reduce_scatter" if setting.sequence_parallel else "all_reduce"
    return fb.add(Collective(f"{name}.{kind}", kind, nbytes, setting.tp), "collective", (dep,))


def _sp_in(fb: ForwardBuilder, name: str, dep: int | None, nbytes: int, setting: TrainSetting) -> int | None:
    """With SP, the all_gather of the sequence shards before a column-parallel GEMM."""
    if setting.tp == 1 or not setting.sequence_parallel:
        return dep
    return fb.add(Collective(f"{name}.all_gather", "all_gather", nbytes, setting.tp), "collective", (dep,))


def _dims(model: ModelConfig, setting: TrainSetting) -> tuple[int, int, int, int, int, int]:
    """(microbatch b, sequence s, hidden h, TP width t, bytes per element e, sl): sl = the sequence rows a
    device holds outside the TP region (s / t with sequence parallelism, else s)."""
    b, s, t = setting.microbatch_size, setting.local_seq_len, setting.tp  # this device's tokens (CP shard)
    sl = s // t if setting.sequence_parallel and t > 1 else s
    return b, s, model.hidden, t, setting.bytes_per_element, sl


def block_nodes(model: ModelConfig, setting: TrainSetting, moe: bool | None = None) -> list[Node]:
    """Forward nodes of one transformer block (pre-norm; post-norm BERT has the same ops): its attention
    (``_attention_nodes``), then its MLP (``_mlp_nodes``: dense, or with ``moe`` the experts; default: an MoE
    block for an MoE model). In a parallel block the MLP's norm reads the block input (or the MLP shares the
    attention's norm)."""
    fb = ForwardBuilder()
    x1, r1 = _attention_nodes(fb, model, setting)
    _mlp_nodes(fb, model, setting, x1, r1, model.is_moe if moe is None else moe)
    return fb.nodes


def _attention_nodes(fb: ForwardBuilder, model: ModelConfig, setting: TrainSetting) -> tuple[int | None, int]:
    """Norm, QKV (or MLA's latent projections), the attention core, the output projection and the residual;
    returns (the gathered norm output, the residual)."""
    b, s, h, t, e, sl = _dims(model, setting)
    a, g, d = model.heads // t, model.num_kv_heads // t, model.head_dim
    kv = model.attended_keys(s)
    norm, full = model.norm, e * b * s * h
    le = setting.linear_bytes_per_element  # the linear layers' GEMM operands (1 B in FP8)
    n1 = fb.add(vector_op("norm1", norm, b * sl * h), "vector", (None,))
    x1 = _sp_in(fb, "qkv", n1, full, setting)
    if model.mla:
        qkv, qk, dqk, dv = _mla_projections(fb, model, setting, x1)
    else:
        qkv = fb.add(Gemm("qkv", 1, b * s, (a + 2 * g) * d, h, le), "weight_gemm", (x1,), column_parallel=True)
        qk, dqk, dv = qkv, d, d
        if model.position == "rotary":
            rot = round(b * s * (a + g) * d * model.rotary_fraction)
            qk = fb.add(vector_op("rotary", "rotary", rot), "vector", (qkv,))
    if setting.attention == "flash":
        # CP: this device's queries against the whole sequence's keys (the K/V ring exchange is costed by
        # ``cp_ring_bytes`` in the time model)
        kf = flash_keys(model, setting.seq_len)
        sc = fb.add(Gemm("flash_scores", b * a, s, kf, dqk, e), "act_gemm", (qk, qk), operands=("q", "k"))
        av = fb.add(Gemm("flash_pv", b * a, s, dv, kf, e), "act_gemm", (sc, qkv), operands=("probs", "v"))
    else:
        sc = fb.add(Gemm("attn_scores", b * a, s, kv, dqk, e), "act_gemm", (qk, qk), operands=("q", "k"))
        p = fb.add(vector_op("softmax", "softmax", b * a * s * kv), "vector", (sc,))
        if model.dropout:
            p = fb.add(vector_op("attn_dropout", "dropout", b * a * s * kv), "vector", (p,))
        av = fb.add(Gemm("attn_v", b * a, s, dv, kv, e), "act_gemm", (p, qkv), operands=("probs", "v"))
    o = fb.add(Gemm("out_proj", 1, b * s, h, a * dv, le), "weight_gemm", (av,))
    o = _tp_out(fb, "attn", o, full, setting)
    res = "dropout_add" if model.dropout else "add"
    r1 = fb.add(vector_op("attn_residual", res, b * sl * h), "vector", (o, None))
    return x1, r1


def _mla_projections(fb: ForwardBuilder, model: ModelConfig, setting: TrainSetting, x1):
    """Multi-head latent attention's projections (DeepSeek-V2 sec. 2.1; Megatron-Core MLA): the query through
    its low-rank latent (q_lora_rank; a plain projection at 0), keys and values from one shared latent of
    kv_lora_rank plus a rope key shared by the heads. The down projections are replicated over the TP group
    (each rank runs them on the gathered sequence), the up projections column-parallel. Returns (the value
    producer, the query/key producer, the query/key head dim, the value head dim)."""
    b, s, h, t, e, sl = _dims(model, setting)
    a = model.heads // t
    nope, rope, dv = model.qk_nope_head_dim, model.qk_rope_head_dim, model.v_head_dim
    le = setting.linear_bytes_per_element
    if model.q_lora_rank:
        qa = fb.add(Gemm("q_down_proj", 1, b * s, model.q_lora_rank, h, le), "weight_gemm", (x1,),
                     column_parallel=True)
        qa = fb.add(vector_op("q_norm", model.norm, b * s * model.q_lora_rank), "vector", (qa,))
        q = fb.add(Gemm("q_up_proj", 1, b * s, a * (nope + rope), model.q_lora_rank, le), "weight_gemm", (qa,),
                   column_parallel=True)
    else:
        q = fb.add(Gemm("q_proj", 1, b * s, a * (nope + rope), h, le), "weight_gemm", (x1,), column_parallel=True)
    kva = fb.add(Gemm("kv_down_proj", 1, b * s, model.kv_lora_rank + rope, h, le), "weight_gemm", (x1,),
                  column_parallel=True)
    kvn = fb.add(vector_op("kv_norm", model.norm, b * s * model.kv_lora_rank), "vector", (kva,))
    kvu = fb.add(Gemm("kv_up_proj", 1, b * s, a * (nope + dv), model.kv_lora_rank, le), "weight_gemm", (kvn,),
                  column_parallel=True)
    qk = fb.add(vector_op("rotary", "rotary", b * s * (a + 1) * rope), "vector", (q, kva))
    return kvu, qk, nope + rope, dv


def _mlp_nodes(fb: ForwardBuilder, model: ModelConfig, setting: TrainSetting, x1, r1: int, moe: bool) -> None:
    """The MLP half of a block: norm, then the dense MLP or the MoE layer, and the residual."""
    b, s, h, t, e, sl = _dims(model, setting)
    full = e * b * s * h
    if model.shared_norm:
        n2 = x2 = x1
    else:
        n2 = fb.add(vector_op("norm2", model.norm, b * sl * h), "vector", (None if model.parallel_block else r1,))
        x2 = None if moe else _sp_in(fb, "fc1", n2, full, setting)
    out = _moe_nodes(fb, model, setting, n2) if moe else _dense_mlp(fb, model, setting, x2, "", model.ffn // t)
    res = "dropout_add" if model.dropout else "add"
    fb.add(vector_op("mlp_residual", res, b * sl * h), "vector", (out, r1))


def _dense_mlp(fb: ForwardBuilder, model: ModelConfig, setting: TrainSetting, x2, prefix: str, f: int) -> int:
    """FC1 (column-parallel; gate + up when gated), the activation, FC2 (row-parallel) and its TP reduction;
    ``f`` the device's share of the intermediate width."""
    b, s, h, t, e, sl = _dims(model, setting)
    le = setting.linear_bytes_per_element
    width = 2 * f if model.gated_mlp else f
    h1 = fb.add(Gemm(prefix + "fc1", 1, b * s, width, h, le), "weight_gemm", (x2,), column_parallel=True)
    act = fb.add(vector_op(prefix + model.mlp, model.mlp, b * s * f), "vector", (h1,))
    h2 = fb.add(Gemm(prefix + "fc2", 1, b * s, h, f, le), "weight_gemm", (act,))
    return _tp_out(fb, prefix + "mlp", h2, e * b * s * h, setting)


def moe_tokens(model: ModelConfig, setting: TrainSetting) -> tuple[int, int, int]:
    """(tokens entering the MoE layer on this device, expert-token assignments it computes, local experts):
    the layer runs on the device's sequence shard (b * s / t with sequence parallelism); with balanced routing
    each of the ep devices receives as many of the group's top-k assignments as it sends (b * sl * k), times
    etp (the expert-tensor-parallel group gathers its members' tokens), and the busiest rank, which sets the
    pace, takes ``phaze.workload.moe.busiest_rank_factor`` times that; ep splits the experts."""
    from phaze.workload.moe import busiest_rank_factor

    b, s, h, t, e, sl = _dims(model, setting)
    tokens = b * sl
    rt = setting.runtime
    load = busiest_rank_factor(model.num_experts, setting.ep, rt.moe_routing, rt.moe_capacity_factor)
    return tokens, math.ceil(tokens * model.experts_per_token * setting.etp * load), model.num_experts // setting.ep


def _moe_nodes(fb: ForwardBuilder, model: ModelConfig, setting: TrainSetting, n2: int) -> int:
    """An MoE layer (Megatron-Core's MoELayer with the all-to-all dispatcher): the router (a replicated
    hidden x experts GEMM and the top-k scoring), permute, the dispatch all-to-all over the EP group (an
    all-gather over ETP), the local experts as grouped GEMMs, and back: ETP reduce-scatter, combine all-to-all,
    unpermute; shared experts run beside the routed ones as a dense MLP (tensor-parallel)."""
    b, s, h, t, e, sl = _dims(model, setting)
    le = setting.linear_bytes_per_element
    tokens, assigned, local = moe_tokens(model, setting)
    k, ep, etp = model.experts_per_token, setting.ep, setting.etp
    fm = model.moe_ffn // etp
    r = fb.add(Gemm("router", 1, tokens, model.num_experts, h, e), "weight_gemm", (n2,))
    r = fb.add(vector_op("router_topk", "router", tokens * model.num_experts), "vector", (r,))
    x = fb.add(vector_op("moe_permute", "permute", tokens * k * h), "vector", (n2, r), grad=(n2,))
    # bytes each rank dispatches: its assignments (all-to-all), or its tokens, once each (all-gather dispatcher)
    sent = e * (tokens if setting.runtime.moe_dispatcher == "allgather" else assigned // etp) * h
    if ep > 1:
        x = fb.add(Collective("moe_dispatch.all_to_all", "all_to_all", sent, ep, "ep"), "collective", (x,))
    if etp > 1:
        x = fb.add(Collective("moe_dispatch.all_gather", "all_gather", e * assigned * h, etp, "etp"),
                   "collective", (x,))
    per_expert = -(-assigned // local)
    width = 2 * fm if model.gated_mlp else fm
    h1 = fb.add(Gemm("expert_fc1", local, per_expert, width, h, le), "weight_gemm", (x,))
    act = fb.add(vector_op("expert_" + model.mlp, model.mlp, assigned * fm), "vector", (h1,))
    y = fb.add(Gemm("expert_fc2", local, per_expert, h, fm, le), "weight_gemm", (act,))
    if etp > 1:
        y = fb.add(Collective("moe_combine.reduce_scatter", "reduce_scatter", e * assigned * h, etp, "etp"),
                   "collective", (y,))
    if ep > 1:
        y = fb.add(Collective("moe_combine.all_to_all", "all_to_all", sent, ep, "ep"), "collective", (y,))
    out = fb.add(vector_op("moe_unpermute", "unpermute", tokens * k * h), "vector", (y, r))
    if model.shared_experts:
        xs = _sp_in(fb, "shared_fc1", n2, e * b * s * h, setting)
        sh = _dense_mlp(fb, model, setting, xs, "shared_", model.shared_expert_ffn // t)
        out = fb.add(vector_op("moe_shared_add", "add", tokens * h), "vector", (out, sh))
    return out


def embedding_nodes(model: ModelConfig, setting: TrainSetting) -> list[Node]:
    """Vocab-parallel word gather, TP reduction, (OPT project_in), position/type add, (norm), dropout."""
    b, s, h, t, e, sl = _dims(model, setting)
    width = model.embed_proj_dim or h
    fb = ForwardBuilder()
    # every rank gathers all tokens from its vocabulary shard (out-of-shard rows are zero)
    x = fb.add(vector_op("word_gather", "embedding_gather", b * s * width), "vector", (), grad=False)
    x = _tp_out(fb, "embed", x, e * b * s * width, setting)
    if model.embed_proj_dim:
        x = fb.add(Gemm("project_in", 1, b * sl, h, width, e), "weight_gemm", (x,))
    if model.embed_scale:  # Gemma: embeddings times sqrt(hidden)
        x = fb.add(vector_op("embed_scale", "scale", b * sl * h), "vector", (x,))
    if model.position == "learned":  # add learned positions (and BERT token types); their lookups are reads here
        x = fb.add(vector_op("position_add", "add", b * sl * h), "vector", (x,))
    if model.arch == "encoder":
        x = fb.add(vector_op("embed_norm", model.norm, b * sl * h), "vector", (x,))
    if model.dropout:
        fb.add(vector_op("embed_dropout", "dropout", b * sl * h), "vector", (x,))
    return fb.nodes


def head_nodes(model: ModelConfig, setting: TrainSetting) -> list[Node]:
    """Final norm (decoder) or MLM transform (encoder), column-parallel LM head, vocab-parallel loss."""
    b, s, h, t, e, sl = _dims(model, setting)
    width = model.embed_proj_dim or h
    vp = model.padded_vocab(t) // t
    fb = ForwardBuilder()
    if model.arch == "encoder":  # BERT MLM transform: dense + GELU + norm (replicated across TP)
        x = fb.add(Gemm("mlm_dense", 1, b * sl, h, h, e), "weight_gemm", (None,))
        x = fb.add(vector_op("mlm_gelu", "gelu", b * sl * h), "vector", (x,))
        x = fb.add(vector_op("mlm_norm", model.norm, b * sl * h), "vector", (x,))
    elif model.final_norm:
        x = fb.add(vector_op("final_norm", model.norm, b * sl * h), "vector", (None,))
    else:  # OPT-350M (post-norm): the last block's output goes straight on
        x = None
    if model.embed_proj_dim:
        x = fb.add(Gemm("project_out", 1, b * sl, width, h, e), "weight_gemm", (x,))
    x = _sp_in(fb, "lm_head", x, e * b * s * width, setting)
    lg = fb.add(Gemm("lm_head", 1, b * s, vp, width, e), "weight_gemm", (x,), column_parallel=True)
    # vocab-parallel cross-entropy (Megatron): local max, all_reduce(max), exp/sum/target, all_reduce(sum,
    # target logit) in fp32; its backward is one local op, so the forward helpers carry no gradient.
    mx = fb.add(vector_op("ce_max", "cross_entropy_max", b * s * vp), "nograd", (lg,))
    if t > 1:
        mx = fb.add(Collective("ce_max.all_reduce", "all_reduce", 4 * b * s, t), "nograd", (mx,))
    ce = fb.add(vector_op("cross_entropy", "cross_entropy", b * s * vp), "vector", (lg, mx), grad=(lg,))
    ends = [ce]
    if t > 1:
        ends = [fb.add(Collective(f"ce_{w}.all_reduce", "all_reduce", 4 * b * s, t), "nograd", (ce,))
                for w in ("sum", "target")]
    fb.add(vector_op("ce_loss", "cross_entropy_loss", b * s), "nograd", tuple(ends))
    return fb.nodes


_NODES = {"embedding": embedding_nodes, "block": block_nodes, "head": head_nodes,
          # the dense blocks of an MoE model (its first_dense_layers and those off moe_layer_freq)
          "dense_block": lambda model, setting: block_nodes(model, setting, moe=False)}


@lru_cache(maxsize=4096)
def layer_graph(model: ModelConfig, setting: TrainSetting, layer: str, direction: str) -> LayerGraph:
    """The op DAG of ``layer`` in ``direction``; bwd includes the recompute that setting.recompute implies
    (blocks only: "full" re-runs the whole forward incl. collectives, "selective" the attention core)."""
    if layer not in _NODES or (layer == "dense_block" and not getattr(model, "is_moe", False)):
        raise ConfigError(f"unknown layer kind {layer!r}; use one of {', '.join(LAYERS)}")
    if direction not in DIRECTIONS:
        raise ConfigError(f"unknown direction {direction!r}; use 'fwd' or 'bwd'")
    check_setting(model, setting)
    if isinstance(model, TracedModel):
        return accumulating_wgrads(traced_layer_graph(model, setting, layer, direction), setting)
    nodes = _NODES[layer](model, setting)
    if direction == "fwd":
        fb = ForwardBuilder(nodes)
        return fb.graph(layer)
    recompute: frozenset[int] = frozenset()
    block = layer in ("block", "dense_block")
    if block and setting.recompute == "full":
        recompute = frozenset(range(len(nodes)))
    elif block and setting.recompute == "selective":
        from phaze.workload.recompute_modules import recomputed_ops
        ops = recomputed_ops(setting.runtime.recompute_modules)
        recompute = frozenset(i for i, n in enumerate(nodes) if n.op.name in ops)
    if block and setting.attention == "flash":  # the flash backward recomputes S itself
        recompute = recompute | frozenset(i for i, n in enumerate(nodes) if n.op.name == FLASH_OPS[0])
    return accumulating_wgrads(backward(nodes, layer, setting.tp, setting.sequence_parallel and setting.tp > 1,
                                        recompute), setting)


def accumulating_wgrads(graph: LayerGraph, setting: TrainSetting) -> LayerGraph:
    """``graph`` with each weight-gradient GEMM (``.wgrad``) marked as adding into the persistent gradient
    buffer, whose elements are ``ADAM_GRAD_BYTES[setting.grad_dtype]`` bytes: every microbatch's weight
    gradient is summed into it (Megatron-LM's main grads), so the GEMM reads and writes that buffer rather
    than writing a fresh result once. A designed chip's GEMM carries the traffic in its HBM term
    (``phaze.cost.gemm.gemm_hbm_bytes``); the GPU model charges it as ``phaze.cost.gpu_layer.grad_accumulate_s``."""
    from dataclasses import replace

    acc = ADAM_GRAD_BYTES[setting.grad_dtype]
    ops = tuple(replace(op, accumulate_bytes=acc) if isinstance(op, Gemm) and op.name.endswith(".wgrad") else op
                for op in graph.ops)
    return replace(graph, ops=ops) if ops != graph.ops else graph


def layer_graphs(model: ModelConfig, setting: TrainSetting) -> dict[tuple[str, str], LayerGraph]:
    """All six graphs: {(layer, direction): LayerGraph} for layer in LAYERS, direction in fwd/bwd."""
    return {(layer, d): layer_graph(model, setting, layer, d) for layer in LAYERS for d in DIRECTIONS}
