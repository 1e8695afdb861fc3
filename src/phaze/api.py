"""The public API: one call per CLI command, each returning plain data a notebook user can inspect.

This module only composes the stages (workload -> cost -> schedule -> placement -> search -> report);
every formula lives in the stage that owns it.
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
# the runtime defaults and choices are re-exported for the CLI's flags
from phaze.workload.config import (DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE, DEFAULT_TP_OVERLAP_CONFIG,  # noqa: F401
                                   DIRECTIONS, GRAD_DTYPES, LAYER_KINDS, OPTIMIZER_STATES, ModelConfig,
                                   TrainSetting)


def resolve_model(model: str | ModelConfig) -> ModelConfig:
    from phaze.workload.zoo import get_model
    return get_model(model)


def resolve_accelerator(acc: str | Accelerator) -> Accelerator:
    from phaze.hardware.presets import get_accelerator
    return acc if isinstance(acc, Accelerator) else get_accelerator(acc)


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
    from phaze.workload.graphs import layer_graph
    from phaze.workload.ops import Collective, Gemm, op_resource

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    tier = _tp_tier(cluster, acc, tp)
    arrays = acc.as_arrays()
    rows, totals = [], {}
    for kind in LAYER_KINDS:
        for direction in DIRECTIONS:
            g = layer_graph(m, setting, kind, direction)
            total = 0.0
            for op in g.ops:
                res = op_resource(op)
                if isinstance(op, Collective):
                    one = all_ = float(op_latency_s(op, arrays, 1, tier)[0])
                else:
                    n = acc.num_tc if isinstance(op, Gemm) else acc.num_vc
                    one = float(op_latency_s(op, arrays, 1)[0])
                    all_ = float(op_latency_s(op, arrays, n)[0])
                total += all_
                rows.append(OpEstimate(kind, direction, op.name, res, float(op.flops),
                                       float(getattr(op, "bytes_moved", getattr(op, "bytes", 0))), one, all_))
            totals[(kind, direction)] = total
    return Estimate(m.name, acc, setting, tuple(rows), totals)


# estimate and schedule cost one chip's tensor-parallel collectives on a cluster of this many devices (or tp,
# if larger): one DGX node of 8 GPUs, so a group of up to 8 sits on the node's NVLink tier exactly as it
# would inside any larger dgx-a100/dgx-h100 cluster.
TP_CLUSTER_MIN_DEVICES = 8


def _tp_tier(cluster, acc: Accelerator, tp: int):
    """The network tier a tensor-parallel group of ``tp`` devices crosses (for one-chip estimates); ``cluster``:
    a name, a cluster file or a ``Cluster`` object."""
    from phaze.hardware.cluster import Cluster
    from phaze.hardware.presets import get_cluster

    if isinstance(cluster, Cluster):
        return cluster.tier_for_group(tp, 1, "tp")
    return get_cluster(cluster or default_cluster(acc), max(TP_CLUSTER_MIN_DEVICES, tp)).tier_for_group(tp, 1, "tp")


def default_cluster(acc: Accelerator) -> str:
    """GPU presets live in their DGX clusters; designed chips on the paper's flat 4 GiB/s network."""
    return {"a100-80g": "dgx-a100", "h100-80g": "dgx-h100"}.get(acc.name, "flat-4gib")


def check_ranges(**values) -> None:
    """Each value (or each item of a list) within its ``phaze.limits.RANGES`` bounds; the error names the flag."""
    from phaze.limits import check_all

    check_all(**values)


@dataclass(frozen=True)
class LayerSchedule:
    layer: str
    direction: str
    makespan_s: float
    lower_bound_s: float
    status: str
    gap: float
    solve_time_s: float
    utilization: dict  # resource -> busy core-seconds / (cores * makespan)
    ops: tuple  # ScheduledOp


