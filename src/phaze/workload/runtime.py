"""How the software stack runs (``Runtime``) and what the plan search may choose (``PlanSpace``).

Both are built once at the CLI / API edge and passed whole (anchor: Megatron-Core's ``TransformerConfig``, one
frozen dataclass validated once). ``Runtime`` owns every runtime default and every cross-field rule, including
the rules that tie a runtime to a plan's shape (``check_shape``): context parallelism needs flash attention,
TP overlap needs sequence parallelism, deterministic mode refuses TP overlap. A new runtime option is a field
here, its CLI flag, and the cost term that reads it.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Mapping

from phaze.errors import ConfigError
from phaze.units import GiB
from phaze.workload.config import (ATTENTION_KINDS, DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE,
                                   DEFAULT_TP_OVERLAP_CONFIG, DETERMINISTIC_TP_OVERLAP_ERROR, GRAD_DTYPES,
                                   OPTIMIZER_STATES, PRECISIONS, RECOMPUTE_MODES)

OPTIMIZERS: tuple[str, ...] = ("adam", "sgd")
# What "selective" recompute re-runs (Megatron-Core --recompute-modules with --recompute-granularity selective;
# its default is core_attn): the attention core, the norms, MLA's up projections, a dense block's MLP, an MoE
# block's expert activation, or its shared experts (phaze.workload.recompute_modules has each module's ops)
RECOMPUTE_MODULES: tuple[str, ...] = ("core_attn", "layernorm", "mla_up_proj", "mlp", "moe_act", "shared_experts")
# How an MoE layer moves tokens to its experts (Megatron-Core --moe-token-dispatcher-type): an all-to-all over
# the EP group, an all-gather of every token, or DeepEP's fused kernels (the "flex" dispatcher with DeepEP)
MOE_DISPATCHERS: tuple[str, ...] = ("alltoall", "allgather", "deepep")
# How tokens are routed: "balanced" (each expert gets its mean share: Megatron-Core's
# moe_router_force_load_balancing, the benchmark setting), "dropless" (every token to its top-k experts, the
# busiest EP rank setting the pace: phaze.cost.moe), "capacity:F" (each expert takes at most F x its mean share,
# the rest dropped: --moe-expert-capacity-factor F)
# HBM kept free per device for the framework (CUDA context, NCCL buffers, allocator fragmentation) unless told:
# what `phaze plan` / `evaluate` assume on GPUs (README, "Runtime features")
DEFAULT_MEMORY_RESERVE_BYTES = 3 * GiB


@dataclass(frozen=True)
class Runtime:
    """The settings of the software stack every plan runs with; none is searched (they are how the framework
    is set up, or a numerics choice the user makes).

    ``attention``: "flash" (a fused kernel that never stores the score matrix; FlashAttention / cuDNN) or
    "standard" (Megatron's fused softmax path, the score matrix stored). ``precision``: the linear layers' GEMM
    format (fp16 / bf16 / fp8 with Transformer Engine). ``grad_dtype``: the gradient buffer's format
    (``GRAD_DTYPES``). ``optimizer``: "adam" (mixed precision) or "sgd"; ``optimizer_state``: what Adam keeps
    per parameter (``OPTIMIZER_STATES``). ``tp_overlap``: TP collectives overlapped with their GEMMs (Transformer
    Engine userbuffers, configuration ``tp_overlap_config``; only plans with sequence parallelism overlap).
    ``dp_overlap``: the gradient reduce overlapped with the last backward, bucketed (with ZeRO-1 also the
    parameter all-gather with the next forward). ``deterministic``: PyTorch's deterministic mode (Megatron-LM
    ``--deterministic-mode``). ``grad_accum_fusion``: Megatron-LM's gradient-accumulation fusion.
    ``memory_reserve_bytes``: HBM per device no plan may use.

    The defaults are what a current Megatron-Core / NeMo recipe runs (``BEST_PRACTICE``): flash attention,
    bf16, TP communication overlapped (None resolves to on, off under ``deterministic``, which refuses it) and
    the data-parallel reduce / gather overlapped; the distributed optimizer is a plan choice (``PlanSpace.zero``).
    ``PAPER_RUNTIME`` is the paper's setting the co-search scores chips in.
    """

    attention: str = "flash"
    precision: str = "bf16"
    grad_dtype: str = DEFAULT_GRAD_DTYPE
    optimizer: str = "adam"
    optimizer_state: str = DEFAULT_OPTIMIZER_STATE
    tp_overlap: bool | None = None  # None: on unless deterministic (best practice)
    tp_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG
    dp_overlap: bool = True
    deterministic: bool = False
    grad_accum_fusion: bool = True
    memory_reserve_bytes: float = float(DEFAULT_MEMORY_RESERVE_BYTES)
    # Mixture-of-Experts (ignored by dense models; the API refuses them there): the token dispatcher, the
    # routing (``MOE_DISPATCHERS`` and the note above), and whether the dispatch/combine all-to-alls overlap the
    # other microbatch's compute (Megatron-Core's 1F1B A2A overlap, --overlap-moe-expert-parallel-comm)
    moe_dispatcher: str = "alltoall"
    moe_routing: str = "dropless"
    moe_a2a_overlap: bool = False
    recompute_modules: tuple[str, ...] = ("core_attn",)

    def __post_init__(self) -> None:
        choices = (("attention", ATTENTION_KINDS), ("precision", PRECISIONS), ("grad_dtype", GRAD_DTYPES),
                   ("optimizer", OPTIMIZERS), ("optimizer_state", OPTIMIZER_STATES))
        for name, allowed in choices:
            if getattr(self, name) not in allowed:
                raise ConfigError(f"--{name.replace('_', '-')}: unknown value {getattr(self, name)!r}; use one of "
                                  f"{', '.join(allowed)}")
        if self.moe_dispatcher not in MOE_DISPATCHERS:
            raise ConfigError(f"--moe-dispatcher: unknown value {self.moe_dispatcher!r}; use one of "
                              f"{', '.join(MOE_DISPATCHERS)}")
        self.moe_capacity_factor  # noqa: B018 (checks moe_routing)
        mods = self.recompute_modules
        mods = tuple(dict.fromkeys((mods,) if isinstance(mods, str) else mods))
        bad = [m for m in mods if m not in RECOMPUTE_MODULES]
        if bad or not mods:
            raise ConfigError(f"--recompute-modules: unknown module {bad[0] if bad else '(none given)'!r}; use some "
                              f"of {', '.join(RECOMPUTE_MODULES)}")
        object.__setattr__(self, "recompute_modules", mods)
        if self.tp_overlap is None:
            object.__setattr__(self, "tp_overlap", not self.deterministic)
        for name in ("tp_overlap", "dp_overlap", "deterministic", "grad_accum_fusion", "moe_a2a_overlap"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.tp_overlap_config, str) or not self.tp_overlap_config:
            raise ConfigError(f"tp_overlap_config must be the name of a userbuffers configuration, "
                              f"got {self.tp_overlap_config!r}")
        reserve = self.memory_reserve_bytes
        if isinstance(reserve, bool) or not isinstance(reserve, (int, float)) or not math.isfinite(reserve) \
                or not 0 <= reserve < 1e6 * GiB:
            raise ConfigError(f"--memory-reserve-gib must be >= 0 (GiB kept free per device), got "
                              f"{reserve / GiB if isinstance(reserve, (int, float)) else reserve!r}")
        object.__setattr__(self, "memory_reserve_bytes", float(reserve))
        if self.deterministic and self.tp_overlap:
            raise ConfigError(f"--deterministic with --tp-overlap: {DETERMINISTIC_TP_OVERLAP_ERROR}")

    @property
    def moe_capacity_factor(self) -> float | None:
        """F of "capacity:F" (None for balanced or dropless routing); a bad routing is a one-line ConfigError."""
        r = self.moe_routing
        if r in ("balanced", "dropless"):
            return None
        kind, _, f = str(r).partition(":")
        try:
            factor = float(f)
        except ValueError:
            factor = math.nan
        if kind != "capacity" or not math.isfinite(factor) or factor <= 0:
            raise ConfigError(f"--moe-routing: {r!r} is not balanced, dropless or capacity:F with F > 0 "
                              f"(e.g. capacity:1.25)")
        return factor

    @property
    def moe_defaults(self) -> bool:
        """Whether the MoE fields are at their defaults (a dense model refuses anything else)."""
        return (self.moe_dispatcher, self.moe_routing, self.moe_a2a_overlap) == ("alltoall", "dropless", False)

    def check_shape(self, *, tp: int = 1, sequence_parallel: bool = False, cp: int = 1,
                    seq_len: int | None = None, what: str = "") -> None:
        """The cross-field rules between this runtime and a plan's shape (one place for all of them)."""
        if cp > 1 and self.attention != "flash":
            raise ConfigError(f"{what}context parallelism needs flash attention (ring attention is built on the "
                              f"fused kernel, as in Transformer Engine); use --attention flash")
        if cp > 1 and seq_len is not None and seq_len % (2 * cp):
            raise ConfigError(f"{what}context parallelism {cp} needs a sequence length divisible by 2 x cp "
                              f"(load-balanced causal chunks), got {seq_len}")
        if self.tp_overlap and tp > 1 and not sequence_parallel:
            raise ConfigError(f"{what}tensor-parallel overlap needs sequence parallelism (Transformer Engine "
                              f"overlaps the all-gather / reduce-scatter pairs of SP); add --sequence-parallel")

    def for_shape(self, tp: int, sequence_parallel: bool) -> "Runtime":
        """What a plan of this shape runs: TP overlap only where there is sequence parallelism to overlap (a
        plan without it runs its TP collectives blocking, under the default userbuffers name)."""
        if self.tp_overlap and not (sequence_parallel and tp > 1):
            return replace(self, tp_overlap=False, tp_overlap_config=DEFAULT_TP_OVERLAP_CONFIG)
        return self

    def with_(self, **changes) -> "Runtime":
        return replace(self, **changes)

    # the plan-dict keys of the fields (stored plans and ``--json``): every field, under its own name
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping, default: "Runtime | None" = None) -> "Runtime":
        """The runtime fields of ``d`` (other keys ignored; missing fields from ``default``)."""
        base = default or cls()
        return replace(base, **{f.name: d[f.name] for f in fields(cls) if f.name in d})


