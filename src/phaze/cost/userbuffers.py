"""Transformer Engine userbuffers configurations: how each of TE's ten TP-communication overlaps runs.

Which method each overlap uses (ring_exchange / pipeline / bulk), how many SMs its communication kernel holds
and in how many chunks a pipelined GEMM runs is the run's userbuffers configuration (``UbConfig``), one of the
named configurations of ``data/tp_overlap_configs.json`` with its source: by default NeMo's tuned GPT-3 175B
H100 configuration (github NVIDIA/dgxc-benchmarking nemo_megatron/gpt3_175b_hydra.yaml: proj_fprop pipeline
24 SMs, fc2_fprop pipeline 20, qkv_wgrad bulk 8, fc1_wgrad bulk 4, qkv_dgrad bulk 4, fc1_dgrad bulk 2, ring
exchanges on the copy engines), "te-default" for runs that name none (Transformer Engine's own defaults: 16
SMs per pipeline and bulk overlap). A ring exchange charges no SM: with ``use_ce`` (TE's default, set by none
of these configurations) ``userbuffers_send`` moves each chunk with ``cudaMemcpyAsync`` and launches its
signalling kernel on one thread block (TE v1.12 userbuffers/userbuffers.cu, ``SETUP_LAUNCH_CONFIG(signalonly ?
1 : comm->sms, ...)``); only when the configuration sets ``set_sm_margin`` is the GEMM launched on SMs - num_sm
(comm_gemm_overlap.h ``_math_sms``), and then those SMs are charged. For pipeline and bulk overlaps num_sm is
charged over the whole GEMM whether or not ``set_sm_margin`` is set (without the margin the GEMM is launched on
all SMs and loses them only while the communication kernel runs: not modelled, an upper bound on the loss;
README "Accuracy against measured clusters" gives what the other reading would change). The timing of each
method is ``phaze.cost.overlap``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from phaze.errors import ConfigError
from phaze.workload.config import DEFAULT_TP_OVERLAP_CONFIG


# TE's ten userbuffers overlaps by the name of the TP collective they move here (phaze.workload.graphs, the
# backward's from phaze.workload.autodiff; TE v1.12 module/base.py initialize_ub names them by the GEMM the
# collective overlaps). The forward's ring-exchange all-gathers and the backward's all-gathers of the output
# gradient: qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad; the forward's reduce-scatters: proj_fprop, fc2_fprop;
# the backward's bulk overlaps: the dgrad's reduce-scatter (qkv_wgrad, fc1_wgrad: it runs beside the wgrad
# GEMM) and the input re-gathered for the wgrad (qkv_dgrad, fc1_dgrad: beside the dgrad GEMM). A recomputed
# forward (``recompute.<name>``) runs through the same TE modules, so through the same userbuffers.
TE_OVERLAP_OF = {
    "qkv.all_gather": "qkv_fprop", "fc1.all_gather": "fc1_fprop",
    "attn.reduce_scatter.bwd": "proj_dgrad", "mlp.reduce_scatter.bwd": "fc2_dgrad",
    "attn.reduce_scatter": "proj_fprop", "mlp.reduce_scatter": "fc2_fprop",
    "qkv.input_all_gather": "qkv_dgrad", "qkv.all_gather.bwd": "qkv_wgrad",
    "fc1.input_all_gather": "fc1_dgrad", "fc1.all_gather.bwd": "fc1_wgrad",
}
TE_OVERLAPS = tuple(TE_OVERLAP_OF.values())
# the methods TE (and phaze) allow per overlap: the all-gathers of the forward / of the output gradient only as
# ring exchanges; the forward's reduce-scatters as pipeline or ring exchange (TE refuses "pipeline" for an
# all-gather, ``add_ub``); the backward's bulk overlaps as bulk (TE's non-bulk dgrad overlap replaces the
# wgrad's, a different graph, not modelled)
_METHODS = {"qkv_fprop": ("ring_exchange",), "fc1_fprop": ("ring_exchange",), "proj_dgrad": ("ring_exchange",),
            "fc2_dgrad": ("ring_exchange",), "proj_fprop": ("pipeline", "ring_exchange"),
            "fc2_fprop": ("pipeline", "ring_exchange"), "qkv_dgrad": ("bulk",), "qkv_wgrad": ("bulk",),
            "fc1_dgrad": ("bulk",), "fc1_wgrad": ("bulk",)}


@dataclass(frozen=True)
class UbOverlap:
    """One userbuffers overlap: TE's method, the SMs of its communication kernel (or the GEMM's SM margin),
    the GEMM chunks of a pipeline overlap (None: a ring exchange runs t chunks, bulk the whole GEMM), and
    whether the GEMM is launched on the SMs the communication leaves."""

    method: str
    num_sm: int
    num_splits: int | None = None
    set_sm_margin: bool = False

    @property
    def charged_sms(self) -> int:
        """SMs the GEMM beside this overlap loses (module docstring): a ring exchange only its SM margin."""
        if self.method == "ring_exchange":
            return self.num_sm if self.set_sm_margin else 0
        return self.num_sm


@dataclass(frozen=True)
class UbConfig:
    """A named userbuffers configuration: ``overlaps`` as (TE name, UbOverlap) for TE's ten overlaps."""

    name: str
    source: str
    overlaps: tuple[tuple[str, UbOverlap], ...]

    def of(self, collective_name: str) -> UbOverlap | None:
        """The overlap that moves this TP collective (None: not one of TE's ten, e.g. the LM head's)."""
        te = TE_OVERLAP_OF.get(collective_name.removeprefix("recompute."))
        return dict(self.overlaps).get(te) if te else None


