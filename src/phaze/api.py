"""The public API: one call per CLI command, each returning plain data a notebook user can inspect.

This module only composes the stages (workload -> cost -> schedule -> placement -> search -> report);
every formula lives in the stage that owns it.
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import ModelConfig, TrainSetting

LAYER_KINDS = ("embedding", "block", "head")
DIRECTIONS = ("fwd", "bwd")


def resolve_model(model: str | ModelConfig) -> ModelConfig:
    from phaze.workload.zoo import get_model
    return model if isinstance(model, ModelConfig) else get_model(model)


def resolve_accelerator(acc: str | Accelerator) -> Accelerator:
    from phaze.hardware.presets import get_accelerator
    return acc if isinstance(acc, Accelerator) else get_accelerator(acc)


def make_setting(model: ModelConfig, mbs: int = 1, seq: int | None = None, tp: int = 1,
                 sequence_parallel: bool = False, recompute: str = "none") -> TrainSetting:
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
    model: ModelConfig
    setting: TrainSetting
    params: int
    train_flops_per_token: float
    layers: tuple[LayerSummary, ...]


def show_model(model: str | ModelConfig, mbs: int = 1, seq: int | None = None, tp: int = 1,
               sequence_parallel: bool = False, recompute: str = "none") -> ModelSummary:
    """Parameters, training FLOPs per token, and each layer kind's ops and memory per device."""
    from phaze.workload.graphs import layer_graph
    from phaze.workload.memory import layer_memory, param_count

    m = resolve_model(model)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    seq_counts = {k: m.layer_sequence().count(k) for k in LAYER_KINDS}
    layers, total_flops = [], 0.0
    for kind in LAYER_KINDS:
        fwd = layer_graph(m, setting, kind, "fwd")
        bwd = layer_graph(m, setting, kind, "bwd")
        mem = layer_memory(m, setting, kind)
        total_flops += seq_counts[kind] * (fwd.flops + bwd.flops) * setting.tp
        layers.append(LayerSummary(kind, seq_counts[kind], fwd.flops, bwd.flops, tuple(op.name for op in fwd.ops),
                                   mem.params, mem.weight_bytes, mem.grad_bytes, mem.optimizer_bytes,
                                   mem.activation_bytes))
    tokens = setting.microbatch_size * setting.seq_len
    return ModelSummary(m, setting, param_count(m), total_flops / tokens, tuple(layers))


@dataclass(frozen=True)
class OpEstimate:
    layer: str
    direction: str
    name: str
    resource: str
    flops: float
    bytes_moved: float
    latency_one_core_s: float
    latency_all_cores_s: float


@dataclass(frozen=True)
class Estimate:
    model: str
    accelerator: Accelerator
    setting: TrainSetting
    ops: tuple[OpEstimate, ...]
    layer_totals_s: dict  # (layer, direction) -> sum of all-core latencies (ops one after another)


def estimate(model: str | ModelConfig, accelerator: str | Accelerator, mbs: int = 1, seq: int | None = None,
             tp: int = 1, sequence_parallel: bool = False, recompute: str = "none",
             cluster: str | None = None) -> Estimate:
    """Per-op latency on one core and on all cores of its kind, and per-layer sequential totals."""
    from phaze.cost import op_latency_s
    from phaze.hardware.presets import get_cluster
    from phaze.workload.graphs import layer_graph
    from phaze.workload.ops import Collective, Gemm, op_resource

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    tier = get_cluster(cluster or default_cluster(acc), max(8, tp)).tier_for_group(tp)
    arch = acc.as_arrays()
    rows, totals = [], {}
    for kind in LAYER_KINDS:
        for direction in DIRECTIONS:
            g = layer_graph(m, setting, kind, direction)
            total = 0.0
            for op in g.ops:
                res = op_resource(op)
                if isinstance(op, Collective):
                    one = all_ = float(op_latency_s(op, arch, 1, tier)[0])
                else:
                    n = acc.num_tc if isinstance(op, Gemm) else acc.num_vc
                    one = float(op_latency_s(op, arch, 1)[0])
                    all_ = float(op_latency_s(op, arch, n)[0])
                total += all_
                rows.append(OpEstimate(kind, direction, op.name, res, float(op.flops),
                                       float(getattr(op, "bytes_moved", getattr(op, "bytes", 0))), one, all_))
            totals[(kind, direction)] = total
    return Estimate(m.name, acc, setting, tuple(rows), totals)


def default_cluster(acc: Accelerator) -> str:
    """GPU presets live in their DGX clusters; designed chips on the paper's flat 4 GiB/s network."""
    return {"a100-80g": "dgx-a100", "h100-80g": "dgx-h100"}.get(acc.name, "flat-4gib")


def check_positive(**values: float) -> None:
    for name, v in values.items():
        if v is not None and v <= 0:
            raise ConfigError(f"--{name.replace('_', '-')} must be positive, got {v}")