# What the defaults follow, and where each comes from (the assumptions table prints it): Megatron-Core / NeMo 2
# recipes (NeMo's llama3_70b / gpt3_175b performance recipes turn on tp_comm_overlap, overlap_grad_reduce and
# overlap_param_gather with the distributed optimizer; Megatron-LM's README "--overlap-grad-reduce
# --overlap-param-gather"; flash attention and bf16 as every current recipe)
BEST_PRACTICE = (("attention", "flash"), ("precision", "bf16"), ("tp_overlap", "on (plans with sequence parallelism)"),
                 ("dp_overlap", "on"), ("distributed optimizer / ZeRO", "searched (0-3)"))


# The paper's setting (and the co-search's): standard attention, fp16, the gradient reduce overlapped, no HBM
# reserve (the chip's whole HBM), as the Phaze paper's plans run.
PAPER_RUNTIME = Runtime(attention="standard", precision="fp16", tp_overlap=False, dp_overlap=True,
                        memory_reserve_bytes=0.0)


def _tuple(name: str, values, kind=int) -> tuple:
    try:
        out = tuple(dict.fromkeys(kind(v) for v in values))
    except (TypeError, ValueError):
        raise ConfigError(f"plan space: {name} must be a list of {kind.__name__} values, got {values!r}") from None
    if not out:
        raise ConfigError(f"plan space: {name} is empty; give at least one value")
    return out


