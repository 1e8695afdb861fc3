"""The MoE time model against published MoE training runs (``phaze validate --moe``).

The dev set (``data/moe_runs.json``, copied with its sources from the shared references) holds five runs on
DGX-H100: DeepSeek-V3 on 1,024 GPUs, Qwen3-235B-A22B on 256, Qwen3-30B-A3B on 16, GPT-OSS-120B on 64 and
Mixtral 8x7B on 64. Each run's model is built from its published Hugging Face config (``phaze.workload.hf``), its
plan and runtime from the run's fields, and evaluated as ``phaze evaluate`` would: predicted against measured
iteration time and whether the plan fits. The set is for developing the model; held-out MoE runs are kept
elsewhere to check it.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from importlib import resources

from phaze.errors import ConfigError

MOE_RUNS_FILE = "moe_runs.json"
DISPATCHERS = {"alltoall": "alltoall", "allgather": "allgather", "flex-DeepEP": "deepep"}


@dataclass(frozen=True)
class MoeResult:
    case: str
    plan: str
    predicted_s: float
    measured_s: float
    error_pct: float
    fits: bool
    memory_gib: float
    capacity_gib: float
    verified: str
    parts_s: dict  # where the predicted iteration goes (placement's breakdown of the slowest stage)


@dataclass(frozen=True)
class MoeReport:
    source: str
    runs: tuple[MoeResult, ...]

    @property
    def time_mean_abs_pct(self) -> float:
        return sum(abs(r.error_pct) for r in self.runs) / len(self.runs)

    @property
    def time_max_abs_pct(self) -> float:
        return max(abs(r.error_pct) for r in self.runs)

    def to_dict(self) -> dict:
        from phaze.validation.goals import goal

        g = goal("moe_dev")
        return {"source": self.source, "runs": [dataclasses.asdict(r) for r in self.runs],
                "time_mean_abs_pct": self.time_mean_abs_pct, "time_max_abs_pct": self.time_max_abs_pct,
                "fitting": sum(r.fits for r in self.runs),
                "goal": {"mean_abs_pct": g.mean_abs_pct, "max_abs_pct": g.max_abs_pct,
                         "met": g.met(self.time_mean_abs_pct, self.time_max_abs_pct)
                         and all(r.fits for r in self.runs)}}


def load_runs() -> dict:
    return json.loads(resources.files("phaze.validation.data").joinpath(MOE_RUNS_FILE).read_text(encoding="utf-8"))


def run_model(run: dict):
    """The run's model: its published config, the run's sequence length and MTP layers (and its overrides)."""
    from phaze.workload.hf import from_hf_config

    m = from_hf_config(run["hf_config"], run["case"], run.get("hf_model", run["hf_config"]["model_type"]))
    over = dict(run.get("as_run_overrides") or {})
    over.update(seq_len=run["seq_len"], mtp_layers=run["mtp_layers"] or 0)
    return dataclasses.replace(m, **over)


def run_runtime(run: dict):
    """The run's runtime: flash attention, its precision (any FP8 recipe as fp8), overlaps, the MoE dispatcher,
    routing (forced balance: balanced), all-to-all overlap and the modules selective recompute re-runs."""
    from phaze.workload.runtime import Runtime

    if run["dispatcher"] not in DISPATCHERS:
        raise ConfigError(f"{run['case']}: unknown dispatcher {run['dispatcher']!r}")
    return Runtime(attention="flash", precision="fp8" if run["precision"].startswith("fp8") else "bf16",
                   tp_overlap=bool(run["tp_comm_overlap"]) and run["tp"] > 1,
                   dp_overlap=bool(run["overlap_grad_reduce"]), moe_dispatcher=DISPATCHERS[run["dispatcher"]],
                   moe_routing="balanced" if run["routing"].startswith("forced") else "dropless",
                   moe_a2a_overlap=bool(run["moe_a2a_overlap"]),
                   recompute_modules=tuple(run.get("recompute_modules") or ("core_attn",)))


# The pipeline layouts the runs used where they are not an even split (Megatron-Core's
# --pipeline-model-parallel-layout), as each run's "assumptions" quote them from its recipe
RUN_LAYOUTS = {
    # "pipeline layout 'Et|(tt|)*30mL'" (Megatron-Bridge deepseek_v3 perf recipe, h100, 1,024 GPUs)
    "MB 25.09 DeepSeek-V3 671B H100 (1024 GPUs)": "Et|(tt|)*30mL",
    # account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split: 94 layers + embedding +
    # loss = 96 units over 32 virtual stages of 3 (Megatron-Bridge v0.2.0 Qwen3-235B recipe)
    "MB 25.11 Qwen3-235B-A22B H100 FP8-CS (256 GPUs)": "Ett|(ttt|)*30ttL",
}


def run_plan(run: dict, model):
    from phaze.placement import Plan
    from phaze.placement.plan import layout_blocks, plan_from_blocks
    from phaze.placement.recompute import Recompute

    sp = bool(run["sequence_parallel"]) and run["tp"] > 1
    v = run["interleave"] or 1
    kw = dict(tp=run["tp"], dp=run["dp"], microbatch_size=run["mbs"],
              num_microbatches=run["global_batch"] // (run["mbs"] * run["dp"]),
              recompute=Recompute.uniform(run["recompute"] or "none"), sequence_parallel=sp,
              zero=int(run["zero1"] is not False), cp=run["cp"] or 1, runtime=run_runtime(run), ep=run["ep"],
              etp=run["etp"] or 1)
    layout = RUN_LAYOUTS.get(run["case"])
    if layout:
        return plan_from_blocks(layout_blocks(layout, model.num_layers, run["pp"] * v), interleave=v, **kw)
    return Plan.balanced(model.num_layers, run["pp"], interleave=v, **kw)


def validate_moe(progress=None) -> MoeReport:
    """Every dev-set run predicted against its measured iteration time."""
    from phaze.hardware.presets import get_accelerator, get_cluster
    from phaze.placement import evaluate

    data = load_runs()
    out = []
    for run in data["runs"]:
        model = run_model(run)
        plan = run_plan(run, model)
        ev = evaluate(plan, model, get_accelerator(run["accelerator"]), get_cluster(run["cluster"], run["devices"]),
                      run["global_batch"])
        meas = float(run["measured_iteration_time_s"])
        b = ev.stages[ev.bottleneck_stage]
        m = plan.num_microbatches
        # the bottleneck stage's MoE parts over the iteration's microbatches (of steady_s): exposed all-to-all,
        # routing imbalance, host-bound stall (phaze.cost.moe_host)
        parts = {"steady_s": ev.steady_s, "bubble_s": ev.bubble_s, "dp_allreduce_s": ev.dp_allreduce_s,
                 "optimizer_step_s": ev.optimizer_step_s, "moe_a2a_s": m * b.moe_a2a_s,
                 "moe_imbalance_s": m * b.moe_imbalance_s, "moe_host_s": m * b.moe_host_s}
        out.append(MoeResult(run["case"], plan.describe(), ev.iteration_time_s, meas,
                             (ev.iteration_time_s - meas) / meas * 100.0, ev.fits, ev.memory_bytes_per_device / 2**30,
                             ev.memory_capacity_bytes / 2**30, run["verified"], parts))
        if progress is not None:
            progress.advance()
    return MoeReport(f"phaze:validation/data/{MOE_RUNS_FILE}: {data['about'][:120]}...", tuple(out))