def _parse_config(name: str, raw: dict) -> UbConfig:
    got = raw.get("overlaps", {})
    if sorted(got) != sorted(TE_OVERLAPS):
        raise ConfigError(f"userbuffers configuration {name!r}: needs exactly the overlaps {', '.join(TE_OVERLAPS)}")
    out = []
    for te in TE_OVERLAPS:
        o = got[te]
        ov = UbOverlap(method=o["method"], num_sm=int(o["num_sm"]),
                       num_splits=None if o.get("num_splits") is None else int(o["num_splits"]),
                       set_sm_margin=bool(o.get("set_sm_margin", False)))
        if ov.method not in _METHODS[te]:
            raise ConfigError(f"userbuffers configuration {name!r}: {te} cannot be {ov.method!r}; "
                              f"use {' or '.join(_METHODS[te])}")
        if ov.num_sm < 0 or (ov.method == "pipeline" and (ov.num_splits or 0) < 1):
            raise ConfigError(f"userbuffers configuration {name!r}: {te} needs num_sm >= 0 and, as a pipeline, "
                              f"num_splits >= 1")
        out.append((te, ov))
    return UbConfig(name=name, source=str(raw.get("source", "")), overlaps=tuple(out))


@lru_cache(maxsize=1)
def _configs() -> dict[str, UbConfig]:
    raw = json.loads(resources.files("phaze.cost").joinpath("data", "tp_overlap_configs.json").read_text())
    return {name: _parse_config(name, c) for name, c in raw["configs"].items()}


def ub_config_names() -> tuple[str, ...]:
    """The named userbuffers configurations (``--tp-overlap-config``), the default first."""
    names = sorted(_configs())
    return (DEFAULT_TP_OVERLAP_CONFIG, *[n for n in names if n != DEFAULT_TP_OVERLAP_CONFIG])


def get_ub_config(name: str | UbConfig = DEFAULT_TP_OVERLAP_CONFIG) -> UbConfig:
    """The named userbuffers configuration; ConfigError (one line, the known names) for an unknown one."""
    if isinstance(name, UbConfig):
        return name
    hit = _configs().get(name)
    if hit is None:
        raise ConfigError(f"unknown TP-overlap configuration {name!r}; use one of {', '.join(ub_config_names())}")
    return hit


def overlap_method(collective_name: str, config: str | UbConfig = DEFAULT_TP_OVERLAP_CONFIG) -> str:
    """"pipeline", "bulk" or "ring_exchange": how Transformer Engine overlaps this TP collective under
    ``config`` (a collective outside TE's ten overlaps: "ring_exchange", as a GEMM in t chunks)."""
    ov = get_ub_config(config).of(collective_name)
    return ov.method if ov else "ring_exchange"


def comm_sm_slowdown(collective_names, sms: int, config: str | UbConfig = DEFAULT_TP_OVERLAP_CONFIG) -> float:
    """Factor on a GEMM's time while the named collectives' overlaps hold their SMs (``UbOverlap.charged_sms``
    under ``config``): sms / (sms - held)."""
    cfg = get_ub_config(config)
    busy = sum(ov.charged_sms for ov in (cfg.of(n) for n in collective_names) if ov is not None)
    return sms / max(1, sms - busy)