@dataclass(frozen=True)
class PlanSpace:
    """The axes the plan search may choose. ``tp_values`` None: every valid power-of-two width inside the
    fastest network tier. ``zero``: the ZeRO stages searched (0 none, 1 optimizer state sharded as Megatron's
    distributed optimizer, 2 also gradients, 3 also weights as FSDP; ``phaze.placement.stage.ZERO_STAGES``). ``per_stage_recompute``:
    v = 1 plans may give each pipeline stage its own recompute mode. ``use_all_devices``: only plans with
    p * t * cp * d equal to the devices (else fewer devices are allowed when that is faster)."""

    microbatch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16)
    recompute_modes: tuple[str, ...] = RECOMPUTE_MODES
    tp_values: tuple[int, ...] | None = None
    interleave_values: tuple[int, ...] | None = None  # None: every size Megatron takes (``interleaves``)
    sequence_parallel: tuple[bool, ...] = (False, True)
    zero: tuple[int, ...] = (0, 1, 2, 3)
    cp_values: tuple[int, ...] = (1,)
    per_stage_recompute: bool = True
    use_all_devices: bool = False
    # expert parallelism and expert tensor parallelism (MoE models; ignored by dense ones). None: every power
    # of two dividing the experts (ep) or the experts' FFN width up to the widest TP (etp) that the devices take
    ep_values: tuple[int, ...] | None = None
    etp_values: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("microbatch_sizes", _tuple("microbatch_sizes", self.microbatch_sizes))
        set_("recompute_modes", _tuple("recompute_modes", self.recompute_modes, str))
        if self.interleave_values is not None:
            set_("interleave_values", tuple(sorted(_tuple("interleave_values", self.interleave_values))))
        set_("sequence_parallel", _tuple("sequence_parallel", self.sequence_parallel, bool))
        set_("zero", _tuple("zero", (self.zero,) if isinstance(self.zero, (bool, int)) else self.zero, int))
        if any(z not in (0, 1, 2, 3) for z in self.zero):
            raise ConfigError(f"--zero: ZeRO stages are 0, 1, 2 and 3, got {', '.join(map(str, self.zero))}")
        set_("cp_values", _tuple("cp_values", self.cp_values))
        for name in ("tp_values", "ep_values", "etp_values"):
            if getattr(self, name) is not None:
                set_(name, _tuple(name, getattr(self, name)))
        for r in self.recompute_modes:
            if r not in RECOMPUTE_MODES:
                raise ConfigError(f"--recompute: unknown mode {r!r}; use {', '.join(RECOMPUTE_MODES)}")
        for name in ("microbatch_sizes", "interleave_values", "cp_values", "tp_values", "ep_values", "etp_values"):
            if any(v < 1 for v in getattr(self, name) or ()):
                raise ConfigError(f"plan space: {name} must be positive integers, got {getattr(self, name)}")

    def interleaves(self, num_blocks: int) -> tuple[int, ...]:
        """The virtual-pipeline sizes to search for a model of ``num_blocks`` blocks: the given ones, or every
        v dividing the blocks (an even split over p x v virtual stages needs v | L; Llama-3-70B's published
        recipes use 5 on 80 blocks)."""
        if self.interleave_values is not None:
            return self.interleave_values
        return tuple(v for v in range(1, num_blocks + 1) if num_blocks % v == 0)

    def check(self, runtime: Runtime, seq_len: int) -> None:
        """Every shape this space holds is one ``runtime`` can run (the runtime's own rules)."""
        for cp in self.cp_values:
            runtime.check_shape(cp=cp, seq_len=seq_len, what=f"--cp {cp}: " if cp > 1 else "")

    def for_runtime(self, runtime: Runtime) -> "PlanSpace":
        """The space without choices that repeat others under ``runtime``: a flash kernel stores no score
        matrix, so selective recompute keeps what "none" keeps and re-runs nothing more."""
        modes = self.recompute_modes
        if runtime.attention == "flash" and "none" in modes and "selective" in modes:
            return replace(self, recompute_modes=tuple(r for r in modes if r != "selective"))
        return self

    def with_(self, **changes) -> "PlanSpace":
        return replace(self, **changes)


