"""The public API's workload calls: a model's parameters, FLOPs, ops and memory (``show_model``), importing a Hugging
Face config or a PyTorch module (``import_model``), the cross-check against PyTorch (``check_torch``), the zoo and
model files."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.api.resolve import check_ranges, resolve_model
from phaze.errors import ConfigError
from phaze.workload.config import LAYER_KINDS, ModelConfig
from phaze.workload.runtime import TrainSetting


def make_setting(model: ModelConfig, mbs: int = 1, seq: int | None = None, tp: int = 1,
                 sequence_parallel: bool = False, recompute: str = "none") -> TrainSetting:
    check_ranges(mbs=mbs, seq=seq, tp=tp)
    setting = TrainSetting(microbatch_size=mbs, seq_len=seq if seq is not None else model.seq_len, tp=tp,
                           sequence_parallel=sequence_parallel, recompute=recompute)
    setting.check_model(model)
    return setting


@dataclass(frozen=True)
class LayerSummary:
    layer: str
    count: int
    fwd_flops: float
    bwd_flops: float
    ops: tuple[str, ...]
    params: int
    weight_bytes: int
    grad_bytes: int
    optimizer_bytes: int
    activation_bytes: int


@dataclass(frozen=True)
class ModelSummary:
    """``params``: the whole model; ``active_params``: what one token uses (an MoE model's routed experts
    counted top-k times; = ``params`` for a dense model); ``moe``: an MoE model's experts as (field, value)
    pairs (``moe_facts``), empty for a dense one."""

    model: ModelConfig
    setting: TrainSetting
    params: int
    train_flops_per_token: float
    layers: tuple[LayerSummary, ...]
    active_params: int = 0
    moe: tuple[tuple[str, object], ...] = ()


def moe_facts(m) -> tuple[tuple[str, object], ...]:
    """An MoE model's experts, top-k, expert FFN, shared experts, dense blocks and MLA ranks (when present), as
    (field, value) pairs; () for a dense model."""
    if not getattr(m, "is_moe", False):
        return ()
    facts = [("experts", m.num_experts), ("top-k", m.experts_per_token), ("expert FFN", m.moe_ffn),
             ("router", m.router_scoring),
             ("shared experts", f"{m.shared_experts} (FFN {m.shared_expert_ffn})" if m.shared_experts else 0),
             ("MoE blocks", m.num_moe_layers), ("dense blocks", m.num_layers - m.num_moe_layers)]
    if m.mla:
        facts += [("MLA q LoRA rank", m.q_lora_rank), ("MLA kv LoRA rank", m.kv_lora_rank),
                  ("MLA qk nope / rope / v head dims", f"{m.qk_nope_head_dim} / {m.qk_rope_head_dim} / "
                                                      f"{m.v_head_dim}")]
    if m.mtp_layers:
        facts.append(("multi-token prediction layers", m.mtp_layers))
    return tuple(facts)


def show_model(model: str | ModelConfig, mbs: int = 1, seq: int | None = None, tp: int = 1,
               sequence_parallel: bool = False, recompute: str = "none") -> ModelSummary:
    """Parameters, training FLOPs per token, and each layer kind's ops and memory per device."""
    from phaze.workload.graphs import layer_graph
    from phaze.workload.memory import active_param_count, layer_memory, param_count

    m = resolve_model(model)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    seq_counts = {k: m.layer_sequence().count(k) for k in LAYER_KINDS}
    kinds = LAYER_KINDS
    if getattr(m, "is_moe", False):  # its MoE blocks and its dense ones (first_dense_layers, moe_layer_freq)
        seq_counts.update(block=m.num_moe_layers, dense_block=m.num_layers - m.num_moe_layers)
        kinds = ("embedding",) + (("dense_block",) if seq_counts["dense_block"] else ()) + ("block", "head")
    layers, total_flops = [], 0.0
    for kind in kinds:
        fwd = layer_graph(m, setting, kind, "fwd")
        bwd = layer_graph(m, setting, kind, "bwd")
        mem = layer_memory(m, setting, kind)
        total_flops += seq_counts[kind] * (fwd.flops + bwd.flops) * setting.tp
        layers.append(LayerSummary(kind, seq_counts[kind], fwd.flops, bwd.flops, tuple(op.name for op in fwd.ops),
                                   mem.params, mem.weight_bytes, mem.grad_bytes, mem.optimizer_bytes,
                                   mem.activation_bytes))
    tokens = setting.microbatch_size * setting.seq_len
    active = active_param_count(m) if isinstance(m, ModelConfig) else param_count(m)
    return ModelSummary(m, setting, param_count(m), total_flops / tokens, tuple(layers), active, moe_facts(m))


