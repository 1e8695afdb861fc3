"""The setting a search or a plan assumes, as (field, value) rows: printed by the CLI before any work and
shown first in the HTML report, so nothing the answer depends on is left implicit."""
from __future__ import annotations

from dataclasses import fields
from phaze.units import GiB, MiB
from phaze.workload.memory import ADAM_STATE_BYTES



def _si(v: float, unit: str) -> str:
    for scale, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.4g} {p}{unit}"
    return f"{v:.4g} {unit}"


def _vals(v) -> str:
    return ", ".join(str(x) for x in v)


def cluster_text(cluster) -> str:
    """'flat: all 1024 devices at 4.295 GB/s per device, 0 s latency' per tier."""
    out = []
    for t in cluster.tiers:
        span = "all" if t.devices_per_group >= cluster.num_devices else f"groups of {t.devices_per_group}"
        eff = f" x {t.efficiency:.3g} achievable" if t.efficiency != 1 else ""
        out.append(f"{t.name}: {span} devices at {_si(t.bandwidth_Bps, 'B/s')} per device per direction{eff}, "
                   f"{t.latency_s * 1e6:g} us latency")
    return f"{cluster.name} ({cluster.num_devices} devices): " + "; ".join(out)


def _distinct(index) -> int:
    """How many distinct values a non-negative integer array holds (a count per value, not a set of 3.6 M)."""
    import numpy as np

    return int(np.count_nonzero(np.bincount(np.asarray(index)))) if len(index) else 0


