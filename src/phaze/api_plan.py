"""The public API's placement calls: ``plan`` (the best training plan on N devices) and ``evaluate_plan`` (one
plan), with the checks of their runtime features at the edge. Re-exported by ``phaze.api``, so the CLI calls only
it."""
from __future__ import annotations

from phaze.api import check_ranges, resolve_accelerator, resolve_cluster, resolve_model
from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.workload.config import (DEFAULT_GRAD_DTYPE, DEFAULT_OPTIMIZER_STATE, DEFAULT_TP_OVERLAP_CONFIG,
                                   DETERMINISTIC_TP_OVERLAP_ERROR, GRAD_DTYPES, OPTIMIZER_STATES, RECOMPUTE_MODES,
                                   ModelConfig)


# What `phaze plan` / `evaluate` assume unless told (README, "Runtime features"): today's kernels and formats.
DEFAULT_ATTENTION = "flash"
DEFAULT_PRECISION = "bf16"


def check_tp_overlap_config(name: str) -> str:
    """The name of a packaged userbuffers configuration, else a one-line ConfigError listing them."""
    from phaze.cost.userbuffers import ub_config_names

    if name not in ub_config_names():
        raise ConfigError(f"--tp-overlap-config: unknown userbuffers configuration {name!r}; use one of "
                          f"{', '.join(ub_config_names())}")
    return name


def _runtime(attention: str, precision: str, memory_reserve_gib: float | None,
             grad_dtype: str = DEFAULT_GRAD_DTYPE, optimizer_state: str = DEFAULT_OPTIMIZER_STATE) -> float:
    """Check the runtime choices at the edge; the memory reserve in bytes."""
    from phaze.placement.evaluation import DEFAULT_MEMORY_RESERVE_BYTES
    from phaze.workload.config import ATTENTION_KINDS, PRECISIONS

    if attention not in ATTENTION_KINDS:
        raise ConfigError(f"--attention: unknown kernel {attention!r}; use {' or '.join(ATTENTION_KINDS)}")
    if precision not in PRECISIONS:
        raise ConfigError(f"--precision: unknown format {precision!r}; use {', '.join(PRECISIONS)}")
    if grad_dtype not in GRAD_DTYPES:
        raise ConfigError(f"--grad-dtype: unknown gradient format {grad_dtype!r}; use {' or '.join(GRAD_DTYPES)}")
    if optimizer_state not in OPTIMIZER_STATES:
        raise ConfigError(f"--optimizer-state: unknown Adam state {optimizer_state!r}; use one of "
                          f"{', '.join(OPTIMIZER_STATES)}")
    if memory_reserve_gib is None:
        return float(DEFAULT_MEMORY_RESERVE_BYTES)
    if not 0 <= memory_reserve_gib < 1e6:
        raise ConfigError(f"--memory-reserve-gib must be >= 0 (GiB kept free per device), got {memory_reserve_gib}")
    return float(memory_reserve_gib) * 2**30


def _check_flag(name: str, value) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be true or false, got {value!r}")


def _check_deterministic(deterministic: bool, tp_overlap: bool) -> None:
    _check_flag("deterministic", deterministic)
    if deterministic and tp_overlap:
        raise ConfigError(f"--deterministic with --tp-overlap: {DETERMINISTIC_TP_OVERLAP_ERROR}")


def _check_precision(acc: Accelerator, precision: str) -> None:
    if precision == "fp8" and acc.fp8_matrix_factor <= 0:
        raise ConfigError(f"--precision fp8: {acc.name} has no FP8 tensor cores; use bf16 or fp16 (or a chip "
                          f"with fp8_matrix_factor > 0, e.g. h100-80g)")


def plan(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
         cluster=None, microbatch_sizes=None, recompute_modes=None, seq_len: int | None = None,
         top_k: int = 5, attention: str = DEFAULT_ATTENTION, precision: str = DEFAULT_PRECISION,
         tp_overlap: bool = False, dp_overlap: bool = False, memory_reserve_gib: float | None = None,
         cp_values=None, tp_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG, grad_dtype: str = DEFAULT_GRAD_DTYPE,
         optimizer_state: str = DEFAULT_OPTIMIZER_STATE, deterministic: bool = False,
         grad_accum_fusion: bool = True):
    """The best training plan (and runners-up and baselines) for ``model`` on ``devices`` chips. ZeRO-1
    (the distributed optimizer) is searched; ``attention``, ``precision``, ``tp_overlap`` (plans with
    sequence parallelism) and ``dp_overlap`` are the runtime features every plan runs with;
    ``memory_reserve_gib`` (default 3) is kept free on every device; ``cp_values`` (default: 1 only) the
    context-parallel sizes to search; ``tp_overlap_config`` the Transformer Engine userbuffers configuration
    of the TP overlap (``phaze.cost.userbuffers.ub_config_names()``; not searched: it is how the framework is set
    up); ``grad_dtype`` the gradients' format, "fp32" (Megatron's main grads) or "bf16", and ``optimizer_state``
    what Adam keeps per parameter (``phaze.workload.config.OPTIMIZER_STATES``; neither searched: a numerics
    choice the user makes); ``deterministic``: PyTorch's deterministic mode as Megatron-LM's
    ``--deterministic-mode`` runs it (``phaze.cost.gpu_determinism``; GPUs only, no TP overlap);
    ``grad_accum_fusion``: Megatron-LM's gradient-accumulation fusion (False: ``--no-gradient-accumulation-fusion``;
    not searched)."""
    from phaze.placement import optimize

    check_ranges(devices=devices, global_batch=global_batch, seq=seq_len, top=top_k, mbs=microbatch_sizes)
    reserve = _runtime(attention, precision, memory_reserve_gib, grad_dtype, optimizer_state)
    check_tp_overlap_config(tp_overlap_config)
    _check_deterministic(deterministic, tp_overlap)
    _check_flag("grad_accum_fusion", grad_accum_fusion)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    _check_precision(acc, precision)
    kw = {}
    if microbatch_sizes:
        kw["microbatch_sizes"] = tuple(microbatch_sizes)
    if recompute_modes:
        for r in recompute_modes:
            if r not in RECOMPUTE_MODES:
                raise ConfigError(f"--recompute: unknown mode {r!r}; use {', '.join(RECOMPUTE_MODES)}")
        kw["recompute_modes"] = tuple(recompute_modes)
    if cp_values:
        cps = tuple(cp_values)
        if any(not isinstance(c, int) or c < 1 for c in cps):
            raise ConfigError(f"--cp: context-parallel sizes must be positive integers, got {cps}")
        if any(c > 1 for c in cps) and attention != "flash":
            raise ConfigError("--cp above 1 needs --attention flash (ring attention is built on the fused kernel)")
        bad = [c for c in cps if (seq_len or m.seq_len) % (2 * c)]
        if bad:
            raise ConfigError(f"--cp {bad[0]}: the sequence length {seq_len or m.seq_len} must be divisible by "
                              f"2 x cp (load-balanced causal chunks)")
        kw["cp_values"] = cps
    return optimize(m, acc, resolve_cluster(cluster, acc, devices), global_batch, devices=devices,
                    top_k=top_k, seq_len=seq_len, attention=attention, precision=precision, tp_overlap=tp_overlap,
                    overlap_dp=dp_overlap, memory_reserve_bytes=reserve, tp_overlap_config=tp_overlap_config,
                    grad_dtype=grad_dtype, optimizer_state=optimizer_state, deterministic=deterministic,
                    grad_accum_fusion=grad_accum_fusion, **kw)


