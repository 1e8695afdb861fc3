"""What a co-search covers: models, the architecture space, and the plan dimensions swept per chip.

Defaults reproduce the paper's setting (phaze-paper.md): 1024 devices on the flat 4 GiB/s network,
global batch 4096, the default space under the TPUv4-like budget, HBM 32/64/80 GiB, recompute off/full.
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


# Revision of the designed-chip cost model that search results depend on (SearchSpec.fingerprint): 2 since the
# weight-gradient GEMMs read and write the gradient buffer in HBM (phaze.workload.graphs.accumulating_wgrads,
# 2026-12-02), 3 since that buffer also crosses the GLB both ways (phaze.cost.gemm_chip) and the optimizer step
# is bound by the vector lanes too (phaze.placement.stage.optimizer_step_s; both 2026-12-02, session 16), 4 since
# an op alone has all of the GLB and HBM and layer schedules are re-timed under shared bandwidth
# (phaze.schedule.bandwidth; issue 34 item 1e, session 18) and a search also stores the TPU v4 reference; stores
# written before carry an older revision (or none) and are refused on --resume.
CHIP_COST_MODEL_REVISION = 4


@dataclass(frozen=True)
class SearchSpec:
    models: tuple[ModelConfig, ...]
    space: DesignSpace = field(default_factory=DesignSpace)
    space_name: str = "default"
    hbm_gib: tuple[int, ...] = (32, 64, 80)
    microbatch_sizes: tuple[int, ...] = (1, 2, 4, 8)
    tp_values: tuple[int, ...] | None = None  # None: every valid width <= the model's max_tp
    recompute_modes: tuple[str, ...] = ("none", "full")
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

    def __post_init__(self) -> None:
        from phaze.search.objective import OBJECTIVES
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
    def runtime(self) -> Runtime:
        """The runtime every chip's plans run under: the paper's (``PAPER_RUNTIME``) with this optimizer."""
        return PAPER_RUNTIME.with_(optimizer=self.optimizer)

    @property
    def paper_plan_runtime(self) -> Runtime:
        """The runtime the paper's fixed plans are scored under: ``runtime`` with the gradient reduce after the
        backward (no DP overlap), as the references have always been evaluated (``Plan``'s former default;
        the README's and docs/changes.md's paper-plan figures)."""
        return self.runtime.with_(dp_overlap=False)

    @property
    def plan_space(self) -> PlanSpace:
        """The plan space each chip is scored with: the paper's (v = 1, no sequence parallelism, no ZeRO-1, one
        recompute mode per plan) over this search's microbatch sizes, tensor-parallel widths and recompute
        modes."""
        return PAPER_PLAN_SPACE.with_(microbatch_sizes=self.microbatch_sizes, recompute_modes=self.recompute_modes,
                                      tp_values=self.tp_values, ep_values=(1,), etp_values=(1,),
                                      sequence_parallel=(False, True) if any(getattr(m, "is_moe", False) for m in self.models)
                                      else (False,))

    def settings(self, model: ModelConfig) -> tuple[TrainSetting, ...]:
        """Every (microbatch, t, recompute) this search costs for ``model`` (no sequence parallelism, as in the
        paper, except an MoE model's TP widths, which need it; no expert parallelism: EP is costed on GPUs only)."""
        tps = self.tp_values or tuple(t for t in (1, 2, 4, 8, 16, 32, 64) if t <= model.max_tp)
        out = []
        for t in tps:
            if not model.valid_tp(t) or t > self.devices:
                continue
            for mbs in microbatch_choices(model, self.microbatch_sizes):
                if self.global_batch % mbs:
                    continue
                for rc in self.recompute_modes:
                    # an MoE model's layer needs sequence parallelism with TP (Megatron-Core); dense: none (the paper)
                    sp = t > 1 and getattr(model, "is_moe", False)
                    out.append(TrainSetting(microbatch_size=mbs, seq_len=model.seq_len, tp=t, recompute=rc,
                                            sequence_parallel=sp, runtime=self.runtime))
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
        return out

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.fingerprint(), sort_keys=True).encode()).hexdigest()[:16]
