"""One chip in the Phaze template, and the same template as numpy struct-of-arrays for many chips.

Template (phaze-paper.md): ``num_tc`` tensor cores, each a ``tc_rows x tc_cols`` systolic MAC array;
``num_vc`` vector cores of ``vc_width`` lanes; one global buffer (GLB) of ``glb_bytes`` shared by all
cores; off-chip HBM of ``hbm_bytes`` at ``hbm_bandwidth_Bps``. A MAC counts as 2 FLOPs; a vector lane
does one operation per cycle.

Achievable fractions of peak are named constants of the chip (``matrix_efficiency``,
``vector_efficiency``, ``memory_efficiency``) with their source at the preset that sets them; they are
the same for every workload. ``op_overhead_s`` is a fixed per-operator launch/synchronisation cost.

On-chip hierarchy (issue 10; all zero / ``"ideal"`` = the paper's template, costed as the paper does):
``glb_banks`` banks of the GLB, each with a port of ``glb_bank_width_bytes`` per cycle; per tensor core
an operand (weight) buffer of ``tc_operand_bytes`` and an fp32 accumulator of ``tc_acc_bytes``; an
on-chip network ``noc`` (``bus``, ``crossbar`` or ``mesh``) whose links carry ``noc_link_bytes`` per
cycle. A chip either has all of these (``has_hierarchy``) or none of them.

Input staging (issue 34 item 1d; a template choice, False by default): ``input_staging`` gives each tensor core
a small buffer at its array's input edge that takes one whole GLB bank word and feeds it to the array one
input row (min(K, R) elements) per cycle, so input rows narrower than a bank word are charged their bytes
of GLB bandwidth instead of a whole word each (``phaze.cost.gemm_chip``). It needs the hierarchy; its
area, energy and leakage are costed (``phaze.hardware.chip_area``, ``phaze.hardware.power``).
"""
from __future__ import annotations

from phaze.units import MiB

from dataclasses import dataclass, fields

import numpy as np

from phaze.errors import ConfigError

# On-chip network kinds; the index is the code ArchArrays stores ("ideal" = not modelled, the paper's).
NOC_KINDS = ("ideal", "bus", "crossbar", "mesh")
HIERARCHY_INT_FIELDS = ("glb_banks", "glb_bank_width_bytes", "tc_operand_bytes", "tc_acc_bytes", "noc_link_bytes")


