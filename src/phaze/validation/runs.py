"""Published training runs as validation cases: the file shape of ``data/published_runs.json``.

Each run names its source, the full model description (the fields of ``ModelConfig``), the plan (t, p, d,
microbatch, global batch, interleaving, recompute, sequence parallelism, ZeRO-1) and its runtime features
(attention kernel, precision, TP-communication overlap, overlapped gradient reduce), the measured
iteration time in seconds, and how it was converted and what was assumed where the source is silent::

  {"about": "...", "runs": [{"case": "...", "group": "SC21-T1", "source": "...", "accelerator": "a100-80g",
    "cluster": "dgx-a100", "devices": 32, "tp": 1, "pp": 1, "dp": 32, "mbs": 16, "global_batch": 512,
    "interleave": 1, "recompute": "full", "sequence_parallel": false, "zero1": false,
    "attention": "standard", "precision": "fp16", "tp_comm_overlap": false, "overlap_grad_reduce": false,
    "tp_comm_overlap_config": "te-default" (optional: the userbuffers configuration, default nemo-gpt3-175b-h100),
    "grad_dtype": "bf16" (optional: the gradient buffer and DP reduce format, default fp32),
    "optimizer_state": "fp32-remainders" (optional: what Adam keeps per parameter, default fp32),
    "deterministic": true (optional: PyTorch's deterministic mode, Megatron-LM --deterministic-mode, default false),
    "gradient_accumulation_fusion": false (optional: Megatron-LM --no-gradient-accumulation-fusion, default true),
    "measured_iteration_time_s": 3.528 (optional when the run gives its peak memory),
    "measured_peak_memory_bytes": 6.07e10 (optional: peak allocated on a device of the last pipeline stage), "conversion": "...", "assumptions": ["..."],
    "model": {"name": "...", "num_layers": 24, "hidden": 2304, ...}}]}
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from phaze.errors import ConfigError
from phaze.cost.userbuffers import ub_config_names
from phaze.validation.case_types import Cases, TimeCase, validated
from phaze.workload.config import DEFAULT_TP_OVERLAP_CONFIG, ModelConfig, RecomputeMode

PosInt = Annotated[int, Field(strict=True, gt=0)]


class _Run(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    case: str
    group: str
    source: str
    accelerator: str
    cluster: str
    devices: PosInt
    tp: PosInt
    pp: PosInt
    dp: PosInt
    cp: PosInt = 1
    mbs: PosInt
    global_batch: PosInt
    interleave: PosInt = 1
    recompute: RecomputeMode
    sequence_parallel: bool
    zero1: bool
    attention: Literal["standard", "flash"]
    precision: Literal["fp16", "bf16", "fp8"]
    tp_comm_overlap: bool
    # the run's Transformer Engine userbuffers configuration (a name of phaze.cost.userbuffers.ub_config_names());
    # the evidence for it goes into the run's source / assumptions
    tp_comm_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG
    overlap_grad_reduce: bool
    # the gradient buffer / DP reduce format: fp32 (Megatron-LM, NeMo's default grad_sync_dtype) unless the run's
    # configuration says bf16 (its source in the run's assumptions)
    grad_dtype: Literal["fp32", "bf16"] = "fp32"
    # what Adam keeps per parameter (phaze.workload.config.OPTIMIZER_STATES): fp32 master + m + v (Megatron)
    # unless the run's configuration says otherwise (its source in the run's assumptions)
    optimizer_state: Literal["fp32", "fp32-remainders", "bf16-master", "bf16"] = "fp32"
    # the run used PyTorch's deterministic mode (Megatron-LM --deterministic-mode; phaze.cost.gpu_determinism)
    deterministic: bool = False
    # Megatron-LM's gradient-accumulation fusion; false when the run sets --no-gradient-accumulation-fusion
    # (phaze.cost.gpu_layer.grad_accumulate_s)
    gradient_accumulation_fusion: bool = True
    # the measured iteration time; a run may instead (or also) give its measured peak memory
    measured_iteration_time_s: Annotated[float, Field(gt=0)] | None = None
    # optional: the measured peak allocated bytes of one device of the last pipeline stage (PyTorch's
    # allocated_bytes.all.peak; Megatron-LM logs it from the last rank as mem-max-allocated-bytes)
    measured_peak_memory_bytes: Annotated[float, Field(gt=0)] | None = None
    conversion: str = ""
    assumptions: list[str] = []
    model: dict[str, Any]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    about: str = ""
    runs: list[_Run]


def _mode(recompute: str, sp: bool) -> str:
    """The Korthikanti et al. mode name of (recompute, sequence parallelism)."""
    return {("none", False): "none", ("none", True): "seq", ("selective", False): "sel",
            ("selective", True): "seqsel", ("full", False): "full", ("full", True): "full"}[(recompute, sp)]


def runs_from_mapping(data: Any, source: str):
    """Validate a parsed published-runs document into ``Cases`` (time cases only)."""
    spec = validated(_File, data, source)
    if not spec.runs:
        raise ConfigError(f"{source}: no runs; add entries under 'runs'")
    out = []
    for i, r in enumerate(spec.runs):
        where = f"{source}: runs[{i}] ({r.case})"
        if r.devices != r.tp * r.pp * r.dp * r.cp:
            raise ConfigError(f"{where}: devices {r.devices} != tp x pp x cp x dp = {r.tp * r.pp * r.dp * r.cp}")
        if r.global_batch % (r.mbs * r.dp):
            raise ConfigError(f"{where}: global_batch {r.global_batch} is not a multiple of mbs x dp = {r.mbs * r.dp}")
        if r.measured_iteration_time_s is None and r.measured_peak_memory_bytes is None:
            raise ConfigError(f"{where}: no measurement; give measured_iteration_time_s, measured_peak_memory_bytes "
                              f"or both")
        if r.tp_comm_overlap_config not in ub_config_names():
            raise ConfigError(f"{where}: unknown tp_comm_overlap_config {r.tp_comm_overlap_config!r}; use one of "
                              f"{', '.join(ub_config_names())}")
        try:
            model = ModelConfig(**r.model)
        except TypeError as err:
            raise ConfigError(f"{where}: model: {err}") from None
        except ConfigError as err:
            raise ConfigError(f"{where}: {err}") from None
        out.append(TimeCase(model, r.devices, r.tp, r.pp, r.dp, r.global_batch, r.mbs, r.interleave,
                            _mode(r.recompute, r.sequence_parallel), r.measured_iteration_time_s, r.accelerator,
                            r.cluster, group=r.group, name=r.case, zero1=r.zero1, attention=r.attention,
                            precision=r.precision, tp_overlap=r.tp_comm_overlap and r.sequence_parallel,
                            dp_overlap=r.overlap_grad_reduce, recompute=r.recompute,
                            sequence_parallel=r.sequence_parallel and r.tp > 1, cp=r.cp,
                            tp_overlap_config=r.tp_comm_overlap_config, grad_dtype=r.grad_dtype,
                            optimizer_state=r.optimizer_state, deterministic=r.deterministic,
                            grad_accum_fusion=r.gradient_accumulation_fusion,
                            measured_peak_memory_bytes=r.measured_peak_memory_bytes))
    about = spec.about.split(".")[0] if spec.about else "published runs"
    return Cases(f"{source}: {about}", tuple(out), ())
