"""What is trained: a transformer model description and the per-layer training setting."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from phaze.errors import ConfigError

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


@dataclass(frozen=True)
class ModelConfig:
    """A transformer (encoder or decoder) as the layer sequence embedding, num_layers blocks, head.

    ``embed_proj_dim``: OPT-350M projects a 512-wide embedding up to ``hidden`` and back down before the
    LM head; None for every other model. ``vocab_pad_multiple``: Megatron pads the vocabulary to a
    multiple of ``vocab_pad_multiple * tp``; 1 means no padding.
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
    mlp: Literal["gelu", "swiglu"] = "gelu"
    tied_embeddings: bool = True
    arch: Literal["encoder", "decoder"] = "decoder"
    position: Literal["learned", "rotary"] = "learned"
    bias: bool = True
    dropout: bool = True
    max_tp: int = 8
    vocab_pad_multiple: int = 1
    embed_proj_dim: int | None = None

    def __post_init__(self) -> None:
        for field in ("num_layers", "hidden", "heads", "ffn", "vocab", "seq_len", "max_tp", "vocab_pad_multiple"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"model {self.name!r}: field '{field}' must be a positive integer, got {v!r}")
        if self.kv_heads is not None and (self.kv_heads <= 0 or self.heads % self.kv_heads):
            raise ConfigError(f"model {self.name!r}: field 'kv_heads' ({self.kv_heads}) must be positive and divide heads ({self.heads})")
        if self.hidden % self.heads:
            raise ConfigError(f"model {self.name!r}: hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.embed_proj_dim is not None and self.embed_proj_dim <= 0:
            raise ConfigError(f"model {self.name!r}: field 'embed_proj_dim' must be a positive integer")

    @property
    def num_kv_heads(self) -> int:
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def padded_vocab(self, tp: int) -> int:
        """Vocabulary rounded up to a multiple of vocab_pad_multiple * tp (Megatron's rule)."""
        mult = self.vocab_pad_multiple * tp if self.vocab_pad_multiple > 1 else tp
        return -(-self.vocab // mult) * mult

    def valid_tp(self, tp: int) -> bool:
        """t must be a power of two <= max_tp dividing the heads (and the kv heads)."""
        return (
            tp >= 1 and tp & (tp - 1) == 0 and tp <= self.max_tp
            and self.heads % tp == 0 and self.num_kv_heads % tp == 0 and self.ffn % tp == 0
        )

    def layer_sequence(self) -> tuple[str, ...]:
        """The pipeline sees this sequence of layers: embedding, num_layers blocks, head."""
        return ("embedding",) + ("block",) * self.num_layers + ("head",)


@dataclass(frozen=True)
class TrainSetting:
    """How one layer is run: microbatch size, sequence length, tensor-parallel width, sequence
    parallelism (Korthikanti et al. 2022) and activation recomputation mode."""

    microbatch_size: int
    seq_len: int
    tp: int = 1
    sequence_parallel: bool = False
    recompute: Recompute = "none"
    bytes_per_element: int = 2

    def __post_init__(self) -> None:
        for field in ("microbatch_size", "seq_len", "tp"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"'{field}' must be a positive integer, got {v!r}")
        if self.recompute not in RECOMPUTE_MODES:
            raise ConfigError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}")

    def check_model(self, model: ModelConfig) -> None:
        """Raise ConfigError if this setting cannot shard ``model``."""
        if model.heads % self.tp or model.num_kv_heads % self.tp or model.ffn % self.tp:
            raise ConfigError(
                f"tensor-parallel width {self.tp} must divide heads ({model.heads}), kv heads "
                f"({model.num_kv_heads}) and ffn ({model.ffn}) of {model.name}; pick a power of two that does"
            )