# The paper's plan space for the co-search: no interleaving, no sequence parallelism, no ZeRO-1, one recompute
# mode per plan (the microbatch sizes and recompute modes come from the search's own setting)
PAPER_PLAN_SPACE = PlanSpace(interleave_values=(1,), sequence_parallel=(False,), zero=(0,),
                             per_stage_recompute=False)


class RuntimeFields:
    """Reads a ``runtime`` attribute's fields by name (``setting.attention`` is ``setting.runtime.attention``):
    shared by ``TrainSetting`` and ``phaze.placement.Plan``, which each run under one ``Runtime``."""

    attention = property(lambda self: self.runtime.attention)
    precision = property(lambda self: self.runtime.precision)
    tp_overlap = property(lambda self: self.runtime.tp_overlap)
    tp_overlap_config = property(lambda self: self.runtime.tp_overlap_config)
    dp_overlap = property(lambda self: self.runtime.dp_overlap)
    grad_dtype = property(lambda self: self.runtime.grad_dtype)
    optimizer_state = property(lambda self: self.runtime.optimizer_state)
    deterministic = property(lambda self: self.runtime.deterministic)
    grad_accum_fusion = property(lambda self: self.runtime.grad_accum_fusion)


@dataclass(frozen=True)
class TrainSetting(RuntimeFields):
    """How one layer is run: its shape (microbatch size, sequence length, tensor-parallel width, sequence
    parallelism (Korthikanti et al. 2022), activation recomputation mode, context parallelism) and the
    ``runtime`` it runs under (kernels, number formats, overlaps: ``Runtime``). A setting built without a
    runtime is in the paper's setting (``PAPER_RUNTIME``), the co-search's."""

    microbatch_size: int
    seq_len: int
    tp: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    bytes_per_element: int = 2
    cp: int = 1  # context parallelism: the sequence split over cp devices, ring attention between them
    runtime: Runtime = PAPER_RUNTIME
    # expert parallelism (an MoE block's experts split over ep devices, tokens dispatched to them all-to-all) and
    # expert tensor parallelism (each expert's FFN split over etp devices), folded apart from tp/cp as
    # Megatron-Core does: ep x etp x expert-data-parallel = tp x cp x dp
    ep: int = 1
    etp: int = 1

    def __post_init__(self) -> None:
        for field in ("microbatch_size", "seq_len", "tp", "cp", "ep", "etp"):
            v = getattr(self, field)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ConfigError(f"'{field}' must be a positive integer, got {v!r}")
        if self.recompute not in RECOMPUTE_MODES:
            raise ConfigError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}")
        if not isinstance(self.runtime, Runtime):
            raise ConfigError(f"runtime must be a Runtime, got {self.runtime!r}")
        self.runtime.check_shape(tp=self.tp, sequence_parallel=self.sequence_parallel, cp=self.cp,
                                 seq_len=self.seq_len)

    @property
    def local_seq_len(self) -> int:
        """Tokens of a sequence on one device of the context-parallel group."""
        return self.seq_len // self.cp

    @property
    def linear_bytes_per_element(self) -> int:
        """Bytes per element of the block's linear-layer GEMM operands (1 in FP8, else the activations')."""
        return 1 if self.precision == "fp8" else self.bytes_per_element

    def check_model(self, model) -> None:
        """Raise ConfigError if this setting cannot shard ``model`` (a traced model checks its own rule)."""
        from phaze.workload.config import ModelConfig

        if not isinstance(model, ModelConfig):
            model.check_setting(self)
            return
        if model.heads % self.tp or model.num_kv_heads % self.tp or model.ffn % self.tp:
            raise ConfigError(
                f"tensor-parallel width {self.tp} must divide heads ({model.heads}), kv heads "
                f"({model.num_kv_heads}) and ffn ({model.ffn}) of {model.name}; pick a power of two that does"
            )
