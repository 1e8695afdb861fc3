"""Fixed plans to compare against, evaluated on their own: they never gate or abort the optimizer.

- ``paper``: the hand-set (p, t, d) plans of the Phaze paper (phaze-paper.md), balanced stages; the
  microbatch size and recompute mode are the best of the given choices that fit.
- ``megatron``: the common rule of thumb: TP = min(8, devices per node, largest valid t), PP the
  smallest depth whose balanced plan fits, DP the rest (largest d dividing the batch); microbatch 1,
  sequence parallelism with selective recompute (Megatron-LM's recommended defaults).
A baseline that cannot be built or does not fit is returned with ``fits == False`` and a reason.
"""
from __future__ import annotations

from phaze.errors import PhazeError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster
from phaze.placement.evaluation import evaluate
from phaze.placement.plan import BaselineResult, Plan
from phaze.placement.recompute import Recompute
from phaze.workload.config import RECOMPUTE_MODES, ModelConfig
from phaze.workload.runtime import Runtime

# (p, t, d) per zoo model name (phaze-paper.md, "Fixed hand-set plans"; p*t*d <= 1024)
PAPER_PLANS: dict[str, tuple[int, int, int]] = {
    "bert-large": (8, 1, 128), "megatron-bert": (8, 1, 128), "gpt2-xl": (32, 1, 32),
    "megatron-gpt2-2.5b": (8, 4, 32), "megatron-gpt2-8.3b": (8, 8, 16), "gpt3-175b": (32, 4, 8),
    "opt-350m": (12, 1, 85), "llama2-7b": (8, 1, 128),
}


def _try(name: str, fn) -> BaselineResult:
    try:
        return fn()
    except PhazeError as e:  # a refused baseline must never abort the search (our own bugs still raise)
        return BaselineResult(name, None, None, str(e))


def _best_fitting(name: str, shapes, model, accelerator, cluster, global_batch, microbatch_sizes,
                  recompute_modes, sequence_parallel, runtime: Runtime, **kw) -> BaselineResult:
    """Evaluate (p, t, d) shapes with balanced stages over mbs x recompute; the fastest that fits, else
    the one closest to fitting."""
    best_fit, best_miss, indivisible = None, None, {}
    for p, t, d in shapes:
        for mbs in microbatch_sizes:
            if global_batch % (mbs * d):
                indivisible.setdefault(d, []).append(mbs)
                continue
            m = global_batch // (mbs * d)
            for rc in recompute_modes:
                sp = sequence_parallel and t > 1
                plan = Plan.balanced(model.num_layers, p, t, d, mbs, m, recompute=Recompute.uniform(rc),
                                     sequence_parallel=sp, runtime=runtime.for_shape(t, sp))
                ev = evaluate(plan, model, accelerator, cluster, global_batch, **kw)
                if ev.fits:
                    if best_fit is None or ev.iteration_time_s < best_fit.iteration_time_s:
                        best_fit = ev
                elif best_miss is None or ev.memory_excess_bytes < best_miss.memory_excess_bytes:
                    best_miss = ev
        if best_fit is not None:
            break
    if best_fit is not None:
        return BaselineResult(name, best_fit.plan, best_fit, note=_unused_note(best_fit, global_batch))
    if best_miss is not None:
        return BaselineResult(name, best_miss.plan, best_miss,
                              f"does not fit: stage {best_miss.oom_stage} exceeds memory by "
                              f"{best_miss.memory_excess_bytes / 2**30:.2f} GiB")
    reasons = [f"global batch {global_batch} not divisible by mbs x d {d} for mbs {', '.join(map(str, mbs))}"
               for d, mbs in indivisible.items()]
    return BaselineResult(name, None, None, "; ".join(reasons) or "no plan could be built")


def _unused_note(ev, global_batch: int) -> str:
    """Why a fixed plan leaves devices idle (empty when it uses them all)."""
    p, t, d = ev.plan.pp, ev.plan.tp, ev.plan.dp
    used, given = ev.devices_used, ev.devices_given
    if used >= given:
        return ""
    return (f"uses {used} of {given} devices: p={p} x t={t} x d={d}; d must divide the global batch "
            f"{global_batch / ev.plan.microbatch_size:g} (in microbatches) and p x t x d fit in {given}")


def paper_baseline(model: ModelConfig, accelerator: Accelerator, cluster: Cluster, global_batch: int,
                   runtime: Runtime, *, devices: int | None = None, microbatch_sizes=(1, 2, 4, 8, 16),
                   recompute_modes=RECOMPUTE_MODES, **kw) -> BaselineResult:
    name = "paper"
    shape = PAPER_PLANS.get(model.name)
    if shape is None:
        return BaselineResult(name, None, None, f"the paper has no fixed plan for {model.name}")
    n = devices or cluster.num_devices
    p, t, d = shape
    if p * t * d > n:
        return BaselineResult(name, None, None, f"the paper's plan p={p} t={t} d={d} needs {p * t * d} "
                                                f"devices, only {n} available")
    return _try(name, lambda: _best_fitting(name, [shape], model, accelerator, cluster, global_batch,
                                            microbatch_sizes, recompute_modes, False, runtime, **kw))


def megatron_baseline(model: ModelConfig, accelerator: Accelerator, cluster: Cluster, global_batch: int,
                      runtime: Runtime, *, devices: int | None = None, **kw) -> BaselineResult:
    name = "megatron"

    def build() -> BaselineResult:
        n = devices or cluster.num_devices
        node = cluster.tiers[0].devices_per_group
        t = 1
        while t * 2 <= min(8, node, model.max_tp, n) and model.valid_tp(t * 2):
            t *= 2
        shapes = []
        for p in range(1, model.num_layers + 3):
            if p * t > n:
                break
            ds = [d for d in range(1, n // (p * t) + 1) if global_batch % d == 0]
            if ds:
                shapes.append((p, t, max(ds)))
        if not shapes:
            return BaselineResult(name, None, None, f"no (p, t={t}, d) fits {n} devices and batch {global_batch}")
        # smallest p that fits: _best_fitting stops at the first shape with a fitting plan
        return _best_fitting(name, shapes, model, accelerator, cluster, global_batch, (1,), ("selective",),
                             True, runtime, **kw)
    return _try(name, build)


def evaluate_baselines(model: ModelConfig, accelerator: Accelerator, cluster: Cluster, global_batch: int,
                       runtime: Runtime, *, devices: int | None = None, **kw) -> tuple[BaselineResult, ...]:
    """Every baseline under ``runtime``; never raises."""
    out = [_try("paper", lambda: paper_baseline(model, accelerator, cluster, global_batch, runtime, devices=devices,
                                                **kw)),
           _try("megatron", lambda: megatron_baseline(model, accelerator, cluster, global_batch, runtime,
                                                      devices=devices, **kw))]
    return tuple(out)
