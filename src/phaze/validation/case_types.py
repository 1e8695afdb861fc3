"""The validation cases as frozen records (``TimeCase``, ``MemoryCase``, ``Cases``) and the one-line reading of a
pydantic schema's errors (``validated``): shared by the two file shapes that produce them, the published
measurements (``phaze.validation.cases``) and the published runs (``phaze.validation.runs``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from phaze.errors import ConfigError
from phaze.workload.config import DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE, DEFAULT_TP_OVERLAP_CONFIG, ModelConfig


@dataclass(frozen=True)
class TimeCase:
    """One measured run: its iteration time (seconds per global batch; None for a run measured only for its
    peak memory, ``measured_peak_memory_bytes``)."""

    model: ModelConfig
    gpus: int
    tp: int
    pp: int
    dp: int
    global_batch: int
    microbatch: int
    interleave: int
    mode: str
    measured_s: float | None
    accelerator: str = "a100-80g"
    cluster: str = "dgx-a100"
    group: str = ""  # the source the case belongs to (one table per group)
    name: str = ""  # the source's own name for the run, if any
    # the plan's runtime features (Korthikanti et al.'s runs: Megatron-LM 2022, none of them)
    zero1: bool = False
    attention: str = "standard"
    precision: str = "fp16"
    tp_overlap: bool = False
    dp_overlap: bool = False
    recompute: str = ""  # explicit (recompute, sequence_parallel); empty: from ``mode`` (MODES)
    sequence_parallel: bool = False
    cp: int = 1  # context parallelism
    tp_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG  # the run's userbuffers configuration (phaze.cost.userbuffers)
    grad_dtype: str = DEFAULT_GRAD_DTYPE  # the run's gradient buffer / DP reduce format (fp32 or bf16)
    optimizer_state: str = DEFAULT_OPTIMIZER_STATE  # what the run's Adam keeps per parameter (OPTIMIZER_STATES)
    deterministic: bool = False  # the run used PyTorch's deterministic mode (Megatron-LM --deterministic-mode)
    grad_accum_fusion: bool = True  # False: the run set --no-gradient-accumulation-fusion (Megatron-LM)
    # measured peak allocated bytes on one device of the last pipeline stage (PyTorch's allocated_bytes.all.peak
    # as Megatron-LM logs it from the last rank), if the source gives it
    measured_peak_memory_bytes: float | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return f"{self.model.name} t={self.tp} p={self.pp} d={self.dp} v={self.interleave} {self.mode}"


@dataclass(frozen=True)
class MemoryCase:
    """Measured memory per GPU on the first pipeline stage: static (params + grads + optimizer state) and
    the activations of each listed mode, in GiB."""

    model: ModelConfig
    tp: int
    pp: int
    microbatch: int
    interleave: int
    global_batch: int
    static_gib: float
    activation_gib: tuple[tuple[str, float], ...]
    accelerator: str = "a100-80g"
    cluster: str = "dgx-a100"

    @property
    def label(self) -> str:
        return f"{self.model.name} t={self.tp} p={self.pp} v={self.interleave}"


@dataclass(frozen=True)
class Cases:
    source: str
    time: tuple[TimeCase, ...]
    memory: tuple[MemoryCase, ...]

    def __add__(self, other: "Cases") -> "Cases":
        return Cases(f"{self.source}; {other.source}", self.time + other.time, self.memory + other.memory)


def _describe(err: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in err["loc"]) or "<top level>"
    if err["type"] == "missing":
        return f"missing field '{where}'"
    if err["type"] == "extra_forbidden":
        return f"unknown field '{where}'"
    return f"field '{where}': {err['msg']} (got {err.get('input')!r})"


def validated(schema: type[BaseModel], data: Any, source: str):
    """``schema.model_validate(data)``, its first three problems as one ConfigError line naming the fields."""
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        more = f" (and {len(errs) - 3} more)" if len(errs) > 3 else ""
        raise ConfigError(f"{source}: " + "; ".join(_describe(e) for e in errs[:3]) + more
                          + "; see docs/validation.md for the file shape") from None