def import_model(config: str | None = None, output: str | None = None, torch_factory: str | None = None,
                 mbs: int = 1, seq: int | None = None, model: ModelConfig | None = None):
    """A Hugging Face config.json (``config``) as a ModelConfig, written as a model file to ``output`` if
    given; or, with ``torch_factory`` ("module:factory"), the operator graph of a PyTorch module traced with
    torch.export (a ``TorchImport``; needs the [torch] extra), written with ``output`` as FILE.json (the traced
    graphs, a model for plan/evaluate/search) or FILE.yaml (a transformers module's config). ``model``: write
    that ModelConfig instead."""
    from phaze.workload.zoo import load_hf_config
    from phaze.workload.zoo import model_to_yaml

    if sum(x is not None for x in (config, torch_factory, model)) != 1:
        raise ConfigError("import-model takes a config.json or --torch MODULE:FACTORY (exactly one)")
    check_ranges(mbs=mbs, seq=seq)
    if torch_factory is not None:
        from phaze.workload.torch_import import import_torch_module
        res = import_torch_module(torch_factory, mbs, seq or 128)
        if output is not None:
            _write(output, _traced_file_text(res, output))
        return res
    model = model or load_hf_config(config)
    if output is not None:
        _write(output, model_to_yaml(model, f"imported by `phaze import-model` from {config or model.name}"))
    return model


def _traced_file_text(res, output: str) -> str:
    """-o with --torch: FILE.json = the traced per-layer graphs (plannable); FILE.yaml = the model description
    of a transformers module's config."""
    import json
    from pathlib import Path

    from phaze.workload.traced import traced_to_dict
    from phaze.workload.zoo import model_to_yaml

    if Path(output).suffix.lower() == ".json":
        if res.traced_model is None:
            raise ConfigError(f"-o {output}: the trace cannot be planned ({res.not_plannable}); its operator graph "
                              f"is printed without -o")
        return json.dumps(traced_to_dict(res.traced_model), indent=1) + "\n"
    if Path(output).suffix.lower() not in (".yaml", ".yml"):
        raise ConfigError(f"-o {output}: use FILE.json (the traced graphs) or FILE.yaml (a transformers config)")
    if res.model is None:
        raise ConfigError(f"-o {output}: the traced module carries no Hugging Face config, so there is no model "
                          f"description to write; use -o FILE.json for the traced graphs")
    return model_to_yaml(res.model, f"imported by `phaze import-model` from {res.source}")


def _write(output: str, text: str) -> None:
    from pathlib import Path

    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"-o {output}: cannot write the model file ({exc.strerror}); pick a writable path") from None


def check_torch(model: str | ModelConfig, mbs: int = 1, seq: int | None = None):
    """Our parameter count and GEMM FLOPs (per block, embedding + head, fwd and bwd) beside PyTorch's own
    counts of the same network built in transformers (needs the [torch] extra)."""
    from phaze.workload.torch_check import check_against_torch

    check_ranges(mbs=mbs, seq=seq)
    m = resolve_model(model)
    if not isinstance(m, ModelConfig):
        raise ConfigError(f"{m.name} is a traced PyTorch module: --check-torch compares a model description with "
                          f"transformers, and a traced graph already is PyTorch's")
    seq_len = seq if seq is not None else min(m.seq_len, 512)
    if m.position == "learned" and seq_len > m.seq_len:
        raise ConfigError(f"--seq {seq_len} exceeds the {m.seq_len} learned positions of {m.name}")
    return check_against_torch(m, mbs, seq_len)


@dataclass(frozen=True)
class ZooEntry:
    model: ModelConfig
    params: int  # whole model, unsharded


def models() -> list[ZooEntry]:
    """Every model of the built-in zoo with its parameter count."""
    from phaze.workload.memory import param_count
    from phaze.workload.zoo import list_models

    return [ZooEntry(m, param_count(m)) for m in list_models()]


def model_file_text(model: ModelConfig, comment: str = "") -> str:
    """``model`` as a YAML model file (read back by ``--model FILE`` into an equal ModelConfig)."""
    from phaze.workload.zoo import model_to_yaml

    return model_to_yaml(model, comment)
