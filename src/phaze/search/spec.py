"""What a co-search covers: models, the architecture space, and the plan dimensions swept per chip.

Defaults reproduce the paper's setting (phaze-paper.md): 1024 devices on the flat 4 GiB/s network,
global batch 4096, the default space under the TPUv4-like budget, HBM 32/64/80 GiB, each chip's plans in the
paper's plan space (``PAPER_PLAN_SPACE`` / ``PAPER_RUNTIME``: recompute off/full, v = 1, no sequence parallelism,
no ZeRO). ``plan_space_name="full"`` searches them in the full plan space under ``CHIP_RUNTIME``, what
`phaze search` does by default (``default_plan_space``).
"""
from __future__ import annotations

import math

import hashlib
import json
from dataclasses import dataclass, field

from phaze.errors import ConfigError
from phaze.hardware.space import DesignSpace
from phaze.limits import check_all
from phaze.workload.config import RECOMPUTE_MODES, ModelConfig
from phaze.workload.runtime import PAPER_PLAN_SPACE, PAPER_RUNTIME, PlanSpace, Runtime, TrainSetting
from phaze.workload.traced import microbatch_choices

# The plan spaces a co-search scores each chip in (``--plan-space``): the paper's (v = 1, no sequence
# parallelism, no ZeRO, one recompute mode per plan, ``PAPER_RUNTIME``) or the full one ``phaze plan`` searches
# on GPUs (every interleaving, sequence parallelism, ZeRO 0-3, a recompute mode per pipeline stage, every
# recompute mode by default) under ``CHIP_RUNTIME``.
PLAN_SPACES = ("paper", "full")

# The runtime of the full plan space on a designed chip: today's practice wherever the chip's cost model can
# cost it (docs/chip-model.md, "Plan space"). Used as on GPUs: bf16 GEMMs (costed as fp16 on a chip: both
# 2-byte operands), the gradient reduce overlapped with the backward (bucketed; ZeRO-1+ also the parameter
# all-gather), selective recompute of the attention core (Megatron-Core's default module), Adam state as
# Megatron's. NOT used, and why:
# - flash attention: the chip model has no fused-attention kernel. The flash graph's two GEMM halves would be
#   scheduled as plain GEMMs (the score tile round-tripping HBM) with the online softmax's exponentials left
#   off the vector cores (phaze.workload.graphs: on GPUs ``attention_efficiency`` covers them), so a chip
#   would be credited with free softmax. A chip keeps standard attention; selective recompute (searched)
#   drops the stored score matrix instead.
# - TP overlap (Transformer Engine userbuffers): costed by the GPU time model only; the chip's per-layer
#   schedule runs each TP collective as one op after its producer, so the flag would change no cost.
# - deterministic mode and gradient-accumulation fusion: PyTorch / Megatron-LM options on GPUs (the chip's
#   scheduled time model refuses the first and does not read the second).
# - FP8: the chip template has one 2-byte MAC format and no FP8 rate.
# - a memory reserve: the 3 GiB of ``phaze plan`` is the GPU stack's (CUDA context, NCCL buffers, allocator);
#   a designed chip's runtime footprint is not modelled, so 0 as in the paper (the references get the same).
CHIP_RUNTIME = Runtime(attention="standard", precision="bf16", dp_overlap=True, tp_overlap=False,
                       memory_reserve_bytes=0.0)
# the recompute modes each plan space searches unless --recompute says otherwise
DEFAULT_RECOMPUTE = {"paper": ("none", "full"), "full": RECOMPUTE_MODES}


def default_plan_space(space: DesignSpace) -> str:
    """`phaze search`'s plan space when none is asked for: the paper's on the paper's template (its numbers
    exactly), else the full one."""
    return "paper" if space.template == "paper" else "full"


def search_runtime(plan_space_name: str, optimizer: str = "adam") -> Runtime:
    """The runtime every chip's plans run under in a co-search of ``plan_space_name`` (``SearchSpec.runtime``;
    also what a store's plans are rebuilt under)."""
    return (PAPER_RUNTIME if plan_space_name == "paper" else CHIP_RUNTIME).with_(optimizer=optimizer)


