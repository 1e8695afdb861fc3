"""Compare phaze's time and memory model against published measurements (``validate``).

Time: each case's plan (Plan.balanced over p x v virtual stages, the case's t, d, microbatch and mode)
through ``phaze.placement.evaluate`` with the named accelerator and cluster presets; one set of preset
constants for every case (docs/validation.md lists their sources).

Memory: the published figures (Korthikanti et al. 2022, Fig. 1) count the transformer layers of the first
pipeline stage only: "params_grads_optimizer" = 18 B x 12 L h^2 / (t p) (no embedding, biases or norms) and
"activations" = the stashed activations of the stage's layers for its in-flight microbatches. We compare
the same quantity -- the blocks of stage 0 -- and report our whole-stage figure (which adds the embedding,
its stash and the transient recompute buffer) next to it as ``stage_total_gib``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement.evaluation import evaluate, plan_costs
from phaze.workload.runtime import DEFAULT_MEMORY_RESERVE_BYTES
from phaze.placement.plan import Plan
from phaze.placement.recompute import Recompute
from phaze.progress import Progress
from phaze.validation.cases import HELD_OUT2_FILE, HELD_OUT3_FILE, HELD_OUT4_FILE, HELD_OUT_FILE, MODES, Cases, MemoryCase, TimeCase, load_cases, packaged_cases
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PAPER_RUNTIME, Runtime
from phaze.units import GiB



@dataclass(frozen=True)
class TimeResult:
    case: str
    model: ModelConfig
    plan: Plan
    mode: str
    predicted_s: float
    measured_s: float
    error_pct: float  # signed: (predicted - measured) / measured * 100
    group: str = ""
    fits: bool = True  # the plan fits in HBM minus the default reserve (every published run trained)
    memory_gib: float = 0.0  # predicted peak memory per device
    capacity_gib: float = 0.0  # usable memory per device (HBM minus the reserve)


@dataclass(frozen=True)
class GroupSummary:
    group: str
    cases: int
    time_mean_abs_pct: float
    time_max_abs_pct: float
    fitting: int  # cases whose plan fits


@dataclass(frozen=True)
class MemoryResult:
    case: str
    model: ModelConfig
    plan: Plan
    quantity: str  # "params_grads_optimizer" or "activations"
    mode: str
    predicted_gib: float  # transformer blocks of the first stage (the published quantity)
    measured_gib: float
    error_pct: float
    stage_total_gib: float  # our whole first stage for this quantity (incl. embedding / head / buffers)
    group: str = ""  # a run's group (its source); empty for the Korthikanti et al. figures


@dataclass(frozen=True)
class ValidationReport:
    source: str
    time: tuple[TimeResult, ...]
    memory: tuple[MemoryResult, ...]
    time_mean_abs_pct: float
    time_max_abs_pct: float
    memory_mean_abs_pct: float
    memory_max_abs_pct: float
    groups: tuple[GroupSummary, ...] = ()

    def to_dict(self) -> dict:
        def row(r) -> dict:
            d = {k: v for k, v in asdict(r).items() if k not in ("model", "plan")}
            d["model"] = r.model.name
            d["plan"] = r.plan.describe()
            return d
        return {"source": self.source, "time": [row(r) for r in self.time],
                "memory": [row(r) for r in self.memory],
                "time_mean_abs_pct": self.time_mean_abs_pct, "time_max_abs_pct": self.time_max_abs_pct,
                "memory_mean_abs_pct": self.memory_mean_abs_pct, "memory_max_abs_pct": self.memory_max_abs_pct,
                "groups": [asdict(g) for g in self.groups]}


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas * 100.0


# Korthikanti et al.'s memory cases: Megatron-LM's fused-softmax attention in fp16, no overlap, the whole HBM
MEMORY_CASE_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)


def _plan(model: ModelConfig, pp: int, tp: int, dp: int, mbs: int, gb: int, v: int, mode: str) -> Plan:
    recompute, sp = MODES[mode]
    return Plan.balanced(model.num_layers, pp, tp, dp, mbs, gb // (mbs * dp), interleave=v,
                         recompute=Recompute.uniform(recompute), sequence_parallel=sp and tp > 1,
                         runtime=MEMORY_CASE_RUNTIME)


def case_runtime(c: TimeCase) -> Runtime:
    """The runtime a published run was measured under (its fields; the default memory reserve)."""
    return Runtime(attention=c.attention, precision=c.precision, grad_dtype=c.grad_dtype,
                   optimizer_state=c.optimizer_state, tp_overlap=c.tp_overlap, tp_overlap_config=c.tp_overlap_config,
                   dp_overlap=c.dp_overlap, deterministic=c.deterministic, grad_accum_fusion=c.grad_accum_fusion,
                   memory_reserve_bytes=DEFAULT_MEMORY_RESERVE_BYTES)


def _time(c: TimeCase) -> TimeResult:
    return _time_result(c, *_plan_evaluation(c))


def _plan_evaluation(c: TimeCase):
    """(the case's plan, its Evaluation)."""
    sp = (c.sequence_parallel if c.recompute else MODES[c.mode][1]) and c.tp > 1
    plan = Plan.balanced(
        c.model.num_layers, c.pp, c.tp, c.dp, c.microbatch, c.global_batch // (c.microbatch * c.dp),
        interleave=c.interleave, recompute=Recompute.uniform(c.recompute or MODES[c.mode][0]),
        sequence_parallel=sp, zero=int(c.zero1), cp=c.cp, runtime=case_runtime(c))
    ev = evaluate(plan, c.model, get_accelerator(c.accelerator), get_cluster(c.cluster, c.gpus), c.global_batch)
    return plan, ev


def _time_result(c: TimeCase, plan: Plan, ev) -> TimeResult:
    if c.measured_s is None:
        raise ValueError(f"{c.label}: no measured iteration time (a memory-only run)")
    return TimeResult(c.label, c.model, plan, c.mode, ev.iteration_time_s, c.measured_s,
                      _err(ev.iteration_time_s, c.measured_s), c.group, ev.fits, ev.memory_bytes_per_device / GiB,
                      ev.memory_capacity_bytes / GiB)


# The quantity of a run's measured peak memory: PyTorch's peak allocated bytes on a device of the last pipeline
# stage (Megatron-LM logs it from the last rank); ours is that stage's modelled peak (weights, gradients,
# optimizer state, the stash at its peak and the transient buffers; no allocator or CUDA-context overhead).
RUN_PEAK_QUANTITY = "peak_allocated_last_stage"


def _run_memory(c: TimeCase, plan: Plan, ev) -> MemoryResult:
    """A run's measured peak memory against the last stage's modelled peak."""
    pred = ev.stages[-1].memory_bytes / GiB
    meas = c.measured_peak_memory_bytes / GiB
    return MemoryResult(c.label, c.model, plan, RUN_PEAK_QUANTITY, c.mode, pred, meas, _err(pred, meas), pred,
                        c.group)


def group_summaries(time: tuple[TimeResult, ...]) -> tuple[GroupSummary, ...]:
    """Mean and max |error| and the fitting count of each group, in the order the groups first appear."""
    out = []
    for g in dict.fromkeys(r.group for r in time):
        rs = [r for r in time if r.group == g]
        a = [abs(r.error_pct) for r in rs]
        out.append(GroupSummary(g, len(rs), sum(a) / len(a), max(a), sum(r.fits for r in rs)))
    return tuple(out)


def _memory(c: MemoryCase) -> list[MemoryResult]:
    acc = get_accelerator(c.accelerator)
    out = []
    for i, (mode, measured) in enumerate(c.activation_gib):
        plan = _plan(c.model, c.pp, c.tp, 1, c.microbatch, c.global_batch, c.interleave, mode)
        cluster = get_cluster(c.cluster, plan.devices)
        ev = evaluate(plan, c.model, acc, cluster, c.global_batch)
        costs = plan_costs(plan, c.model, acc, cluster)[plan.recompute_of(0)]
        s0 = ev.stages[0]
        L = c.model.num_layers  # layers 1..L are blocks; 0 is the embedding, L + 1 the head
        blocks = sum(max(0, min(b, L + 1) - max(a, 1)) for a, b in plan.chunks_of(0))
        if i == 0:  # the static memory does not depend on the mode
            static_total = s0.weight_bytes + s0.grad_bytes + s0.optimizer_bytes
            pred = blocks * costs.block.static_bytes / GiB
            out.append(MemoryResult(c.label, c.model, plan, "params_grads_optimizer", "-", pred, c.static_gib,
                                    _err(pred, c.static_gib), static_total / GiB))
        pred = s0.in_flight_microbatches * blocks * costs.block.activation_bytes / GiB
        total = (s0.activation_bytes + s0.working_bytes) / GiB
        out.append(MemoryResult(c.label, c.model, plan, "activations", mode, pred, measured, _err(pred, measured),
                                total))
    return out


def validate(cases: Cases | str | Path | None = None, progress: Progress | None = None) -> ValidationReport:
    """Evaluate every case (default: the packaged published measurements and runs; "held-out" / "held-out-2" /
    "held-out-3" / "held-out-4": the packaged runs the model is never tuned on, ``HELD_OUT_FILE`` /
    ``HELD_OUT2_FILE`` / ``HELD_OUT3_FILE`` / ``HELD_OUT4_FILE``; or a Cases object or a path to a cases JSON
    file) and return predicted vs measured with signed % errors, whether each plan fits, a memory row for each run
    with a measured peak, and the summaries per group and overall. ``progress``: report each case as it finishes (default: silent)."""
    if cases == "held-out":
        cases = packaged_cases(HELD_OUT_FILE)
    elif cases == "held-out-2":
        cases = packaged_cases(HELD_OUT2_FILE)
    elif cases == "held-out-3":
        cases = packaged_cases(HELD_OUT3_FILE)
    elif cases == "held-out-4":
        cases = packaged_cases(HELD_OUT4_FILE)
    elif not isinstance(cases, Cases):
        cases = load_cases(cases)
    prog = progress or Progress(quiet=True)
    prog.stage("validating against published measurements", len(cases.time) + len(cases.memory), "cases")
    time, memory = [], []
    try:
        for c in cases.time:
            plan, ev = _plan_evaluation(c)
            if c.measured_s is not None:
                time.append(_time_result(c, plan, ev))
            if c.measured_peak_memory_bytes:
                memory.append(_run_memory(c, plan, ev))
            prog.advance()
        for c in cases.memory:
            memory.extend(_memory(c))
            prog.advance()
        prog.done()
    finally:
        prog.close()
    time, memory = tuple(time), tuple(memory)
    ta = [abs(r.error_pct) for r in time]
    ma = [abs(r.error_pct) for r in memory]
    return ValidationReport(
        source=cases.source, time=time, memory=memory,
        time_mean_abs_pct=sum(ta) / len(ta) if ta else 0.0, time_max_abs_pct=max(ta, default=0.0),
        memory_mean_abs_pct=sum(ma) / len(ma) if ma else 0.0, memory_max_abs_pct=max(ma, default=0.0),
        groups=group_summaries(time))