def evaluate_plan(model: str | ModelConfig, accelerator: str | Accelerator, devices: int, global_batch: int,
                  tp: int, pp: int, dp: int, mbs: int, interleave: int = 1, recompute="none",
                  sequence_parallel: bool = False, zero1: bool = False, cluster=None,
                  seq_len: int | None = None, attention: str = DEFAULT_ATTENTION,
                  precision: str = DEFAULT_PRECISION, tp_overlap: bool = False, dp_overlap: bool = False,
                  memory_reserve_gib: float | None = None, cp: int = 1,
                  tp_overlap_config: str = DEFAULT_TP_OVERLAP_CONFIG, grad_dtype: str = DEFAULT_GRAD_DTYPE,
                  optimizer_state: str = DEFAULT_OPTIMIZER_STATE, deterministic: bool = False,
                  grad_accum_fusion: bool = True):
    """Evaluate one plan with balanced stages: iteration time, throughput, MFU, memory per stage.
    ``recompute``: one mode, one per pipeline stage ("full,none" or a sequence) or a ``Recompute``. Runtime features as in
    ``plan``; ``cp``: context parallelism (each sequence split over cp devices; needs flash attention);
    ``tp_overlap_config``: the userbuffers configuration of the TP overlap; ``grad_dtype``: the gradients' format;
    ``optimizer_state``: what Adam keeps per parameter; ``deterministic``: PyTorch's deterministic mode;
    ``grad_accum_fusion``: Megatron-LM's gradient-accumulation fusion."""
    from phaze.errors import InfeasibleError
    from phaze.placement import Plan, Recompute, evaluate

    recompute = Recompute.parse(recompute, stages=pp, what="--recompute")
    check_ranges(devices=devices, global_batch=global_batch, tp=tp, pp=pp, dp=dp, mbs=mbs,
                 interleave=interleave, seq=seq_len, cp=cp)
    reserve = _runtime(attention, precision, memory_reserve_gib, grad_dtype, optimizer_state)
    check_tp_overlap_config(tp_overlap_config)
    _check_deterministic(deterministic, tp_overlap)
    _check_flag("grad_accum_fusion", grad_accum_fusion)
    m, acc = resolve_model(model), resolve_accelerator(accelerator)
    _check_precision(acc, precision)
    if cp > 1 and attention != "flash":
        raise ConfigError("--cp needs --attention flash (ring attention is built on the fused kernel)")
    if tp * pp * dp * cp > devices:
        what = "tp*pp*cp*dp" if cp > 1 else "tp*pp*dp"
        raise InfeasibleError(f"the plan needs {what} = {tp * pp * dp * cp} devices but --devices is {devices}")
    if not m.valid_tp(tp):
        raise ConfigError(f"--tp {tp} is not valid for {m.name}: {m.tp_rule}")
    if global_batch % (mbs * dp):
        raise ConfigError(f"--global-batch {global_batch} is not a multiple of mbs*dp = {mbs * dp}")
    sp = sequence_parallel and tp > 1
    if tp_overlap and tp > 1 and not sp:
        raise ConfigError("--tp-overlap needs --sequence-parallel (Transformer Engine overlaps the all-gather / "
                          "reduce-scatter pairs of sequence parallelism)")
    p = Plan.balanced(m.num_layers, pp, tp, dp, mbs, global_batch // (mbs * dp), interleave=interleave,
                      recompute=recompute, sequence_parallel=sp, zero1=zero1, attention=attention,
                      precision=precision, tp_overlap=tp_overlap and sp, dp_overlap=dp_overlap, cp=cp,
                      tp_overlap_config=tp_overlap_config, grad_dtype=grad_dtype, optimizer_state=optimizer_state,
                      deterministic=deterministic, grad_accum_fusion=grad_accum_fusion)
    return evaluate(p, m, acc, resolve_cluster(cluster, acc, devices), global_batch, seq_len=seq_len,
                    memory_reserve_bytes=reserve)
