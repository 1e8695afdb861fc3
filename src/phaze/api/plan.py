"""The public API's placement calls: ``plan`` (the best training plan on N devices), ``evaluate_plan`` (one
plan), what a plan assumes (``plan_setting``) and its HTML report (``plan_report``). The runtime (``Runtime``)
and the plan space (``PlanSpace``) are built once by the caller and passed whole."""
from __future__ import annotations

from dataclasses import dataclass

from phaze.api.resolve import (check_moe, check_ranges, check_runtime, resolve_accelerator, resolve_cluster,
                               resolve_model, resolve_network)
from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PlanSpace, Runtime


def plan(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
         cluster=None, runtime: Runtime | None = None, space: PlanSpace | None = None,
         seq_len: int | None = None, top_k: int = 5):
    """The best training plan (and ``top_k`` runners-up and the baselines) of ``space`` (default
    ``PlanSpace()``: every width, microbatch 1-16, every interleaving Megatron takes, sequence parallelism on
    and off, ZeRO stages 0-3 (0-1 for an MoE model), per-stage recompute) for ``model`` on ``devices`` chips, every plan under ``runtime`` (default
    ``Runtime()``: flash attention, bf16, a 3 GiB reserve per device; not searched). A ``PlanResult``."""
    from phaze.placement import optimize

    space = PlanSpace() if space is None else space
    check_ranges(devices=devices, global_batch=global_batch, seq=seq_len, top=top_k, mbs=space.microbatch_sizes,
                 ep=space.ep_values, etp=space.etp_values)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    runtime = check_runtime(runtime, acc)
    check_moe(m, runtime, space.ep_values, space.etp_values, devices=devices)
    space.check(runtime, seq_len or m.seq_len)
    return optimize(m, acc, resolve_cluster(cluster, acc, devices, resolve_network(accelerator)), global_batch, runtime, space, devices=devices,
                    top_k=top_k, seq_len=seq_len)


@dataclass(frozen=True)
class PlanShape:
    """One plan's shape for ``evaluate_plan``: widths, microbatch, interleaving, recompute (one mode, one per
    pipeline stage as "full,none", or a ``Recompute``), sequence parallelism, the ZeRO stage (0-3); stages
    balanced unless ``stage_layers`` gives them. ``ep``,
    ``etp``: expert parallelism and expert tensor parallelism of an MoE model (ep x etp divides tp x cp x dp)."""

    tp: int
    pp: int
    dp: int
    mbs: int
    interleave: int = 1
    recompute: object = "none"
    sequence_parallel: bool = False
    zero: int = 0
    cp: int = 1
    ep: int = 1
    etp: int = 1
    stage_layers: tuple[int, ...] | None = None  # blocks per (virtual) stage; None: as even as possible


def check_zero(model: ModelConfig, zero) -> None:
    """ZeRO stage ``zero`` is one phaze models for ``model`` (ZeRO-2/3 of an MoE model's experts, sharded over
    their own expert-data-parallel group, are not modelled)."""
    if zero not in (0, 1, 2, 3):  # (True reads as ZeRO-1)
        raise ConfigError(f"--zero {zero}: ZeRO stages are 0, 1, 2 and 3")
    if zero >= 2 and getattr(model, "is_moe", False):
        raise ConfigError(f"--zero {zero}: ZeRO-2/3 of an MoE model's experts are not modelled yet; use --zero 0 or 1")


