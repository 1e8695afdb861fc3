"""The training plan and the results of evaluating and optimizing it (frozen plain data, SI units).

Layers are numbered over ``model.layer_sequence()``: 0 = embedding, 1..L = blocks, L+1 = head.
Devices are numbered tensor-parallel rank fastest, then data-parallel rank, then pipeline stage
(Megatron-LM's default "tp-dp-pp" order): device = tp_rank + t * (dp_rank + d * stage). So a TP group is
t consecutive devices, a DP group d devices t apart, and neighbouring pipeline stages are t*d apart.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, fields
from typing import Iterable, Mapping

from phaze.errors import ConfigError
from phaze.placement.recompute import Recompute
from phaze.workload.config import DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE, DEFAULT_TP_OVERLAP_CONFIG
from phaze.workload.runtime import PlanSpace, Runtime, RuntimeFields


@dataclass(frozen=True)
class Plan(RuntimeFields):
    """One training plan.

    ``stages``: the (first_layer, last_layer_exclusive) ranges of the pipeline's virtual stages in order.
    With ``interleave`` = v > 1 there are p*v of them and virtual stage k runs on pipeline device k % p
    (Megatron's interleaved 1F1B); with v = 1 they are the p pipeline stages. ``recompute``: a
    ``Recompute``, one mode for every stage or one per pipeline device stage. ``zero``: the ZeRO stage over
    the d x cp ranks that hold the same weights (``phaze.placement.stage.ZERO_STAGES``: 1 shards the optimizer
    state and its update, Megatron's distributed optimizer; 2 also the gradients; 3 also the weights, FSDP);
    ``zero1`` reads whether it is at least 1.

    ``cp``: context parallelism (each sequence split over cp devices, ring attention between them; devices =
    p * t * cp * d, numbered tp, cp, dp, pp). ``runtime``: the ``Runtime`` the plan runs under (attention
    kernel, number formats, overlaps, determinism, fusion, memory reserve); its fields read as the plan's own
    (``plan.attention`` is ``plan.runtime.attention``).
    """

    stages: tuple[tuple[int, int], ...]
    tp: int
    dp: int
    microbatch_size: int
    num_microbatches: int
    recompute: Recompute = Recompute.uniform("none")
    sequence_parallel: bool = False
    interleave: int = 1
    zero: int = 0
    cp: int = 1
    runtime: Runtime = field(kw_only=True)
    ep: int = field(default=1, kw_only=True)  # expert parallelism (MoE): ep x etp divides tp x cp x dp
    etp: int = field(default=1, kw_only=True)  # expert tensor parallelism

    def __post_init__(self) -> None:
        if not isinstance(self.runtime, Runtime):
            raise ConfigError(f"plan: runtime must be a Runtime, got {self.runtime!r}")
        from phaze.cost.userbuffers import get_ub_config
        get_ub_config(self.tp_overlap_config)  # ConfigError naming the known configurations
        if not isinstance(self.cp, int) or isinstance(self.cp, bool) or self.cp < 1:
            raise ConfigError(f"plan: 'cp' must be a positive integer, got {self.cp!r}")
        if isinstance(self.zero, bool):
            object.__setattr__(self, "zero", int(self.zero))
        if self.zero not in (0, 1, 2, 3):
            raise ConfigError(f"plan: 'zero' must be a ZeRO stage 0, 1, 2 or 3, got {self.zero!r}")
        for f in ("tp", "dp", "microbatch_size", "num_microbatches", "interleave", "ep", "etp"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"plan: '{f}' must be a positive integer, got {v!r}")
        if (self.tp * self.cp * self.dp) % (self.ep * self.etp):
            raise ConfigError(f"plan: ep x etp = {self.ep * self.etp} must divide tp x cp x dp = "
                              f"{self.tp * self.cp * self.dp} (the experts fold over the same devices)")
        self.runtime.check_shape(tp=self.tp, sequence_parallel=self.sequence_parallel, cp=self.cp, what="plan: ")
        st = tuple(tuple(int(x) for x in r) for r in self.stages)
        object.__setattr__(self, "stages", st)
        if not st:
            raise ConfigError("plan: needs at least one pipeline stage")
        if st[0][0] != 0:
            raise ConfigError(f"plan: the first stage must start at layer 0, got {st[0]}")
        for a, b in zip(st, st[1:]):
            if a[1] != b[0]:
                raise ConfigError(f"plan: stages {a} and {b} are not contiguous")
        for r in st:
            if len(r) != 2 or r[1] <= r[0]:
                raise ConfigError(f"plan: stage {r} must be a non-empty (first, last_exclusive) range")
        if len(st) % self.interleave:
            raise ConfigError(f"plan: {len(st)} virtual stages are not a multiple of interleave {self.interleave}")
        if not isinstance(self.recompute, Recompute):
            raise ConfigError(f"plan: recompute must be a Recompute (e.g. Recompute.parse('full')), "
                              f"got {self.recompute!r}")
        if self.recompute.stages not in (1, self.pp):
            raise ConfigError(f"plan: {self.recompute.stages} per-stage recompute modes for {self.pp} pipeline stages")

    @property
    def zero1(self) -> bool:
        """The optimizer state is sharded (ZeRO stage 1 or higher)."""
        return self.zero >= 1

    @property
    def pp(self) -> int:
        """Pipeline depth p (devices per pipeline)."""
        return len(self.stages) // self.interleave

    @property
    def devices(self) -> int:
        return self.pp * self.tp * self.cp * self.dp

    @property
    def grad_sync_ranks(self) -> int:
        """Devices holding the same weights: the data-parallel and context-parallel ranks (gradients are
        reduced, and ZeRO-1 shards the optimizer, over all of them)."""
        return self.dp * self.cp

    @property
    def num_layers(self) -> int:
        """Length of the layer sequence the plan covers (blocks + 2)."""
        return self.stages[-1][1]

    def recompute_of(self, device_stage: int) -> str:
        return self.recompute.mode_of(device_stage)

    @property
    def recompute_modes(self) -> tuple[str, ...]:
        return self.recompute.for_stages(self.pp)

    def chunks_of(self, device_stage: int) -> tuple[tuple[int, int], ...]:
        """The virtual stages (layer ranges) held by pipeline device ``device_stage``."""
        return self.stages[device_stage::self.pp]

    def describe(self) -> str:
        """One line; per-stage recompute modes as runs, e.g. "recompute=full*2/none*6"."""
        s = (f"p={self.pp} t={self.tp} {'cp=%d ' % self.cp if self.cp > 1 else ''}d={self.dp} mbs={self.microbatch_size} m={self.num_microbatches} "
             f"recompute={self.recompute.describe()}")
        if self.sequence_parallel:
            s += " sp"
        if self.ep > 1:
            s += f" ep={self.ep}"
        if self.etp > 1:
            s += f" etp={self.etp}"
        if self.interleave > 1:
            s += f" v={self.interleave}"
        if self.zero:
            s += f" zero{self.zero}"
        if self.attention != "standard":
            s += f" {self.attention}"
        if self.precision != "fp16":
            s += f" {self.precision}"
        if self.tp_overlap and self.tp > 1:
            s += " tp-overlap"
            if self.tp_overlap_config != DEFAULT_TP_OVERLAP_CONFIG:
                s += f"={self.tp_overlap_config}"
        if self.dp_overlap and self.dp > 1:
            s += " dp-overlap"
        if self.grad_dtype != DEFAULT_GRAD_DTYPE:
            s += f" grads={self.grad_dtype}"
        if self.optimizer_state != DEFAULT_OPTIMIZER_STATE:
            s += f" adam={self.optimizer_state}"
        if self.deterministic:
            s += " deterministic"
        if not self.grad_accum_fusion:
            s += " no-grad-accum-fusion"
        return s

    def to_dict(self) -> dict:
        """The plan as plain data: its shape, its runtime's fields under their own names, its stages."""
        return {"pp": self.pp, "tp": self.tp, "dp": self.dp, "microbatch_size": self.microbatch_size,
                "num_microbatches": self.num_microbatches,
                "recompute": self.recompute.to_json(),
                "sequence_parallel": self.sequence_parallel, "interleave": self.interleave,
                "zero": self.zero, "zero1": self.zero1, "cp": self.cp, "ep": self.ep, "etp": self.etp, **self.runtime.to_dict(),
                "stages": [list(r) for r in self.stages], "devices": self.devices}

    @classmethod
    def from_dict(cls, d: Mapping, runtime_default: Runtime | None = None) -> "Plan":
        """The plan ``to_dict`` wrote (derived keys such as pp and devices are ignored; recompute as a plain
        mode or a per-stage list, as stored files hold it; the runtime from its fields, those missing from
        ``runtime_default``, else ``Runtime()``)."""
        if not isinstance(d, Mapping) or "stages" not in d:
            raise ConfigError("plan: a stored plan needs its 'stages' (as `phaze plan --json` writes it)")
        kw = {k: v for k, v in d.items() if k in {f.name for f in fields(cls)} and k != "runtime"}
        if "zero" not in kw and "zero1" in d:  # files written before ZeRO-2/3
            kw["zero"] = 1 if d["zero1"] else 0
        try:
            kw["stages"] = tuple(tuple(r) for r in kw["stages"])
        except TypeError:
            raise ConfigError(f"plan: 'stages' must be a list of [first, last] ranges, got {d['stages']!r}") from None
        kw["recompute"] = Recompute.parse(kw.get("recompute", "none"), what="plan: recompute")
        return cls(**kw, runtime=Runtime.from_dict(d, runtime_default))

    @classmethod
    def balanced(cls, num_blocks: int, pp: int, tp: int, dp: int, microbatch_size: int, num_microbatches: int,
                 *, interleave: int = 1, **kw) -> "Plan":
        """Blocks split as evenly as possible over p*v virtual stages (the first ones get the extra
        blocks), embedding on the first, head on the last virtual stage. The same arguments give the same
        (frozen) plan object (``_balanced``: a plan search builds the same balanced plans for every chip)."""
        return _balanced(cls, num_blocks, pp, tp, dp, microbatch_size, num_microbatches, interleave,
                         tuple((k, type(v), v) for k, v in sorted(kw.items())))

    @classmethod
    def _balanced(cls, num_blocks: int, pp: int, tp: int, dp: int, microbatch_size: int, num_microbatches: int,
                  interleave: int, **kw) -> "Plan":
        n = pp * interleave
        if n - 2 > num_blocks:
            raise ConfigError(f"plan: {n} pipeline stages cannot split {num_blocks} blocks "
                              f"(at most {num_blocks + 2} stages)")
        if n == 1:
            return cls(((0, num_blocks + 2),), tp, dp, microbatch_size, num_microbatches, interleave=1, **kw)
        q, r = divmod(num_blocks, n)
        counts = [q + (1 if i < r else 0) for i in range(n)]
        if min(counts) == 0:  # fewer blocks than stages: the embedding and head get stages of their own
            inner = n - 2
            q, r = divmod(num_blocks, inner) if inner else (0, 0)
            counts = [0] + [q + (1 if i < r else 0) for i in range(inner)] + [0]
        bounds, pos = [], 0
        for i, c in enumerate(counts):
            a = pos
            pos += c + (1 if i == 0 else 0) + (1 if i == n - 1 else 0)
            bounds.append((a, pos))
        return cls(tuple(bounds), tp, dp, microbatch_size, num_microbatches, interleave=interleave, **kw)


@functools.lru_cache(maxsize=1 << 16, typed=True)
def _balanced(cls, num_blocks: int, pp: int, tp: int, dp: int, microbatch_size: int, num_microbatches: int,
              interleave: int, kw: tuple) -> Plan:
    """``Plan.balanced``, memoized by the arguments and their types (``kw``: (name, type, value) triples; a
    ConfigError is raised again each time, never cached)."""
    return cls._balanced(num_blocks, pp, tp, dp, microbatch_size, num_microbatches, interleave,
                         **{k: v for k, _, v in kw})


def plan_from_blocks(blocks: Iterable[int], **kw) -> Plan:
    """Stage ranges for per-stage block counts (embedding on the first stage, head on the last)."""
    blocks = list(blocks)
    ranges, pos = [], 0
    for i, b in enumerate(blocks):
        a = pos
        pos += b + (1 if i == 0 else 0) + (1 if i == len(blocks) - 1 else 0)
        ranges.append((a, pos))
    return Plan(tuple(ranges), **kw)


@dataclass(frozen=True)
class StageBreakdown:
    """One pipeline device stage (all its virtual stages), per microbatch unless said otherwise."""

    stage: int
    layers: tuple[tuple[int, int], ...]
    recompute: str
    fwd_s: float
    bwd_s: float  # includes recompute
    p2p_s: float  # this stage's sends (activations forward, gradients backward) per microbatch
    time_per_microbatch_s: float  # fwd + bwd + p2p + zero_comm
    params: int
    weight_bytes: float  # per device, as the ZeRO stage shards them (with ZeRO-3 the two gathered layers)
    grad_bytes: float  # per device (with ZeRO-2/3 the shard and the bucket being reduced)
    optimizer_bytes: float
    activation_bytes: float  # stashed for all in-flight microbatches
    working_bytes: float  # transient recompute buffer
    in_flight_microbatches: float  # microbatches whose activations are stashed at the peak
    memory_bytes: float
    dp_allreduce_s: float  # full gradient all-reduce (or reduce-scatter + all-gather with zero1)
    # part not hidden behind the last backward / first forward, plus the compute the hidden part costs
    # (stage.sync_interference)
    dp_exposed_s: float
    optimizer_step_s: float
    moe_a2a_s: float = 0.0  # of fwd_s + bwd_s: an MoE model's exposed dispatch/combine
    moe_imbalance_s: float = 0.0  # of fwd_s + bwd_s: the busiest EP rank's time beyond the mean's
    moe_host_s: float = 0.0  # of fwd_s + bwd_s: MoE blocks' host-bound stall (phaze.cost.moe_host)
    zero_comm_s: float = 0.0  # ZeRO-2/3's per-microbatch gradient reduce-scatter / weight all-gathers, exposed


# What ``Evaluation.mfu`` is (``evaluate_costs``; ``layer_costs.model_forward_flops_per_sequence``), said in
# --help, the report and docs/gpu-plans.md.
MFU_DEFINITION = (
    "MFU = 3 x F x global batch / (iteration time x devices used x peak), F = the model's forward matrix FLOPs "
    "per sequence: every GEMM of the blocks (QKV, attention scores and probs x V over all s keys, i.e. not halved "
    "for the causal mask (a sliding window counts its band), output projection, MLP; an MoE block the GEMMs "
    "of its layer graph, i.e. the experts its tokens are routed to) and the LM head (the embedding lookup none), so 6N + the attention term "
    "of Narayanan et al. 2021 (Megatron-LM's formula before Megatron-Core halved the causal attention term); "
    "recompute not counted; peak = the chip's dense 16-bit (BF16/FP16) tensor-core peak (H100 SXM 989.4, A100 "
    "311.9 TFLOP/s)")
MFU_FP8_NOTE = ("; this is an FP8 plan: its MFU is against the BF16 dense peak, as NVIDIA's tables report it "
                "(against the FP8 dense peak it would be about half)")


@dataclass(frozen=True)
class Evaluation:
    """Breakdown of one iteration (one global batch) of a plan, SI units.

    iteration_time_s = pipeline_s + max over stages of (dp_exposed_s + optimizer_step_s), with
    pipeline_s = sum_i T_i / v + (m - 1/v) * max_i T_i (T_i = stage i's fwd + bwd + p2p per microbatch):
    1F1B exact for heterogeneous stages at v = 1, interleaved 1F1B bubble / v at v > 1.
    """

    plan: Plan
    stages: tuple[StageBreakdown, ...]
    time_model: str
    pipeline_s: float
    steady_s: float  # m * max_i T_i
    bubble_s: float  # pipeline_s - steady_s = (sum_i T_i - max_i T_i) / v
    p2p_s: float  # sends on the critical path: all stages' per-microbatch p2p (once per microbatch)
    dp_allreduce_s: float  # exposed, slowest stage
    optimizer_step_s: float  # slowest stage
    iteration_time_s: float
    throughput_seq_per_s: float
    throughput_tokens_per_s: float
    model_flops_per_iteration: float
    mfu: float
    memory_bytes_per_device: float  # the largest stage
    memory_capacity_bytes: float
    fits: bool
    oom_stage: int | None  # the stage that exceeds the capacity most, if any
    memory_excess_bytes: float  # by how much it exceeds (0 if fits)
    bottleneck_stage: int
    devices_given: int = 0  # devices of the cluster the plan was evaluated on (the plan may use fewer)
    memory_reserve_bytes: float = 0.0  # kept free for the framework (capacity = HBM - reserve)

    @property
    def devices_used(self) -> int:
        return self.plan.devices

    @property
    def tokens_per_s_per_device(self) -> float:
        """Training tokens per second per device used: global batch x sequence / iteration / devices used."""
        return self.throughput_tokens_per_s / self.devices_used

    @property
    def model_tflops_per_device(self) -> float:
        """Model TFLOP/s per device used: ``model_flops_per_iteration`` / iteration / devices used / 1e12 (the
        numerator of ``mfu``; recompute not counted)."""
        return self.model_flops_per_iteration / self.iteration_time_s / self.devices_used / 1e12

    @property
    def mfu_definition(self) -> str:
        """How ``mfu`` is computed, in words (``MFU_DEFINITION``; an FP8 plan says its peak is the 16-bit one)."""
        return MFU_DEFINITION + (MFU_FP8_NOTE if self.plan.precision == "fp8" else "")

    def to_dict(self) -> dict:
        d = self.plan.to_dict()
        d["devices_used"] = self.devices_used
        d.update(tokens_per_s_per_device=self.tokens_per_s_per_device,
                 model_tflops_per_device=self.model_tflops_per_device, mfu_definition=self.mfu_definition)
        d.update({k: getattr(self, k) for k in ("devices_given", "memory_reserve_bytes",
            "time_model", "iteration_time_s", "throughput_seq_per_s", "throughput_tokens_per_s", "mfu",
            "memory_bytes_per_device", "memory_capacity_bytes", "fits", "oom_stage", "memory_excess_bytes",
            "pipeline_s", "steady_s", "bubble_s", "p2p_s", "dp_allreduce_s", "optimizer_step_s",
            "model_flops_per_iteration", "bottleneck_stage")})
        d["stage_breakdown"] = [{k: (list(map(list, v)) if k == "layers" else v) for k, v in asdict(s).items()}
                                for s in self.stages]
        return d


@dataclass(frozen=True)
class BaselineResult:
    """A fixed plan evaluated on its own; ``evaluation`` is None when it could not even be built."""

    name: str
    plan: Plan | None
    evaluation: Evaluation | None
    reason: str = ""
    note: str = ""  # e.g. why it leaves devices idle

    @property
    def fits(self) -> bool:
        return self.evaluation is not None and self.evaluation.fits


@dataclass(frozen=True)
class SearchStats:
    plans_considered: int  # (t, p, d, mbs, recompute, sp, v) combinations enumerated
    plans_solved: int  # of those, how many got an exact partition solve (the rest pruned by bounds)
    partitions_covered: float  # stage partitions (x per-stage mode vectors) covered by the solved combinations
    wall_time_s: float
    mixed_considered: int = 0  # per-stage recompute combinations (setting without recompute, t, p, d; v = 1)
    mixed_solved: int = 0  # of those, how many got an exact solve (``phaze.placement.mixed_dp``)


@dataclass(frozen=True)
class PlanResult:
    best: Evaluation
    alternatives: tuple[Evaluation, ...]
    baselines: tuple[BaselineResult, ...] = ()
    stats: SearchStats | None = field(default=None, compare=False)
    space: PlanSpace | None = field(default=None, compare=False)  # the plan space searched

    @property
    def runtime(self) -> Runtime:
        """The runtime every plan of the result runs under."""
        return self.best.plan.runtime

    def to_dict(self) -> dict:
        def base(b: BaselineResult) -> dict:
            d = b.evaluation.to_dict() if b.evaluation is not None else {}
            d.update({"name": b.name, "fits": b.fits, "reason": b.reason, "note": b.note})
            return d
        return {"best": self.best.to_dict(), "alternatives": [a.to_dict() for a in self.alternatives],
                "baselines": [base(b) for b in self.baselines],
                "stats": asdict(self.stats) if self.stats else None}


def layout_blocks(layout: str, num_blocks: int, virtual_stages: int) -> list[int]:
    """Blocks per virtual stage of a Megatron-Core ``--pipeline-model-parallel-layout`` string: virtual stages
    separated by "|", each a run of "E" (the embedding, first stage only), "t" (a transformer block), "m" (a
    multi-token-prediction module, charged to the head), "L" (the loss, last stage only); "(tt|)*30" repeats a
    group. The blocks must add up to ``num_blocks`` and the stages to ``virtual_stages``."""
    import re

    text = layout.replace(" ", "")
    while True:  # expand (group)*n, innermost first
        m = re.search(r"\(([^()]*)\)\*(\d+)", text)
        if not m:
            break
        text = text[:m.start()] + m.group(1) * int(m.group(2)) + text[m.end():]
    stages = [s for s in text.split("|")]
    if stages and stages[-1] == "":
        stages = stages[:-1]
    if any(set(s) - set("EtmL") for s in stages):
        raise ConfigError(f"pipeline layout {layout!r}: use E, t, m, L, '|', and (group)*n")
    if len(stages) != virtual_stages:
        raise ConfigError(f"pipeline layout {layout!r} has {len(stages)} virtual stages, the plan {virtual_stages}")
    if "E" in "".join(stages[1:]) or "L" in "".join(stages[:-1]):
        raise ConfigError(f"pipeline layout {layout!r}: E belongs to the first virtual stage, L to the last")
    blocks = [s.count("t") for s in stages]
    if sum(blocks) != num_blocks:
        raise ConfigError(f"pipeline layout {layout!r} places {sum(blocks)} blocks, the model has {num_blocks}")
    return blocks
