"""Bounds on every size, count and time a user can give, on the command line or in a file: one table
(``RANGES``) used by the CLI, the API and the file readers, so a huge or non-finite value is refused at the
edge with one line naming the flag or field and the allowed range, instead of overflowing (or running for
ever) deep inside a stage. Usable by every stage (like ``errors``).

The upper bounds are far above anything trained or built today (each says why) and low enough that every
product phaze forms from them stays exact in float64 and inside int64.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from phaze.errors import ConfigError


@dataclass(frozen=True)
class Range:
    lo: float
    hi: float
    why: str  # the reason for the upper bound
    integer: bool = True
    lo_open: bool = False  # True: lo itself is not allowed (times, areas: > 0)

    def describe(self) -> str:
        fmt = (lambda v: f"{int(v):,}") if self.integer else (lambda v: f"{v:g}")
        if self.lo_open:
            return f"> {fmt(self.lo)} and at most {fmt(self.hi)}"
        return f"from {fmt(self.lo)} to {fmt(self.hi)}"


_K = 2**10
_M = 2**20
RANGES: dict[str, Range] = {
    # --- run and plan sizes (CLI flags and api arguments) ---
    "devices": Range(1, _M, "the largest training clusters reported are ~1e5 GPUs (Llama 3: 16,384 H100s, "
                            "Dubey et al. 2024); 2^20 leaves 10x headroom"),
    "global_batch": Range(1, 16 * _M, "2^24 sequences; published batches are at most a few thousand sequences "
                                      "(Llama 3: 16M tokens = 2,048 x 8k)"),
    "mbs": Range(1, 64 * _K, "a microbatch is at most the global batch; 2^16 sequences"),
    "seq": Range(1, 16 * _M, "2^24 tokens; the longest trained contexts are ~1e6-1e7 tokens"),
    "tp": Range(1, _K, "tensor parallelism beyond a few hundred devices has no published use"),
    "pp": Range(1, 64 * _K, "pipeline stages are at most the layers (2^16)"),
    "dp": Range(1, _M, "data-parallel replicas are at most the devices"),
    "cp": Range(1, _K, "context-parallel ranks split one sequence; at most the tensor-parallel bound"),
    "ep": Range(1, 64 * _K, "expert-parallel ranks split the experts; at most the experts (2^16)"),
    "etp": Range(1, _K, "expert tensor parallelism splits one expert's FFN; at most the tensor-parallel bound"),
    "interleave": Range(1, _K, "virtual stages per device are at most the layers per device"),
    "top": Range(1, 100_000, "rows to print"),
    "workers": Range(1, _K, "worker processes on one machine"),
    "seed": Range(0, 2**32 - 1, "the Gaussian process (scikit-learn) seeds numpy's RandomState, which takes 32 bits"),
    "samples": Range(1, 100_000, "chips a Spotlight-style search evaluates (Spotlight's own: 100)"),
    "time_limit": Range(0, 86_400.0, "one day per layer schedule", integer=False, lo_open=True),
    "hbm_gib": Range(1, 64 * _K, "2^16 GiB = 64 TiB per chip; the largest HBM today is 288 GB (AMD MI355X)"),
    "budget_mm2": Range(0, 70_686.0, "the area of a whole 300 mm wafer (pi x 150^2 mm^2); the largest chip "
                                     "built (Cerebras WSE-3) is 46,225 mm^2", integer=False, lo_open=True),
    # --- model fields (model files, Hugging Face configs, the zoo) ---
    "num_layers": Range(1, 64 * _K, "2^16 layers; the deepest published LLMs have a few hundred"),
    "hidden": Range(1, _M, "2^20; the widest published LLMs have hidden <= 2^15"),
    "heads": Range(1, 64 * _K, "2^16 attention heads"),
    "kv_heads": Range(1, 64 * _K, "at most the heads"),
    "ffn": Range(1, 4 * _M, "2^22; 4x the widest hidden"),
    "vocab": Range(1, 16 * _M, "2^24 tokens; the largest vocabularies are ~2.6e5 (Gemma)"),
    "seq_len": Range(1, 16 * _M, "as --seq"),
    "max_tp": Range(1, _K, "as --tp"),
    "vocab_pad_multiple": Range(1, 64 * _K, "Megatron pads to a multiple of 128"),
    "embed_proj_dim": Range(1, _M, "as hidden"),
    "head_dim_override": Range(1, 64 * _K, "2^16; published head dims are <= 256"),
    "sliding_window": Range(1, 16 * _M, "as seq_len"),
    "extra_positions": Range(0, 16 * _M, "as seq_len"),
    # --- chip fields (accelerator files) and design-space axes ---
    "num_tc": Range(1, _M, "2^20 cores per chip; the default space goes to 4,096"),
    "tc_rows": Range(1, 64 * _K, "2^16 rows; the default space goes to 256"),
    "tc_cols": Range(1, 64 * _K, "2^16 columns; the default space goes to 256"),
    "num_vc": Range(1, _M, "as num_tc"),
    "vc_width": Range(1, 64 * _K, "as tc_cols"),
    "glb_bytes": Range(1, 2**40, "1 TiB of on-chip memory; the largest chip has 44 GB (Cerebras WSE-3)"),
    "hbm_bytes": Range(1, 2**46, "as --hbm-gib (64 TiB)"),
    "hbm_bandwidth_Bps": Range(0, 1e15, "1 PB/s; HBM3e chips reach 8e12 B/s", integer=False, lo_open=True),
    "freq_hz": Range(0, 1e11, "100 GHz; chips run at a few GHz", integer=False, lo_open=True),
    "bytes_per_element": Range(1, 16, "16 bytes per element (fp128)"),
    "fp8_matrix_factor": Range(0, 16.0, "FP8 tensor cores run at 2x the fp16 rate; 0: none", integer=False),
    "attention_efficiency": Range(0, 1.0, "a fraction of peak", integer=False, lo_open=True),
    "glb_banks": Range(0, 64 * _K, "2^16 banks; 0: no on-chip hierarchy modelled"),
    "glb_bank_width_bytes": Range(0, 64 * _K, "2^16 bytes per bank port per cycle"),
    "tc_operand_bytes": Range(0, 2**40, "as glb_bytes"),
    "tc_acc_bytes": Range(0, 2**40, "as glb_bytes"),
    "noc_link_bytes": Range(0, 64 * _K, "2^16 bytes per link per cycle"),
    "link_bandwidth_Bps": Range(0, 1e15, "1 PB/s per device; NVLink 4 is 4.5e11 B/s", integer=False, lo_open=True),
    "link_latency_s": Range(0, 1.0, "one second per message", integer=False),
    "op_overhead_s": Range(0, 1.0, "one second per operator launch", integer=False),
    "matrix_efficiency": Range(0, 1.0, "a fraction of peak", integer=False, lo_open=True),
    "vector_efficiency": Range(0, 1.0, "a fraction of peak", integer=False, lo_open=True),
    "memory_efficiency": Range(0, 1.0, "a fraction of peak", integer=False, lo_open=True),
}

# Chips in a design space (the product of its axes' value counts): the default space has 75,712 before the
# area window; 2^22 = 4,194,304 is 55x that, about 0.3 GiB of candidate arrays (8 numbers x 8 bytes each).
MAX_SPACE_POINTS = 4 * _M


def check(name: str, value, label: str | None = None):
    """``value`` if it is a number within RANGES[name] (an integer where the range is integral), else one
    ConfigError naming ``label`` (default ``--name``), the value and the allowed range."""
    r = RANGES[name]
    label = label or f"--{name.replace('_', '-')}"
    kind = "an integer" if r.integer else "a number"
    text = str(value)
    shown = text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ConfigError(f"{label} must be {kind} {r.describe()}, got {shown}")
    if r.integer and not isinstance(value, numbers.Integral):
        raise ConfigError(f"{label} must be {kind} {r.describe()}, got {shown}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond float range
        v = math.inf
    if not (math.isfinite(v) and (v > r.lo if r.lo_open else v >= r.lo) and v <= r.hi):
        raise ConfigError(f"{label} must be {kind} {r.describe()} ({r.why}), got {shown}")
    return value


def check_all(label_prefix: str = "--", **values) -> None:
    """``check`` each keyword argument that is not None (labels ``--name``, or ``prefix + name``)."""
    for name, v in values.items():
        if v is None:
            continue
        label = f"{label_prefix}{name.replace('_', '-')}" if label_prefix == "--" else f"{label_prefix}{name}"
        for item in (v if isinstance(v, (tuple, list)) else (v,)):
            check(name, item, label)