def evaluate_plan(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
                  shape: PlanShape, cluster=None, runtime: Runtime | None = None, seq_len: int | None = None):
    """Evaluate one plan of ``shape`` with balanced stages under ``runtime`` (default ``Runtime()``):
    iteration time, throughput, MFU, memory per stage (an ``Evaluation``)."""
    from phaze.placement import Plan, Recompute, evaluate
    from phaze.placement.plan import plan_from_blocks

    recompute = Recompute.parse(shape.recompute, stages=shape.pp, what="--recompute")
    tp, pp, dp, mbs, cp = shape.tp, shape.pp, shape.dp, shape.mbs, shape.cp
    check_ranges(devices=devices, global_batch=global_batch, tp=tp, pp=pp, dp=dp, mbs=mbs,
                 interleave=shape.interleave, seq=seq_len, cp=cp, ep=shape.ep, etp=shape.etp)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    runtime = check_runtime(runtime, acc)
    check_moe(m, runtime, shape.ep, shape.etp, group=tp * cp * dp)
    check_zero(m, shape.zero)
    sp = shape.sequence_parallel and tp > 1
    # TP overlap is on by default and runs only where there is sequence parallelism (``Runtime.for_shape``)
    runtime.for_shape(tp, sp).check_shape(tp=tp, sequence_parallel=sp, cp=cp, what="--cp: " if cp > 1 else "")
    if tp * pp * dp * cp > devices:
        what = "tp*pp*cp*dp" if cp > 1 else "tp*pp*dp"
        raise InfeasibleError(f"the plan needs {what} = {tp * pp * dp * cp} devices but --devices is {devices}")
    if not m.valid_tp(tp):
        raise ConfigError(f"--tp {tp} is not valid for {m.name}: {m.tp_rule}")
    if global_batch % (mbs * dp):
        raise ConfigError(f"--global-batch {global_batch} is not a multiple of mbs*dp = {mbs * dp}")
    kw = dict(tp=tp, dp=dp, microbatch_size=mbs, num_microbatches=global_batch // (mbs * dp),
              interleave=shape.interleave, recompute=recompute, sequence_parallel=sp, zero=int(shape.zero), cp=cp,
              runtime=runtime.for_shape(tp, sp), ep=shape.ep, etp=shape.etp)
    if shape.stage_layers is not None:
        blocks = tuple(shape.stage_layers)
        if len(blocks) != pp * shape.interleave or sum(blocks) != m.num_layers or min(blocks) < 0:
            raise ConfigError(f"--stage-layers {','.join(map(str, blocks))}: give {pp * shape.interleave} block "
                              f"counts (pp x interleave) adding up to the {m.num_layers} blocks of {m.name}")
        p = plan_from_blocks(blocks, **kw)
    else:
        p = Plan.balanced(m.num_layers, pp, **kw)
    return evaluate(p, m, acc, resolve_cluster(cluster, acc, devices, resolve_network(accelerator)), global_batch, seq_len=seq_len)


def plan_setting(result, model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
                 cluster=None, seq_len: int | None = None) -> list[tuple[str, str]]:
    """What a ``plan`` result assumed, as (field, value) rows: the plan space it searched, the runtime its plans
    ran with, the time model of its layers."""
    from phaze.report.setting import plan_setting as rows

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    return rows(m, acc, resolve_cluster(cluster, acc, devices, resolve_network(accelerator)), devices, global_batch, seq_len, result.space,
                result.runtime, result.best.time_model)


def plan_report(result, path: str, model: str | ModelConfig, accelerator: str | Accelerator, devices: int,
                global_batch: int, cluster=None, seq_len: int | None = None, framework: str = "megatron") -> str:
    """Write the HTML report of a ``plan`` result; returns the path. The best plan's detail (its block's
    schedules under the plan's own runtime) is computed here by the placement stage; the report formats it."""
    from phaze.placement.detail import plan_detail
    from phaze.report.html import write_plan_report

    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    cl = resolve_cluster(cluster, acc, devices, resolve_network(accelerator))
    best = result.best
    detail = plan_detail(m, acc, cl, global_batch, best.plan, devices_given=devices, evaluation=best.to_dict(),
                         seq_len=seq_len)
    launch = (framework, launch_settings(best, framework, m, seq_len))
    return write_plan_report(result, path, detail, plan_setting(result, m, acc, devices, global_batch, cl, seq_len),
                             launch=launch)


_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_count(text, option: str = "--tokens") -> float:
    """A positive finite count such as 15T, 2.5e12, 300B, 1.5M or 7k (k, M, B/G, T, P: powers of 1000), else a
    one-line ConfigError."""
    import math

    s = str(text).strip().replace("_", "").replace(",", "")
    mult = _SUFFIX.get(s[-1:].lower(), 1.0) if s and s[-1:].isalpha() else 1.0
    try:
        v = float(s[:-1] if mult != 1.0 else s) * mult
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise ConfigError(f"{option}: {text!r} is not a positive number (e.g. 15T, 2.5e12, 300B)")
    return v


def check_price(usd_per_gpu_hour, option: str = "--usd-per-gpu-hour") -> float:
    """A positive finite price (a number or its text), else a one-line ConfigError."""
    return parse_count(usd_per_gpu_hour if isinstance(usd_per_gpu_hour, str) else repr(usd_per_gpu_hour), option)


