"""The public API's placement calls: ``plan`` (the best training plan on N devices), ``evaluate_plan`` (one
plan), what a plan assumes (``plan_setting``) and its HTML report (``plan_report``). The runtime (``Runtime``)
and the plan space (``PlanSpace``) are built once by the caller and passed whole."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.api.resolve import (check_moe, check_ranges, check_runtime, resolve_accelerator, resolve_cluster,
                                resolve_model)
from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PlanSpace, Runtime


def plan(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
         cluster=None, runtime: Runtime | None = None, space: PlanSpace | None = None,
         seq_len: int | None = None, top_k: int = 5):
    """The best training plan (and ``top_k`` runners-up and the baselines) of ``space`` (default
    ``PlanSpace()``: every width, microbatch 1-16, interleaving 1/2/4, sequence parallelism and ZeRO-1 on and
    off, per-stage recompute) for ``model`` on ``devices`` chips, every plan under ``runtime`` (default
    ``Runtime()``: flash attention, bf16, a 3 GiB reserve per device; not searched). A ``PlanResult``."""
    from phaze.placement import optimize

    space = PlanSpace() if space is None else space
    check_ranges(devices=devices, global_batch=global_batch, seq=seq_len, top=top_k, mbs=space.microbatch_sizes,
                 ep=space.ep_values, etp=space.etp_values)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    runtime = check_runtime(runtime, acc)
    check_moe(m, runtime, space.ep_values, space.etp_values, devices=devices)
    space.check(runtime, seq_len or m.seq_len)
    return optimize(m, acc, resolve_cluster(cluster, acc, devices), global_batch, runtime, space, devices=devices,
                    top_k=top_k, seq_len=seq_len)


@dataclass(frozen=True)
class PlanShape:
    """One plan's shape for ``evaluate_plan``: widths, microbatch, interleaving, recompute (one mode, one per
    pipeline stage as "full,none", or a ``Recompute``), sequence parallelism, ZeRO-1; stages balanced. ``ep``,
    ``etp``: expert parallelism and expert tensor parallelism of an MoE model (ep x etp divides tp x cp x dp)."""

    tp: int
    pp: int
    dp: int
    mbs: int
    interleave: int = 1
    recompute: object = "none"
    sequence_parallel: bool = False
    zero1: bool = False
    cp: int = 1
    ep: int = 1
    etp: int = 1


def evaluate_plan(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
                  shape: PlanShape, cluster=None, runtime: Runtime | None = None, seq_len: int | None = None):
    """Evaluate one plan of ``shape`` with balanced stages under ``runtime`` (default ``Runtime()``):
    iteration time, throughput, MFU, memory per stage (an ``Evaluation``)."""
    from phaze.placement import Plan, Recompute, evaluate

    recompute = Recompute.parse(shape.recompute, stages=shape.pp, what="--recompute")
    tp, pp, dp, mbs, cp = shape.tp, shape.pp, shape.dp, shape.mbs, shape.cp
    check_ranges(devices=devices, global_batch=global_batch, tp=tp, pp=pp, dp=dp, mbs=mbs,
                 interleave=shape.interleave, seq=seq_len, cp=cp, ep=shape.ep, etp=shape.etp)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    runtime = check_runtime(runtime, acc)
    check_moe(m, runtime, shape.ep, shape.etp, group=tp * cp * dp)
    sp = shape.sequence_parallel and tp > 1
    runtime.check_shape(tp=tp, sequence_parallel=sp, cp=cp, what="--cp: " if cp > 1 else "")
    if tp * pp * dp * cp > devices:
        what = "tp*pp*cp*dp" if cp > 1 else "tp*pp*dp"
        raise InfeasibleError(f"the plan needs {what} = {tp * pp * dp * cp} devices but --devices is {devices}")
    if not m.valid_tp(tp):
        raise ConfigError(f"--tp {tp} is not valid for {m.name}: {m.tp_rule}")
    if global_batch % (mbs * dp):
        raise ConfigError(f"--global-batch {global_batch} is not a multiple of mbs*dp = {mbs * dp}")
    p = Plan.balanced(m.num_layers, pp, tp, dp, mbs, global_batch // (mbs * dp), interleave=shape.interleave,
                      recompute=recompute, sequence_parallel=sp, zero1=shape.zero1, cp=cp, runtime=runtime.for_shape(tp, sp),
                      ep=shape.ep, etp=shape.etp)
    return evaluate(p, m, acc, resolve_cluster(cluster, acc, devices), global_batch, seq_len=seq_len)


def plan_setting(result, model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
                 cluster=None, seq_len: int | None = None) -> list[tuple[str, str]]:
    """What a ``plan`` result assumed, as (field, value) rows: the plan space it searched, the runtime its plans
    ran with, the time model of its layers."""
    from phaze.report.setting import plan_setting as rows

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    return rows(m, acc, resolve_cluster(cluster, acc, devices), devices, global_batch, seq_len, result.space,
                result.runtime, result.best.time_model)


def plan_report(result, path: str, model: str | ModelConfig, accelerator: str | Accelerator, devices: int,
                global_batch: int, cluster=None, seq_len: int | None = None) -> str:
    """Write the HTML report of a ``plan`` result; returns the path. The best plan's detail (its block's
    schedules under the plan's own runtime) is computed here by the placement stage; the report formats it."""
    from phaze.placement.detail import plan_detail
    from phaze.report.html import write_plan_report

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    cl = resolve_cluster(cluster, acc, devices)
    best = result.best
    detail = plan_detail(m, acc, cl, global_batch, best.plan, devices_given=devices, evaluation=best.to_dict(),
                         seq_len=seq_len)
    return write_plan_report(result, path, detail, plan_setting(result, m, acc, devices, global_batch, cl, seq_len))