# Revision of the designed-chip cost model that search results depend on (SearchSpec.fingerprint): 2 since the
# weight-gradient GEMMs read and write the gradient buffer in HBM (phaze.workload.graphs.accumulating_wgrads,
# 2026-12-02), 3 since that buffer also crosses the GLB both ways (phaze.cost.gemm_chip) and the optimizer step
# is bound by the vector lanes too (phaze.placement.stage.optimizer_step_s; both 2026-12-02, session 16), 4 since
# an op alone has all of the GLB and HBM and layer schedules are re-timed under shared bandwidth
# (phaze.schedule.bandwidth; issue 34 item 1e, session 18) and a search also stores the TPU v4 reference, 5 since
# the default space buys input staging where a tensor core's input row is narrower than a GLB bank word (issue 34
# item 1d), 6 since a GEMM chooses its accumulator pass size (phaze.cost.gemm_chip.PASS_SPLITS, session 24), 7 since
# the references are scored to the candidates' schedule budget (SCHEDULE_TIME_LIMIT_S, session 25); stores written
# before carry an older revision (or none) and are refused on --resume.
CHIP_COST_MODEL_REVISION = 7
# Per-layer schedule budget (``phaze.schedule.solve``'s work budget, seconds) of every chip a co-search scores:
# its candidates, its references and the counterfactual chips of ``phaze.search.why`` (``fixed_plan``), so the
# chips it compares are costed by the same machinery to the same budget (before session 25 the fixed chips had
# ``compute_layer_costs``'s 5 s, the candidates 1 s)
SCHEDULE_TIME_LIMIT_S = 1.0


