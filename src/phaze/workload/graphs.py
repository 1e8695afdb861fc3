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

from functools import lru_cache

from phaze.errors import ConfigError
from phaze.workload.autodiff import ForwardBuilder, Node, backward
from phaze.workload.config import ADAM_GRAD_BYTES, DIRECTIONS, LAYER_KINDS, ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.ops import Collective, Gemm, LayerGraph
from phaze.workload.traced import TracedModel, traced_layer_graph
from phaze.workload.vector_kinds import vector_op

LAYERS = LAYER_KINDS
# Selective recompute re-runs the attention core only (Korthikanti et al. 2022, sec. 5).
SELECTIVE_OPS = ("attn_scores", "softmax", "attn_dropout", "attn_v")
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
    return max(1, -(-(w * s - w * (w - 1) // 2) // s))


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
    if model.position == "learned" and setting.seq_len > model.seq_len:
        raise ConfigError(f"seq_len {setting.seq_len} exceeds the {model.seq_len} learned positions of "
                          f"{model.name}; use seq_len <= {model.seq_len}")


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


def block_nodes(model: ModelConfig, setting: TrainSetting) -> list[Node]:
    """Forward nodes of one transformer block (pre-norm; post-norm BERT has the same ops). In a parallel
    block the MLP's norm reads the block input (or the MLP shares the attention's norm)."""
    b, s, h, t, e, sl = _dims(model, setting)
    a, g, d, f = model.heads // t, model.num_kv_heads // t, model.head_dim, model.ffn // t
    kv = model.attended_keys(s)
    norm, full = model.norm, e * b * s * h
    le = setting.linear_bytes_per_element  # the linear layers' GEMM operands (1 B in FP8)
    fb = ForwardBuilder()
    n1 = fb.add(vector_op("norm1", norm, b * sl * h), "vector", (None,))
    x1 = _sp_in(fb, "qkv", n1, full, setting)
    qkv = fb.add(Gemm("qkv", 1, b * s, (a + 2 * g) * d, h, le), "weight_gemm", (x1,), column_parallel=True)
    qk = qkv
    if model.position == "rotary":
        rot = round(b * s * (a + g) * d * model.rotary_fraction)
        qk = fb.add(vector_op("rotary", "rotary", rot), "vector", (qkv,))
    if setting.attention == "flash":
        # CP: this device's queries against the whole sequence's keys (the K/V ring exchange is costed by
        # ``cp_ring_bytes`` in the time model)
        kf = flash_keys(model, setting.seq_len)
        sc = fb.add(Gemm("flash_scores", b * a, s, kf, d, e), "act_gemm", (qk, qk), operands=("q", "k"))
        av = fb.add(Gemm("flash_pv", b * a, s, d, kf, e), "act_gemm", (sc, qkv), operands=("probs", "v"))
    else:
        sc = fb.add(Gemm("attn_scores", b * a, s, kv, d, e), "act_gemm", (qk, qk), operands=("q", "k"))
        p = fb.add(vector_op("softmax", "softmax", b * a * s * kv), "vector", (sc,))
        if model.dropout:
            p = fb.add(vector_op("attn_dropout", "dropout", b * a * s * kv), "vector", (p,))
        av = fb.add(Gemm("attn_v", b * a, s, d, kv, e), "act_gemm", (p, qkv), operands=("probs", "v"))
    o = fb.add(Gemm("out_proj", 1, b * s, h, a * d, le), "weight_gemm", (av,))
    o = _tp_out(fb, "attn", o, full, setting)
    res = "dropout_add" if model.dropout else "add"
    r1 = fb.add(vector_op("attn_residual", res, b * sl * h), "vector", (o, None))
    if model.shared_norm:
        x2 = x1
    else:
        n2 = fb.add(vector_op("norm2", norm, b * sl * h), "vector", (None if model.parallel_block else r1,))
        x2 = _sp_in(fb, "fc1", n2, full, setting)
    width = 2 * f if model.gated_mlp else f
    h1 = fb.add(Gemm("fc1", 1, b * s, width, h, le), "weight_gemm", (x2,), column_parallel=True)
    act = fb.add(vector_op(model.mlp, model.mlp, b * s * f), "vector", (h1,))
    h2 = fb.add(Gemm("fc2", 1, b * s, h, f, le), "weight_gemm", (act,))
    h2 = _tp_out(fb, "mlp", h2, full, setting)
    fb.add(vector_op("mlp_residual", res, b * sl * h), "vector", (h2, r1))
    return fb.nodes


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


_NODES = {"embedding": embedding_nodes, "block": block_nodes, "head": head_nodes}


@lru_cache(maxsize=4096)
def layer_graph(model: ModelConfig, setting: TrainSetting, layer: str, direction: str) -> LayerGraph:
    """The op DAG of ``layer`` in ``direction``; bwd includes the recompute that setting.recompute implies
    (blocks only: "full" re-runs the whole forward incl. collectives, "selective" the attention core)."""
    if layer not in _NODES:
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
    if layer == "block" and setting.recompute == "full":
        recompute = frozenset(range(len(nodes)))
    elif layer == "block" and setting.recompute == "selective":
        recompute = frozenset(i for i, n in enumerate(nodes) if n.op.name in SELECTIVE_OPS)
    if layer == "block" and setting.attention == "flash":  # the flash backward recomputes S itself
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