@dataclass(frozen=True)
class Accelerator:
    name: str
    num_tc: int
    tc_rows: int
    tc_cols: int
    num_vc: int
    vc_width: int
    glb_bytes: int
    hbm_bytes: int
    hbm_bandwidth_Bps: float
    freq_hz: float
    bytes_per_element: int = 2
    matrix_efficiency: float = 1.0
    vector_efficiency: float = 1.0
    memory_efficiency: float = 1.0
    op_overhead_s: float = 0.0
    # FP8 tensor-core throughput as a multiple of the 16-bit one (0: the chip has no FP8 tensor cores)
    fp8_matrix_factor: float = 0.0
    # achieved fraction of the matrix peak inside a fused (flash) attention kernel
    attention_efficiency: float = 1.0
    glb_banks: int = 0
    glb_bank_width_bytes: int = 0
    tc_operand_bytes: int = 0
    tc_acc_bytes: int = 0
    noc: str = "ideal"
    noc_link_bytes: int = 0
    input_staging: bool = False

    def __post_init__(self) -> None:
        for f in ("num_tc", "tc_rows", "tc_cols", "num_vc", "vc_width", "glb_bytes", "hbm_bytes"):
            v = getattr(self, f)
            if not isinstance(v, (int, np.integer)) or v <= 0:
                raise ConfigError(f"accelerator {self.name!r}: '{f}' must be a positive integer, got {v!r}")
        for f in ("hbm_bandwidth_Bps", "freq_hz", "matrix_efficiency", "vector_efficiency", "memory_efficiency",
                  "attention_efficiency"):
            if not getattr(self, f) > 0:
                raise ConfigError(f"accelerator {self.name!r}: '{f}' must be positive")
        if not self.fp8_matrix_factor >= 0:
            raise ConfigError(f"accelerator {self.name!r}: 'fp8_matrix_factor' must be >= 0 (0: no FP8)")
        for f in HIERARCHY_INT_FIELDS:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ConfigError(f"accelerator {self.name!r}: '{f}' must be an integer >= 0, got {v!r}")
        if self.noc not in NOC_KINDS:
            raise ConfigError(f"accelerator {self.name!r}: 'noc' must be one of {', '.join(NOC_KINDS)}, got {self.noc!r}")
        on = [f for f in HIERARCHY_INT_FIELDS if getattr(self, f) > 0] + (["noc"] if self.noc != "ideal" else [])
        if on and len(on) != len(HIERARCHY_INT_FIELDS) + 1:
            missing = [f for f in HIERARCHY_INT_FIELDS + ("noc",) if f not in on]
            raise ConfigError(f"accelerator {self.name!r}: the on-chip hierarchy needs all of glb_banks, "
                              f"glb_bank_width_bytes, tc_operand_bytes, tc_acc_bytes, noc, noc_link_bytes; "
                              f"missing or zero: {', '.join(missing)} (or leave all out for the paper's template)")
        if not isinstance(self.input_staging, (bool, np.bool_)):
            raise ConfigError(f"accelerator {self.name!r}: 'input_staging' must be true or false, got {self.input_staging!r}")
        if self.input_staging and not on:
            raise ConfigError(f"accelerator {self.name!r}: 'input_staging' needs the on-chip hierarchy (glb_banks, "
                              f"glb_bank_width_bytes, ...); the paper's template has no GLB banks to stage")

    @property
    def has_hierarchy(self) -> bool:
        """True when the GLB banks, core buffers and network are modelled (else: the paper's template)."""
        return self.glb_banks > 0

    @property
    def glb_bandwidth_Bps(self) -> float:
        """Peak GLB bandwidth: banks x bank port width x clock (inf for the paper's template)."""
        if not self.has_hierarchy:
            return float("inf")
        return float(self.glb_banks * self.glb_bank_width_bytes * self.freq_hz)
    @property
    def peak_matrix_flops(self) -> float:
        """2 FLOPs per MAC per cycle over every tensor core."""
        return 2.0 * self.num_tc * self.tc_rows * self.tc_cols * self.freq_hz

    @property
    def peak_vector_flops(self) -> float:
        """One operation per lane per cycle over every vector core."""
        return float(self.num_vc * self.vc_width * self.freq_hz)

    def as_arrays(self) -> "ArchArrays":
        """This chip as a one-row ArchArrays, one object per distinct design and process (``_ONE_ROW``), so the
        per-chip figures ``ArchArrays.memo`` derives (its SRAM macros, bank rate, supply) are computed once per
        design, not once per layer problem. Its arrays are read-only."""
        key = tuple(getattr(self, f) for f in _ARRAY_FIELDS)
        out = _ONE_ROW.get(key)
        if out is None:
            if len(_ONE_ROW) >= ONE_ROW_MAX_ENTRIES:
                _ONE_ROW.clear()
            out = ArchArrays.from_accelerators([self])
            for f in _ARRAY_FIELDS:
                getattr(out, f).setflags(write=False)
            _ONE_ROW[key] = out
        return out


_ARRAY_FIELDS = tuple(f.name for f in fields(Accelerator) if f.name != "name")
# Accelerator.as_arrays's one-row ArchArrays by design (every field but the name); cleared at this many entries
_ONE_ROW: dict = {}
ONE_ROW_MAX_ENTRIES = 256


def _slice_per_chip(v, idx, n: int):
    """``v`` restricted to rows ``idx`` when it is made only of per-chip arrays (length ``n``): an array,
    a dict of them, or a dataclass of them; None otherwise (then it is not carried over)."""
    import dataclasses

    if isinstance(v, np.ndarray):
        return v[idx] if v.ndim == 1 and v.shape[0] == n else None
    if isinstance(v, dict):
        out = {k: _slice_per_chip(x, idx, n) for k, x in v.items()}
        return out if out and all(x is not None for x in out.values()) else None
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        vals = {f.name: _slice_per_chip(getattr(v, f.name), idx, n) for f in dataclasses.fields(v)}
        return dataclasses.replace(v, **vals) if all(x is not None for x in vals.values()) else None
    return None


