"""What is trained: a transformer model description and the per-layer training setting."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from phaze.errors import ConfigError
from phaze.limits import check

RecomputeMode = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = get_args(RecomputeMode)
# The layer sequence every model is cut into (embedding, num_layers blocks, head), and the two passes of each:
# defined here once for every stage.
LAYER_KINDS: tuple[str, ...] = ("embedding", "block", "head")
DIRECTIONS: tuple[str, ...] = ("fwd", "bwd")
# Attention kernels: "standard" materialises the score matrix (Megatron's fused softmax path), "flash" is a
# fused kernel that never stores it (FlashAttention, Dao et al. 2022/2023; cuDNN / Transformer Engine).
ATTENTION_KINDS: tuple[str, ...] = ("standard", "flash")
# Number formats of the GEMMs: fp16 and bf16 run at the same tensor-core rate; fp8 (Transformer Engine)
# runs the block's linear-layer GEMMs in 8-bit on chips with FP8 tensor cores.
PRECISIONS: tuple[str, ...] = ("fp16", "bf16", "fp8")
# The Transformer Engine userbuffers configuration a TP-overlapped run uses unless it names another (the named
# configurations and their sources: phaze/cost/data/tp_overlap_configs.json, read by phaze.cost.overlap).
DEFAULT_TP_OVERLAP_CONFIG = "nemo-gpt3-175b-h100"
# The number format of the gradient buffer, its data-parallel reduce and the wgrad accumulation (with the
# "adam" mixed-precision optimizer). "fp32": Megatron-LM with --bf16 forces fp32 accumulation and reduce
# (accumulate_allreduce_grads_in_fp32), NeMo 1.x defaults optim.grad_sync_dtype to fp32. "bf16": NeMo's
# ``optim.grad_sync_dtype: bf16`` (NeMo-Framework-Launcher conf/training/nemotron/nemotron_340b.yaml) or NeMo
# 2.0's ``grad_reduce_in_fp32 = False`` (nemo/collections/llm/recipes/llama3_8b.py performance recipe).
GRAD_DTYPES: tuple[str, ...] = ("fp32", "bf16")
DEFAULT_GRAD_DTYPE = "fp32"
# Adam's gradient bytes per parameter by ``grad_dtype``: "fp32" the main grad (phaze.workload.memory.OPTIMIZERS);
# "bf16" a 16-bit gradient buffer (NeMo ``optim.grad_sync_dtype: bf16`` / Megatron-Core
# ``grad_reduce_in_fp32=False``: the buffer, its DP reduce-scatter and the wgrad accumulation are bf16, while the
# distributed optimizer keeps its fp32 master weights and m, v: the 12 B of state are unchanged).
ADAM_GRAD_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2}
# What the "adam" optimizer keeps per parameter besides the weight and gradient (its bytes:
# phaze.workload.memory.ADAM_STATE_BYTES). "fp32": an fp32 master copy and fp32 m, v (Megatron-LM /
# Megatron-Core's optimizer; Apex DistributedFusedAdam with store_params). "fp32-remainders": fp32 m, v and
# the low 16 bits of each fp32 master weight (Apex store_param_remainders, which NeMo 1.x sets for a bf16
# model without FP8 parameters). "bf16-master": bf16 m, v and a bf16 master copy (NeMo ``optim.dtype: bf16``
# with FP8 parameters). "bf16": bf16 m, v and no copy (``optim.dtype: bf16`` with a bf16 model).
OPTIMIZER_STATES: tuple[str, ...] = ("fp32", "fp32-remainders", "bf16-master", "bf16")
DEFAULT_OPTIMIZER_STATE = "fp32"
# Megatron-LM's --deterministic-mode refuses --tp-comm-overlap ("Overlapped collective ordering is not
# reproducible", docs/developer/determinism/op-catalog.md; megatron/training/determinism.py at d98e8a6).
DETERMINISTIC_TP_OVERLAP_ERROR = ("deterministic mode runs without TP overlap (Megatron-LM's --deterministic-mode "
                                  "refuses --tp-comm-overlap: overlapped collectives are not reproducible); "
                                  "drop one of the two")


@dataclass(frozen=True)
class ModelConfig:
    """A transformer (encoder or decoder) as the layer sequence embedding, num_layers blocks, head.

    ``embed_proj_dim``: OPT-350M projects a 512-wide embedding up to ``hidden`` and back down before the
    LM head; None for every other model. ``vocab_pad_multiple``: Megatron pads the vocabulary to a
    multiple of ``vocab_pad_multiple * tp``; 1 means no padding.

    Variants the Hugging Face families need (defaults = the GPT/Llama template above):
    ``head_dim_override`` (Gemma: head_dim is not hidden/heads), ``qkv_bias``/``out_bias``/``mlp_bias`` (None: follow ``bias``;
    Qwen2 biases Q, K, V only), ``head_bias`` (a bias on the LM head; None: BERT's MLM output bias iff
    ``bias``), ``parallel_block`` (GPT-NeoX/Falcon/Phi: attention and MLP both read the block input) with
    ``shared_norm`` (one norm feeds both), ``rotary_fraction`` (Pythia/Phi rotate part of each head),
    ``sliding_window`` (Mistral: each query attends to at most this many keys), ``extra_positions``
    (OPT stores 2 learned position rows more than it uses), ``final_norm`` (OPT-350M has none),
    ``embed_scale`` (Gemma multiplies the embeddings by sqrt(hidden)).
    """

    name: str
    num_layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq_len: int
    kv_heads: int | None = None  # None: same as heads (multi-head attention)
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    mlp: Literal["gelu", "relu", "swiglu", "geglu"] = "gelu"
    tied_embeddings: bool = True
    arch: Literal["encoder", "decoder"] = "decoder"
    position: Literal["learned", "rotary"] = "learned"
    bias: bool = True
    dropout: bool = True
    max_tp: int = 8
    vocab_pad_multiple: int = 1
    embed_proj_dim: int | None = None
    head_dim_override: int | None = None
    qkv_bias: bool | None = None
    out_bias: bool | None = None
    mlp_bias: bool | None = None
    head_bias: bool | None = None
    parallel_block: bool = False
    shared_norm: bool = False
    rotary_fraction: float = 1.0
    sliding_window: int | None = None
    extra_positions: int = 0
    final_norm: bool = True
    embed_scale: bool = False
    # Mixture-of-Experts (0 experts: a dense model). Each MoE block's MLP is a router (a hidden x experts GEMM,
    # top-``experts_per_token`` of ``router_scoring``) over ``num_experts`` routed experts, each a gated MLP of
    # ``moe_ffn``, plus ``shared_experts`` always-on experts of ``shared_ffn`` in all (default shared_experts x
    # moe_ffn). The first ``first_dense_layers`` blocks (DeepSeek's first_k_dense_replace) and blocks off the
    # ``moe_layer_freq`` grid are dense, with ``ffn``. ``expert_bias``: the experts' GEMMs carry biases (GPT-OSS).
    num_experts: int = 0
    experts_per_token: int = 0
    moe_ffn: int | None = None
    shared_experts: int = 0
    shared_ffn: int | None = None
    first_dense_layers: int = 0
    moe_layer_freq: int = 1
    router_scoring: Literal["softmax", "sigmoid"] = "softmax"
    router_bias: bool = False
    expert_bias: bool = False
    # Multi-head Latent Attention (DeepSeek-V2/V3): queries through a ``q_lora_rank`` bottleneck (0: a plain
    # projection), keys and values through a shared ``kv_lora_rank`` latent; each head's query/key has
    # ``qk_nope_head_dim`` + ``qk_rope_head_dim`` dims (the rope part of the key shared by all heads), its value
    # ``v_head_dim``. 0 kv_lora_rank: not MLA.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # Multi-token prediction (DeepSeek-V3): modules after the last block, each a projection of [h; embedding]
    # and one block, sharing the embedding and the LM head; trained, not counted in the published totals.
    mtp_layers: int = 0
    # GPT-OSS: every ``sliding_window_period``-th block (counting from 0) is windowed, the rest attend fully
    # (0: every block as ``sliding_window`` says); ``attention_sinks``: one learned logit per head.
    sliding_window_period: int = 0
    attention_sinks: bool = False
    # Qwen3: an RMSNorm over each head's query and key (2 x head_dim weights per block); Qwen2-MoE: a sigmoid gate
    # (hidden x 1) on the shared expert's output
    qk_norm: bool = False
    shared_expert_gate: bool = False

    def __post_init__(self) -> None:
        for field in ("num_layers", "hidden", "heads", "ffn", "vocab", "seq_len", "max_tp", "vocab_pad_multiple"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"model {self.name!r}: field '{field}' must be a positive integer, got {v!r}")
        if self.kv_heads is not None and (self.kv_heads <= 0 or self.heads % self.kv_heads):
            raise ConfigError(f"model {self.name!r}: field 'kv_heads' ({self.kv_heads}) must be positive and divide heads ({self.heads})")
        if self.head_dim_override is None and self.hidden % self.heads and not self.kv_lora_rank:
            raise ConfigError(f"model {self.name!r}: hidden ({self.hidden}) must be divisible by heads ({self.heads}); "
                              f"or give head_dim_override")
        for field in ("embed_proj_dim", "head_dim_override", "sliding_window"):
            v = getattr(self, field)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ConfigError(f"model {self.name!r}: field '{field}' must be a positive integer, got {v!r}")
        if not isinstance(self.extra_positions, int) or self.extra_positions < 0:
            raise ConfigError(f"model {self.name!r}: field 'extra_positions' must be >= 0, got {self.extra_positions!r}")
        if not 0 < self.rotary_fraction <= 1:
            raise ConfigError(f"model {self.name!r}: field 'rotary_fraction' must be in (0, 1], got {self.rotary_fraction!r}")
        for field in ("num_layers", "hidden", "heads", "ffn", "vocab", "seq_len", "max_tp", "vocab_pad_multiple",
                      "kv_heads", "embed_proj_dim", "head_dim_override", "sliding_window", "extra_positions"):
            if getattr(self, field) is not None:
                check(field, getattr(self, field), f"model {self.name!r}: field '{field}'")
        if self.shared_norm and not self.parallel_block:
            raise ConfigError(f"model {self.name!r}: shared_norm needs parallel_block: true (a sequential block "
                              f"has two norms)")
        for field in ("num_experts", "experts_per_token", "shared_experts", "first_dense_layers", "q_lora_rank",
                      "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "mtp_layers",
                      "sliding_window_period"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"model {self.name!r}: field '{field}' must be an integer >= 0, got {v!r}")
        if self.num_experts:
            if not 1 <= self.experts_per_token <= self.num_experts:
                raise ConfigError(f"model {self.name!r}: experts_per_token ({self.experts_per_token}) must be between "
                                  f"1 and num_experts ({self.num_experts})")
            if not isinstance(self.moe_ffn, int) or isinstance(self.moe_ffn, bool) or self.moe_ffn <= 0:
                raise ConfigError(f"model {self.name!r}: an MoE model needs moe_ffn (each expert's intermediate "
                                  f"size) > 0, got {self.moe_ffn!r}")
            if not isinstance(self.moe_layer_freq, int) or self.moe_layer_freq < 1:
                raise ConfigError(f"model {self.name!r}: moe_layer_freq must be a positive integer")
            if self.first_dense_layers > self.num_layers or not self.num_moe_layers:
                raise ConfigError(f"model {self.name!r}: first_dense_layers ({self.first_dense_layers}) leaves no "
                                  f"MoE block of {self.num_layers}")
            if self.router_scoring not in ("softmax", "sigmoid"):
                raise ConfigError(f"model {self.name!r}: router_scoring must be softmax or sigmoid")
        elif self.experts_per_token or self.shared_experts or self.moe_ffn:
            raise ConfigError(f"model {self.name!r}: experts_per_token, shared_experts and moe_ffn need num_experts > 0")
        if self.kv_lora_rank and not (self.qk_nope_head_dim and self.qk_rope_head_dim and self.v_head_dim):
            raise ConfigError(f"model {self.name!r}: multi-head latent attention (kv_lora_rank) needs "
                              f"qk_nope_head_dim, qk_rope_head_dim and v_head_dim")

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def head_dim(self) -> int:
        """Query/key dims per head (MLA: its nope + rope dims)."""
        if self.kv_lora_rank:
            return self.qk_nope_head_dim + self.qk_rope_head_dim
        return self.head_dim_override or self.hidden // self.heads

    @property
    def gated_mlp(self) -> bool:
        """SwiGLU and GeGLU: FC1 produces a gate and an up projection (2 x ffn wide)."""
        return self.mlp in ("swiglu", "geglu")

    def has_bias(self, part: str) -> bool:
        """Whether the block's ``part`` ("qkv", "out" or "mlp") GEMMs carry a bias, or the LM head ("head")."""
        if part == "head":
            return self.head_bias if self.head_bias is not None else (self.arch == "encoder" and self.bias)
        own = {"qkv": self.qkv_bias, "out": self.out_bias, "mlp": self.mlp_bias}[part]
        return self.bias if own is None else own

    @property
    def block_norms(self) -> int:
        """Norms per block: two, or one in a parallel block whose attention and MLP share it."""
        return 1 if self.shared_norm else 2

    def attended_keys(self, seq_len: int) -> int:
        """Keys each query is scored against: the sequence, or at most the sliding window. Like the dense
        causal case (all s keys counted, no causal skipping), a windowed kernel is counted by its band. With
        ``sliding_window_period`` (GPT-OSS) the mean over the blocks, windowed and full."""
        if not self.sliding_window:
            return seq_len
        w = min(seq_len, self.sliding_window)
        f = self.windowed_fraction
        return round(f * w + (1 - f) * seq_len)

    @property
    def windowed_fraction(self) -> float:
        """The share of blocks that use the sliding window (1 unless sliding_window_period is set)."""
        if not self.sliding_window_period:
            return 1.0
        return -(-self.num_layers // self.sliding_window_period) / self.num_layers

    def padded_vocab(self, tp: int) -> int:
        """Vocabulary rounded up to a multiple of vocab_pad_multiple * tp (Megatron's rule)."""
        mult = self.vocab_pad_multiple * tp if self.vocab_pad_multiple > 1 else tp
        return -(-self.vocab // mult) * mult

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    def is_moe_layer(self, i: int) -> bool:
        """Whether block ``i`` (0-based) is an MoE block (HF: first_k_dense_replace, moe_layer_freq)."""
        return self.is_moe and i >= self.first_dense_layers and i % self.moe_layer_freq == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    @property
    def shared_expert_ffn(self) -> int:
        """The shared experts' intermediate width in all (0: none)."""
        if not self.shared_experts:
            return 0
        return self.shared_ffn if self.shared_ffn else self.shared_experts * (self.moe_ffn or 0)

    def valid_tp(self, tp: int) -> bool:
        """t must be a power of two <= max_tp dividing the heads (and the kv heads)."""
        return (
            tp >= 1 and tp & (tp - 1) == 0 and tp <= self.max_tp
            and self.heads % tp == 0 and self.num_kv_heads % tp == 0 and self.ffn % tp == 0
        )

    def layer_sequence(self) -> tuple[str, ...]:
        """The pipeline sees this sequence of layers: embedding, num_layers blocks, head."""
        return ("embedding",) + ("block",) * self.num_layers + ("head",)

    @property
    def tp_rule(self) -> str:
        """Which tensor-parallel widths this model takes (for refusals)."""
        return (f"use a power of two <= {self.max_tp} dividing heads ({self.heads}), kv heads "
                f"({self.num_kv_heads}) and ffn ({self.ffn})")


# The fields added for the Hugging Face families, at their template values: a description that leaves them
# there is the same model as before they existed (search fingerprints omit them, so old stores resume).
VARIANT_DEFAULTS: dict[str, object] = {
    "head_dim_override": None, "qkv_bias": None, "out_bias": None, "mlp_bias": None, "head_bias": None,
    "parallel_block": False, "shared_norm": False, "rotary_fraction": 1.0, "sliding_window": None,
    "extra_positions": 0, "final_norm": True, "embed_scale": False,
    "num_experts": 0, "experts_per_token": 0, "moe_ffn": None, "shared_experts": 0, "shared_ffn": None,
    "first_dense_layers": 0, "moe_layer_freq": 1, "router_scoring": "softmax", "router_bias": False,
    "expert_bias": False, "q_lora_rank": 0, "kv_lora_rank": 0, "qk_nope_head_dim": 0, "qk_rope_head_dim": 0,
    "v_head_dim": 0, "mtp_layers": 0, "sliding_window_period": 0, "attention_sinks": False, "qk_norm": False,
    "shared_expert_gate": False,
}
