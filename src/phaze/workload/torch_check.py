"""Our workload model against PyTorch's own counts (needs the ``[torch]`` extra: torch + transformers).

The model is built in ``transformers`` from ``to_hf_config`` on the meta device (no weights, no memory),
with eager attention so the attention products are plain ``bmm`` calls. PyTorch counts:
- parameters: ``sum(p.numel())`` over the module (tied weights once), per block and in total;
- FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` over one forward (with the LM loss), and over a
  forward + backward (the backward is the difference). It counts matmul-family aten ops only (mm, addmm, bmm, baddbmm, convolution,
  scaled-dot-product attention) as 2*M*N*K, and no element-wise op (norms, softmax, activations, bias adds).
We compare the same thing: our GEMM FLOPs (``LayerGraph.gemm_flops``); vector ops are left out on both
sides. The backward is compared without recompute (each weight GEMM's dgrad + wgrad, both operand
gradients of each attention product).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from phaze.errors import ConfigError
from phaze.workload.config import DIRECTIONS, LAYER_KINDS, ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.hf_export import to_hf_config
from phaze.workload.memory import layer_params, param_count

TORCH_MISSING = "the PyTorch cross-check needs the [torch] extra; install it with: pip install 'phaze[torch]'"


@dataclass(frozen=True)
class CheckRow:
    """One quantity on both sides; ``rel_error`` = ours / PyTorch's - 1 (0 when both are 0)."""

    quantity: str
    ours: float
    torch: float

    @property
    def rel_error(self) -> float:
        if self.torch == 0:
            return 0.0 if self.ours == 0 else float("inf")
        return self.ours / self.torch - 1.0


@dataclass(frozen=True)
class TorchCheck:
    model: str
    hf_family: str
    microbatch_size: int
    seq_len: int
    rows: tuple[CheckRow, ...]
    counted_ops: tuple[str, ...]  # aten ops the flop counter saw

    def row(self, quantity: str) -> CheckRow:
        return next(r for r in self.rows if r.quantity == quantity)

    @property
    def max_abs_rel_error(self) -> float:
        return max(abs(r.rel_error) for r in self.rows)


def _import_torch():
    try:
        import torch
        import transformers
    except ImportError:
        raise ConfigError(TORCH_MISSING) from None
    return torch, transformers


def build_meta_model(model: ModelConfig, vocab: int | None = None):
    """The transformers module of ``model`` on the meta device (eager attention), and its family name."""
    torch, transformers = _import_torch()
    cfg = to_hf_config(model, vocab)
    family = cfg.pop("model_type")
    hf_cfg = transformers.AutoConfig.for_model(family, **cfg)
    hf_cfg._attn_implementation = "eager"
    auto = transformers.AutoModelForMaskedLM if family == "bert" else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        module = auto.from_config(hf_cfg, attn_implementation="eager")
    return module, family


def block_list(module, num_layers: int) -> tuple[str, list]:
    """The qualified name and entries of the ModuleList that holds the transformer blocks."""
    torch, _ = _import_torch()
    for name, sub in module.named_modules():
        if isinstance(sub, torch.nn.ModuleList) and len(sub) == num_layers:
            return name, list(sub)
    raise ConfigError(f"no list of {num_layers} blocks found in {type(module).__name__}")


def _flops(model: ModelConfig, vocab: int, microbatch_size: int, seq_len: int) -> tuple[int, int, set[str]]:
    """PyTorch's forward and backward FLOPs of the whole module, and the aten ops it counted."""
    torch, _ = _import_torch()
    from torch.utils.flop_counter import FlopCounterMode

    module, _ = build_meta_model(model, vocab)
    ids = torch.zeros(microbatch_size, seq_len, dtype=torch.long, device="meta")
    fwd_counter, bwd_counter = FlopCounterMode(display=False), FlopCounterMode(display=False)
    with fwd_counter:
        loss = module(input_ids=ids, labels=ids).loss
    with bwd_counter:
        loss.backward()
    ops = {str(op) for c in (fwd_counter, bwd_counter) for op in c.get_flop_counts()["Global"]}
    return fwd_counter.get_total_flops(), bwd_counter.get_total_flops(), ops


def check_against_torch(model: ModelConfig, microbatch_size: int = 1, seq_len: int = 512) -> TorchCheck:
    """Parameters and forward/backward GEMM FLOPs (per block, and embedding + head) on both sides.

    Parameters come from the full-size module. FLOPs come from the same network cut to 1 and to 2 blocks
    (blocks are identical): one block = F(2) - F(1), embedding + head = 2 F(1) - F(2); this needs no
    attribution of backward ops to modules, and keeps the count fast for 100-layer models.
    The vocabulary is Megatron's padded one at t = 1 on both sides (the table a Megatron model trains)."""
    vocab = model.padded_vocab(1)
    m = dataclasses.replace(model, vocab=vocab)
    setting = TrainSetting(microbatch_size=microbatch_size, seq_len=seq_len)
    module, family = build_meta_model(m, vocab)
    _, blocks = block_list(module, m.num_layers)
    block_params = sum(p.numel() for p in blocks[0].parameters())
    total_params = sum(p.numel() for p in module.parameters())
    del module
    f1, b1, ops1 = _flops(dataclasses.replace(m, num_layers=1), vocab, microbatch_size, seq_len)
    f2, b2, ops2 = _flops(dataclasses.replace(m, num_layers=2), vocab, microbatch_size, seq_len)
    torch_fwd, torch_bwd = {"block": f2 - f1, "rest": 2 * f1 - f2}, {"block": b2 - b1, "rest": 2 * b1 - b2}

    ours = {(layer, d): layer_graph(m, setting, layer, d).gemm_flops
            for layer in LAYER_KINDS for d in DIRECTIONS}
    rest = {d: ours[("embedding", d)] + ours[("head", d)] for d in ("fwd", "bwd")}
    rows = (
        CheckRow("parameters (total)", param_count(m), total_params),
        CheckRow("parameters per block", layer_params(m, "block", 1), block_params),
        CheckRow("fwd GEMM FLOPs per block", ours[("block", "fwd")], torch_fwd["block"]),
        CheckRow("bwd GEMM FLOPs per block", ours[("block", "bwd")], torch_bwd["block"]),
        CheckRow("fwd GEMM FLOPs embedding + head", rest["fwd"], torch_fwd["rest"]),
        CheckRow("bwd GEMM FLOPs embedding + head", rest["bwd"], torch_bwd["rest"]),
    )
    return TorchCheck(m.name, family, microbatch_size, seq_len, rows, tuple(sorted(ops1 | ops2)))