def space_rows(space, cands) -> list[tuple[str, str]]:
    """The design-space axes, the area window and what it keeps."""
    budget = cands.budget_mm2
    lo = space.min_fraction * budget
    waived = " (waived for chips with 1 tensor core or 1 vector core)" if space.waive_min_for_single_core else ""
    return [
        ("tensor cores (num_tc)", _vals(space.num_tc)),
        ("tensor-core rows (depth)", _vals(space.tc_depths)),
        ("tensor-core columns = vector lanes (width)", _vals(space.tc_widths)),
        ("vector cores (num_vc)", _vals(space.num_vc)),
        ("global buffer (MiB)", _vals(g // MiB for g in space.glb_bytes)),
        ("area window", f"{space.min_fraction:g} x budget <= area{' (with the network PHY)' if cands.networks else ''}"
                        f" <= budget, i.e. {lo:.2f} to {budget:.2f} mm^2"
                        f"{waived}"),
        ("design space", f"{cands.__len__():,} chips kept of {space.raw_size:,} raw points" if not cands.networks
         else f"{cands.__len__():,} (chip, network) pairs kept, {_distinct(cands.chip_index):,} chips with "
              f"up to {len(cands.networks)} networks each, of {space.raw_size:,} raw chip points"),
    ]


def network_text(space, cluster_name: str) -> str:
    """The network axis of a space (docs/network-axis.md), for the setting table's network row."""
    from phaze.hardware.chip_network import TPUV4_ICI

    gbs = lambda v: ", ".join(f"{x / 1e9:g}" for x in v)  # noqa: E731
    return (f"each chip chooses its own (docs/network-axis.md): a scale-up domain of {_vals(space.net_scale_up_chips)} "
            f"chips at {gbs(space.net_scale_up_Bps)} GB/s per chip, {' or '.join(space.net_topologies)}; scale-out "
            f"{gbs(space.net_scale_out_Bps)} GB/s per chip; its PHY area, PHY power and price count against the "
            f"budget, the power cap and the TCO. Both references on TPU v4's ICI ({TPUV4_ICI.name} per chip, 3-D "
            f"torus, its PHY in their area and power); --cluster {cluster_name} is not used")


def search_setting(spec: dict) -> list[tuple[str, str]]:
    """Rows for a search from its fingerprint (``SearchSpec.fingerprint()``, also what a store keeps)."""
    from phaze.hardware.presets import get_cluster
    from phaze.hardware.space import enumerate_space, stored_design_space
    from phaze.workload.config import ModelConfig
    from phaze.workload.memory import param_count

    space = stored_design_space(spec["space"])  # a store from before the network axis: no axis
    cands = enumerate_space(space)
    mk = {f.name for f in fields(ModelConfig)}
    models = [ModelConfig(**{k: v for k, v in m.items() if k in mk}) for m in spec["models"]]
    rows = [("models", "; ".join(f"{m.name} ({param_count(m) / 1e9:.3g} B parameters, {m.num_layers} blocks, "
                                 f"sequence {m.seq_len})" for m in models)),
            ("devices", str(spec["devices"])), ("global batch (sequences)", str(spec["global_batch"])),
            ("cluster", cluster_text(get_cluster(spec["cluster"], spec["devices"]))) if not space.has_network_axis
            else ("network", network_text(space, spec["cluster"]))]
    rows += space_rows(space, cands)
    rows.append(("HBM sizes (GiB)", _vals(spec["hbm_gib"])))
    if len(cands):
        a = cands.accelerator(0)
        rows.append(("every chip's clock and HBM bandwidth", f"{_si(a.freq_hz, 'Hz')}, "
                                                             f"{_si(a.hbm_bandwidth_Bps, 'B/s')} (the TPUv4-like chip's)"))
    full = spec.get("plan_space", "paper") == "full"
    shape = ("every interleaving Megatron takes, sequence parallelism on and off, ZeRO 0-3 (0-1 for MoE), a "
             "recompute mode per pipeline stage; standard attention, bf16, gradient reduce overlapped (no flash "
             "attention or TP overlap: the chip model has no fused-attention kernel or userbuffers)" if full else
             "no interleaving, no sequence parallelism, no ZeRO, one recompute mode per plan")
    rows += [("plan space per chip", f"{'full' if full else 'the paper' + chr(39) + 's'} (--plan-space): microbatch "
                                     f"{_vals(spec['microbatch_sizes'])}; tensor-parallel "
                                     f"{_vals(spec['tp_values']) if spec.get('tp_values') else 'every valid width up to the model max'}; "
                                     f"recompute {_vals(spec['recompute_modes'])}; {shape}; optimizer "
                                     f"{spec.get('optimizer', 'adam')}"),
             ("layer times", "optimal per-layer schedules on tensor and vector cores (exact branch and bound, "
                             "CP-SAT fallback)" + (
                                 "; each op costed with the whole GLB and HBM, then the schedules the branch and "
                                 "bound passed through re-timed so concurrent ops share them and the shortest kept "
                                 "(feasible, within its lower bound's gap of optimal; no CP-SAT there)"
                                 if space.template == "chip" else "")),
             ("references", "TPUv4-like (the score's) and TPU v4 (tpuv4), each under its best plan, and at the "
                            "winner's HBM capacity where it differs" if space.template == "chip"
              else "TPUv4-like (the paper's chip) under its best plan and the paper's plan"),
             ("score", "throughput divided by the TPUv4-like chip's under its own best plan (mean over models)"),
             ("power cap", f"chips whose peak power exceeds {spec['tdp_w']:.1f} W are left out (--tdp-w; the default "
                           f"is the TPUv4-like chip's own peak)" if spec.get("tdp_w")
              else "none (--tdp-w none, or a space without a power model)"),
             ("Pareto front", "exact over the whole space" if spec.get("pareto")
              else "among the exactly evaluated candidates (--pareto makes it exact)")]
    return rows


def _runtime_rows(rt, usable_bytes: float) -> list[tuple[str, str]]:
    """The runtime every plan runs with (a ``phaze.workload.runtime.Runtime``: ``phaze plan``'s flags)."""
    from phaze.workload.runtime import Runtime
    best = Runtime()

    def tag(name: str, text: str) -> str:  # the defaults follow current Megatron-Core / NeMo recipes
        return text + ("  [default: recipe best practice]" if getattr(rt, name) == getattr(best, name) else
                       "  [changed from the default]")

    att = {"flash": "flash (fused kernel, no score matrix stored; selective recompute = none)",
           "standard": "standard (the score matrix is stored for the backward)"}[rt.attention]
    return [("attention", tag("attention", att)), ("precision", tag("precision", rt.precision)),
            ("TP overlap", tag("tp_overlap",
                               f"on: TP collectives overlap their GEMMs (plans with sequence parallelism), userbuffers "
                               f"configuration {rt.tp_overlap_config}" if rt.tp_overlap
                               else "off: TP collectives block (--tp-overlap turns it on)")),
            ("DP overlap", tag("dp_overlap",
                               "on: the gradient reduce overlaps the backward, the ZeRO-1/2 all-gather the next "
                               "forward, ZeRO-3's gathers the compute before them, bucketed" if rt.dp_overlap
                               else "off: the gradient reduce runs after the backward (--dp-overlap turns it on)")),
            ("gradients", "bf16: a 16-bit gradient buffer, DP reduce and wgrad accumulation"
             if rt.grad_dtype == "bf16"
             else "fp32: Megatron's fp32 main grads, reduced in fp32"),
            ("Adam state", _ADAM_STATE_TEXT[rt.optimizer_state]),
            ("deterministic mode", "on: PyTorch fills every allocation (Megatron-LM --deterministic-mode); on an "
                                   "A100 FlashAttention-2's deterministic backward (cuDNN's on an H100 not costed)"
             if rt.deterministic else "off"),
            ("gradient-accumulation fusion", "on: the wgrad GEMMs add into the gradient buffer"
             if rt.grad_accum_fusion
             else "off: each wgrad GEMM writes a fresh gradient that is then added into the buffer"),
            ("memory reserve", f"{rt.memory_reserve_bytes / GiB:g} GiB per device kept free (usable "
                               f"{usable_bytes / GiB:.4g} GiB)")]


_ADAM_STATE_WHAT = {
    "fp32": "fp32 master copy + m + v",
    "fp32-remainders": "fp32 m + v and the master weights' low 16 bits (Apex store_param_remainders)",
    "bf16-master": "bf16 m + v + a bf16 master copy (NeMo optim.dtype: bf16 with FP8 parameters)",
    "bf16": "bf16 m + v, no master copy (NeMo optim.dtype: bf16)",
}
_ADAM_STATE_TEXT = {k: f"{k}: {v}, {ADAM_STATE_BYTES[k]} B per parameter" for k, v in _ADAM_STATE_WHAT.items()}


def plan_setting(model, accelerator, cluster, devices: int, global_batch: int, seq_len: int | None, space, runtime,
                 time_model: str) -> list[tuple[str, str]]:
    """Rows for ``phaze plan``: the plan space searched (a ``PlanSpace``), the ``runtime`` every plan ran
    with, and the ``time_model`` its layers were costed with (what the result carries)."""
    from phaze.workload.memory import param_count

    acc = accelerator
    tps = _vals(space.tp_values) if space.tp_values else "every valid width"
    return [("model", f"{model.name} ({param_count(model) / 1e9:.3g} B parameters, {model.num_layers} blocks)"),
            ("sequence length", str(seq_len or model.seq_len)),
            ("accelerator", f"{acc.name}: {acc.num_tc} tensor cores of {acc.tc_rows}x{acc.tc_cols}, {acc.num_vc} "
                            f"vector cores of {acc.vc_width}, {_si(acc.freq_hz, 'Hz')}, HBM {acc.hbm_bytes / GiB:.4g} GiB "
                            f"at {_si(acc.hbm_bandwidth_Bps, 'B/s')}, peak {_si(acc.peak_matrix_flops, 'FLOP/s')}"),
            ("devices", str(devices)), ("global batch (sequences)", str(global_batch)),
            ("cluster", cluster_text(cluster)),
            ("microbatch sizes", _vals(space.microbatch_sizes)),
            ("recompute modes", _vals(space.recompute_modes) + (" (one per plan, or one per stage)"
                                                                 if space.per_stage_recompute else " (one per plan)")),
            ("plan space", f"tensor-parallel: {tps}; interleaving {_vals(space.interleave_values) if space.interleave_values else 'every size dividing the blocks'}; "
                           f"sequence parallelism {'/'.join('on' if x else 'off' for x in space.sequence_parallel)}; "
                           f"ZeRO stages {_vals(space.zero)}; "
                           f"context parallelism {_vals(space.cp_values)}; "
                           + (f"all {devices} devices" if space.use_all_devices
                              else f"up to {devices} devices (fewer when that is faster)")),
            *_runtime_rows(runtime, accelerator.hbm_bytes - runtime.memory_reserve_bytes),
            ("time model", "kernels one after another, as Megatron-LM runs on GPUs" if time_model == "sequential"
             else "optimal per-layer schedules on tensor and vector cores" + (
                 ", re-timed so concurrent ops share the GLB and HBM" if acc.has_hierarchy else ""))]