def schedule_layers(model: str | ModelConfig, accelerator: str | Accelerator, mbs: int = 1, seq: int | None = None,
                    tp: int = 1, sequence_parallel: bool = False, recompute: str = "none",
                    layers: tuple[str, ...] | None = None, time_limit_s: float = 5.0,
                    cluster: str | None = None) -> list[LayerSchedule]:
    """The optimal (or bounded) schedule of each layer kind, forward and backward, on one chip."""
    from phaze.schedule import build_problem, solve
    from phaze.schedule import validate as check_schedule
    from phaze.workload.graphs import layer_graph

    check_ranges(time_limit=time_limit_s)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    setting = make_setting(m, mbs, seq, tp, sequence_parallel, recompute)
    for kind in layers or ():
        if kind not in LAYER_KINDS:
            raise ConfigError(f"unknown layer kind {kind!r}; choose from {', '.join(LAYER_KINDS)}")
    tier = _tp_tier(cluster, acc, tp)
    out = []
    for kind in layers or LAYER_KINDS:
        for direction in DIRECTIONS:
            problem = build_problem(layer_graph(m, setting, kind, direction), acc, tier)
            sched = solve(problem, time_limit_s=time_limit_s)
            check_schedule(problem, sched)
            caps = {"tc": acc.num_tc, "vc": acc.num_vc, "net": 1}
            util = {k: sched.core_utilization(k, cap) for k, cap in caps.items()}
            out.append(LayerSchedule(kind, direction, sched.makespan_s, sched.lower_bound_s, sched.status, sched.gap,
                                     sched.solve_time_s, util, sched.ops))
    return out


def resolve_cluster(cluster, accelerator: Accelerator, devices: int):
    """A Cluster object, ``NAME`` or ``NAME:N`` (a cluster of N devices), or a YAML/JSON cluster file; the
    default cluster follows the accelerator. Asking for more devices than it has is an InfeasibleError."""
    from phaze.errors import InfeasibleError
    from phaze.hardware.cluster import Cluster
    from phaze.hardware.presets import get_cluster

    if isinstance(cluster, Cluster):
        return cluster.with_devices(devices)
    name, _, size = (cluster or default_cluster(accelerator)).partition(":")
    if size and not name.lower().endswith((".yaml", ".yml", ".json")):
        try:
            n = int(size)
        except ValueError:
            raise ConfigError(f"--cluster {cluster!r}: the size after ':' must be an integer, e.g. dgx-a100:64") from None
        if devices > n:
            raise InfeasibleError(f"{devices} devices requested but cluster {name} has {n}; lower --devices or "
                                  f"use a larger cluster")
    elif size:
        name = cluster
    return get_cluster(name, devices)


def validate_chip():
    """phaze's GEMM cycles on one tensor core vs ZigZag and SCALE-Sim over the shipped panel
    (``phaze.validation.chip``; docs/chip-validation.md): a ChipValidationReport with per-case cycles and
    signed errors, mean and max |error| per tool, and whether the goal (15% max, 5% mean vs ZigZag) is met."""
    from phaze.validation.chip import validate_chip as run
    return run()


def validate_chip_energy():
    """phaze's GEMM energy on one tensor core vs ZigZag's minimum-energy mapping under the same per-access
    energies, over the shipped energy panel (``phaze.validation.chip_energy``; docs/chip-validation.md): an
    EnergyReport with per-case energies by part, mean and max |error|, the cases phaze counts below ZigZag's
    minimum, and whether the goal (15% max, 5% mean) is met."""
    from phaze.validation.chip_energy import validate_chip_energy as run
    return run()


# The placement stage's calls (plan, evaluate and their runtime checks) in phaze.api_plan; the search stage's calls
# (co-search, Spotlight-style baseline, reproduce, results) in phaze.api_search; listings
# (zoo, presets and space, validation, model files) and reports and settings (HTML, assumption rows) in
# phaze.api_info and phaze.api_report, re-exported here so `phaze.api` stays the one surface the CLI calls.
from phaze.api_plan import (DEFAULT_ATTENTION, DEFAULT_PRECISION, check_tp_overlap_config, evaluate_plan,  # noqa: E402
                            plan)
from phaze.api_search import reproduce, results, search, search_spec, spotlight  # noqa: E402
from phaze.api_info import ZooEntry, arch, chip_file, model_file_text, models, validate  # noqa: E402
from phaze.api_report import (check_html_path, exact_rows, load_reproduce_rows, load_search, plan_report,  # noqa: E402
                              plan_setting, report, search_report, search_setting)