def training_figures(evaluation, accelerator: str | Accelerator, tokens: float | None = None,
                     usd_per_gpu_hour: float | None = None) -> dict:
    """The figures people compare for one evaluated plan: tokens/s per device, model TFLOP/s per device, the MFU
    and its definition; with ``tokens`` the time to train them (days), the GPU-hours (devices used x hours) and
    the energy (MWh: devices used x each device's power x time; ``energy_basis`` says which power, for a GPU
    preset its board TDP only); with a price the cost (GPU-hours x price)."""
    from phaze.hardware.presets import device_power_w

    ev = evaluation
    out = {"tokens_per_s_per_device": ev.tokens_per_s_per_device,
           "model_tflops_per_device": ev.model_tflops_per_device, "mfu": ev.mfu,
           "mfu_definition": ev.mfu_definition}
    if usd_per_gpu_hour is not None and tokens is None:
        raise ConfigError("--usd-per-gpu-hour prices the GPU-hours of --tokens; give --tokens too")
    if tokens is None:
        return out
    tokens = parse_count(tokens if isinstance(tokens, str) else repr(tokens))
    seconds = tokens / ev.throughput_tokens_per_s
    hours = seconds / 3600 * ev.devices_used
    watts, basis = device_power_w(resolve_accelerator(accelerator))
    out.update(tokens=tokens, train_days=seconds / 86400, gpu_hours=hours,
               energy_mwh=ev.devices_used * watts * seconds / 3.6e9, energy_basis=basis)
    if usd_per_gpu_hour is not None:
        price = check_price(usd_per_gpu_hour)
        out.update(usd_per_gpu_hour=price, cost_usd=hours * price)
    return out


def launch_settings(evaluation, framework: str, model: str | ModelConfig, seq_len: int | None = None) -> dict:
    """The launch settings of an evaluated plan (``evaluation.plan``) for ``framework`` (megatron, nemo,
    torchtitan): ``phaze.report.launch.launch_settings`` with the model's sequence length and MoE-ness."""
    from phaze.report.launch import FRAMEWORKS, launch_settings as emit

    if framework not in FRAMEWORKS:
        raise ConfigError(f"--emit: unknown framework {framework!r}; use one of {', '.join(FRAMEWORKS)}")
    m = resolve_model(model)
    return emit(evaluation.plan, framework, seq_len or m.seq_len, moe=bool(getattr(m, "is_moe", False)))


def check_emit_file(path: str | None, option: str = "--emit-file") -> None:
    """Fail before work when the launch settings cannot be written where asked."""
    import os
    from pathlib import Path

    if not path:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise ConfigError(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise ConfigError(f"{option} {path}: directory {parent} does not exist; create it or pick another path")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ConfigError(f"{option} {path}: not writable; pick a writable path")


def evaluate_args(plan) -> list[str]:
    """The ``phaze evaluate`` arguments (beyond model, accelerator, devices, global batch and cluster) that
    rebuild ``plan`` exactly: its shape, its stages as --stage-layers, and its runtime, so the plan re-evaluates
    to the time ``plan`` reported."""
    blocks = [max(0, min(b, plan.num_layers - 1) - max(a, 1)) for a, b in plan.stages]
    rt, default = plan.runtime, Runtime()
    out = ["--tp", str(plan.tp), "--pp", str(plan.pp), "--dp", str(plan.dp), "--mbs", str(plan.microbatch_size),
           "--interleave", str(plan.interleave), "--recompute", ",".join(plan.recompute_modes)
           if not plan.recompute.is_uniform else plan.recompute_modes[0],
           "--stage-layers", ",".join(map(str, blocks))]
    out += ["--sequence-parallel"] if plan.sequence_parallel else []
    out += ["--zero", str(plan.zero)] if plan.zero else []
    for flag, value in (("--cp", plan.cp), ("--ep", plan.ep), ("--etp", plan.etp)):
        out += [flag, str(value)] if value != 1 else []
    out += ["--attention", rt.attention, "--precision", rt.precision, "--grad-dtype", rt.grad_dtype,
            "--optimizer-state", rt.optimizer_state,
            "--memory-reserve-gib", repr(rt.memory_reserve_bytes / 2**30)]
    out += ["--tp-overlap", "--tp-overlap-config", rt.tp_overlap_config] if rt.tp_overlap else ["--no-tp-overlap"]
    out += ["--dp-overlap"] if rt.dp_overlap else ["--no-dp-overlap"]
    out += ["--deterministic"] if rt.deterministic else []
    out += ["--no-grad-accum-fusion"] if not rt.grad_accum_fusion else []
    if rt.moe_dispatcher != default.moe_dispatcher:
        out += ["--moe-dispatcher", rt.moe_dispatcher]
    if rt.moe_routing != default.moe_routing:
        out += ["--moe-routing", rt.moe_routing]
    out += ["--moe-a2a-overlap"] if rt.moe_a2a_overlap else []
    return out