@dataclass(frozen=True)
class SearchSpec:
    models: tuple[ModelConfig, ...]
    space: DesignSpace = field(default_factory=DesignSpace)
    space_name: str = "default"
    hbm_gib: tuple[int, ...] = (32, 64, 80)
    microbatch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    tp_values: tuple[int, ...] | None = None  # None: every valid width <= the model's max_tp
    recompute_modes: tuple[str, ...] | None = None  # None: the plan space's default (DEFAULT_RECOMPUTE)
    cluster: str = "flat-4gib"
    devices: int = 1024
    global_batch: int = 4096
    optimizer: str = "adam"
    # True: prune only candidates a no-larger chip provably beats, so the Pareto front of score against
    # area is exact over the whole space (more exact evaluations); False: prune below the best score
    pareto: bool = False
    # what the score measures: throughput, throughput per mm^2, per W of peak power or per dollar of TCO at
    # peak power, each relative to the TPUv4-like chip's (phaze.search.objective)
    objective: str = "throughput"
    tdp_w: float | None = None  # chips whose peak power exceeds this are left out
    # "paper" or "full" (PLAN_SPACES): the paper's here, as every default of this class; `phaze search` and
    # ``phaze.api.search`` default to the full one except on the paper's template (``default_plan_space``)
    plan_space_name: str = "paper"

    def __post_init__(self) -> None:
        from phaze.search.objective import OBJECTIVES
        if self.plan_space_name not in PLAN_SPACES:
            raise ConfigError(f"--plan-space: unknown plan space {self.plan_space_name!r}; use {' or '.join(PLAN_SPACES)}")
        if self.recompute_modes is None:
            object.__setattr__(self, "recompute_modes", DEFAULT_RECOMPUTE[self.plan_space_name])
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"--objective: unknown objective {self.objective!r}; use {', '.join(OBJECTIVES)}")
        if self.tdp_w is not None and not (isinstance(self.tdp_w, (int, float)) and not isinstance(self.tdp_w, bool)
                                           and math.isfinite(self.tdp_w) and self.tdp_w > 0):
            raise ConfigError(f"--tdp-w must be a positive finite number of watts, got {self.tdp_w!r}")
        if (self.objective in ("perf-per-watt", "perf-per-dollar") or self.tdp_w is not None) \
                and self.space.template != "chip":
            raise ConfigError("--objective perf-per-watt, perf-per-dollar and --tdp-w need a space with the on-chip "
                              "hierarchy (the paper's template has no power model); drop --space paper")
        if not self.models:
            raise ConfigError("search needs at least one --model")
        for name, vals in (("--hbm-gib", self.hbm_gib), ("--mbs", self.microbatch_sizes), ("--tp", self.tp_values or (1,))):
            if not vals or any((not isinstance(v, int)) or v <= 0 for v in vals):
                raise ConfigError(f"{name} must be a list of positive integers, got {vals!r}")
        for r in self.recompute_modes:
            if r not in RECOMPUTE_MODES:
                raise ConfigError(f"--recompute: unknown mode {r!r}; use {', '.join(RECOMPUTE_MODES)}")
        check_all(devices=self.devices, global_batch=self.global_batch, hbm_gib=self.hbm_gib,
                  mbs=self.microbatch_sizes, tp=self.tp_values)

    @property
    def paper(self) -> bool:
        """Whether chips are scored in the paper's plan space (``PAPER_PLAN_SPACE``, ``PAPER_RUNTIME``)."""
        return self.plan_space_name == "paper"

    @property
    def runtime(self) -> Runtime:
        """The runtime every chip's plans run under: the paper's (``PAPER_RUNTIME``) or, in the full plan space,
        ``CHIP_RUNTIME``, with this optimizer."""
        return search_runtime(self.plan_space_name, self.optimizer)

    @property
    def paper_plan_runtime(self) -> Runtime:
        """The runtime the paper's fixed plans are scored under: the paper's (whatever plan space the chips are
        searched in) with the gradient reduce after the backward (no DP overlap), as the references have always
        been evaluated (``Plan``'s former default; the README's and docs/changes.md's paper-plan figures)."""
        return search_runtime("paper", self.optimizer).with_(dp_overlap=False)

    @property
    def plan_space(self) -> PlanSpace:
        """The plan space each chip is scored with, over this search's microbatch sizes, tensor-parallel widths
        and recompute modes: the paper's (v = 1, no sequence parallelism, no ZeRO, one recompute mode per
        plan), or the full one (``PlanSpace``'s defaults: every interleaving, sequence parallelism on and off,
        ZeRO 0-3, a recompute mode per pipeline stage). No expert parallelism: EP is costed on GPUs only."""
        if not self.paper:
            return PlanSpace(microbatch_sizes=self.microbatch_sizes, recompute_modes=self.recompute_modes,
                             tp_values=self.tp_values, ep_values=(1,), etp_values=(1,))
        return PAPER_PLAN_SPACE.with_(microbatch_sizes=self.microbatch_sizes, recompute_modes=self.recompute_modes,
                                      tp_values=self.tp_values, ep_values=(1,), etp_values=(1,),
                                      sequence_parallel=(False, True) if any(getattr(m, "is_moe", False) for m in self.models)
                                      else (False,))

    def plan_space_for(self, model: ModelConfig) -> PlanSpace:
        """``plan_space`` as ``phaze.placement.optimize`` narrows it for ``model`` (ZeRO 0-1 for an MoE model,
        whose experts' ZeRO-2/3 is not modelled): what the co-search's per-chip plan search and its bounds use."""
        space = self.plan_space
        if getattr(model, "is_moe", False) and max(space.zero) >= 2:
            space = space.with_(zero=tuple(z for z in space.zero if z < 2))
        return space.for_runtime(self.runtime)

    def settings(self, model: ModelConfig) -> tuple[TrainSetting, ...]:
        """Every (microbatch, t, sequence parallelism, recompute) this search costs for ``model``: no sequence
        parallelism in the paper's plan space (except an MoE model's TP widths, which need it), with and without
        it at t > 1 in the full one; no expert parallelism (EP is costed on GPUs only)."""
        tps = self.tp_values or tuple(t for t in (1, 2, 4, 8, 16, 32, 64) if t <= model.max_tp)
        out = []
        for t in tps:
            if not model.valid_tp(t) or t > self.devices:
                continue
            for mbs in microbatch_choices(model, self.microbatch_sizes):
                if self.global_batch % mbs:
                    continue
                # an MoE model's layer needs sequence parallelism with TP (Megatron-Core); dense: none (the paper)
                # or both (the full plan space)
                moe_sp = t > 1 and getattr(model, "is_moe", False)
                sps = (moe_sp,) if self.paper or moe_sp or t == 1 else (False, True)
                for sp in sps:
                    for rc in self.recompute_modes:
                        out.append(TrainSetting(microbatch_size=mbs, seq_len=model.seq_len, tp=t, recompute=rc,
                                                sequence_parallel=sp, runtime=self.runtime.for_shape(t, sp)))
        if not out:
            raise ConfigError(f"no valid (microbatch, tp) for {model.name}: check --tp (max {model.max_tp}) and "
                              f"that --mbs values divide --global-batch {self.global_batch}")
        return tuple(out)

    def fingerprint(self) -> dict:
        """Plain, canonical description used to check that --resume continues the same run."""
        from phaze.jsonable import to_jsonable
        from phaze.workload.config import VARIANT_DEFAULTS

        def model(m) -> dict:  # template-valued variant fields left out: stores from before them still resume
            return {k: v for k, v in to_jsonable(m).items() if k not in VARIANT_DEFAULTS or v != VARIANT_DEFAULTS[k]}

        out = {
            "models": [model(m) for m in self.models], "space": to_jsonable(self.space),
            "space_name": self.space_name, "hbm_gib": list(self.hbm_gib),
            "microbatch_sizes": list(self.microbatch_sizes),
            "tp_values": list(self.tp_values) if self.tp_values else None,
            "recompute_modes": list(self.recompute_modes), "cluster": self.cluster, "devices": self.devices,
            "global_batch": self.global_batch, "optimizer": self.optimizer,
        }
        # the chip cost model's revision: a change that moves search results bumps it, so --resume refuses a store
        # whose finished chips were scored by another model instead of mixing the two
        out["cost_model"] = CHIP_COST_MODEL_REVISION
        if self.pareto:  # only when set, so stores written before the option existed still resume
            out["pareto"] = True
        if self.objective != "throughput":
            out["objective"] = self.objective
        if self.tdp_w is not None:
            out["tdp_w"] = float(self.tdp_w)
        if not self.paper:  # only when set: stores written before the option existed searched the paper's
            out["plan_space"] = self.plan_space_name
        return out

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True).encode()).hexdigest()[:16]