@dataclass(frozen=True)
class ArchArrays:
    """Struct-of-arrays over N accelerators: every field of ``Accelerator`` (but name) as a 1-D array
    of length N. Cost functions take this and return arrays of length N."""

    num_tc: np.ndarray
    tc_rows: np.ndarray
    tc_cols: np.ndarray
    num_vc: np.ndarray
    vc_width: np.ndarray
    glb_bytes: np.ndarray
    hbm_bytes: np.ndarray
    hbm_bandwidth_Bps: np.ndarray
    freq_hz: np.ndarray
    bytes_per_element: np.ndarray
    matrix_efficiency: np.ndarray
    vector_efficiency: np.ndarray
    memory_efficiency: np.ndarray
    op_overhead_s: np.ndarray
    fp8_matrix_factor: np.ndarray
    attention_efficiency: np.ndarray
    glb_banks: np.ndarray
    glb_bank_width_bytes: np.ndarray
    tc_operand_bytes: np.ndarray
    tc_acc_bytes: np.ndarray
    noc: np.ndarray  # int code: index into NOC_KINDS
    noc_link_bytes: np.ndarray
    input_staging: np.ndarray  # int 0/1: the tensor cores have an input staging buffer (issue 34 item 1d)

    def __len__(self) -> int:
        return int(self.num_tc.shape[0])

    def memo(self, key: str, fn):
        """``fn(self)`` computed once per ArchArrays object (derived per-chip figures such as SRAM data
        that every op's cost needs); the arrays are never modified in place, so the value stays valid."""
        cache = self.__dict__.setdefault("_memo", {})
        if key not in cache:
            cache[key] = fn(self)
        return cache[key]

    @classmethod
    def from_accelerators(cls, accs: list[Accelerator]) -> "ArchArrays":
        cols = {}
        for f in _ARRAY_FIELDS:
            vals = [getattr(a, f) for a in accs]
            if f == "noc":
                vals = [NOC_KINDS.index(v) for v in vals]
            if f == "input_staging":
                vals = [int(bool(v)) for v in vals]
            dtype = np.float64 if isinstance(vals[0], float) else np.int64
            cols[f] = np.asarray(vals, dtype=dtype)
        return cls(**cols)

    def select(self, idx) -> "ArchArrays":
        """Rows ``idx`` (an index array or boolean mask) as a new ArchArrays; derived per-chip figures
        already computed (``memo``) are sliced along, not recomputed."""
        out = ArchArrays(**{f: getattr(self, f)[idx] for f in _ARRAY_FIELDS})
        memo = self.__dict__.get("_memo")
        if memo:
            n = len(self)
            kept = {}
            for k, v in memo.items():
                sv = _slice_per_chip(v, idx, n)
                if sv is not None:
                    kept[k] = sv
            out.__dict__["_memo"] = kept
        return out

    def accelerator(self, i: int, name: str | None = None) -> Accelerator:
        """Row ``i`` as a scalar Accelerator."""
        kw = {}
        for f in _ARRAY_FIELDS:
            v = getattr(self, f)[i]
            kw[f] = float(v) if np.issubdtype(type(v), np.floating) else int(v)
        kw["noc"] = NOC_KINDS[kw["noc"]]
        kw["input_staging"] = bool(kw["input_staging"])
        return Accelerator(name=name or f"cand{i}", **kw)


def chip_text(acc: Accelerator) -> str:
    """One line: cores, arrays, lanes, GLB (and, with the hierarchy, its banks, core buffers and network)."""
    glb = f"GLB {acc.glb_bytes // MiB} MiB"
    if acc.has_hierarchy:
        glb += (f" ({acc.glb_banks} x {acc.glb_bank_width_bytes} B/cycle), TC buffers {acc.tc_operand_bytes // 1024}"
                f"+{acc.tc_acc_bytes // 1024} KiB{', input staging' if acc.input_staging else ''}, {acc.noc} "
                f"{acc.noc_link_bytes} B")
    return f"{acc.num_tc}x TC {acc.tc_rows}x{acc.tc_cols}, {acc.num_vc}x VC {acc.vc_width}, {glb}"
