"""The architecture design space: ranges of the template's parameters, an area budget, and its vectorized
enumeration into a struct-of-arrays of candidate chips (phaze-paper.md, "Architecture space").

The paper's space (``PAPER_SPACE``, ``--space paper``): num_tc, num_vc in {1..4096}; tensor-core width (tc_cols) and depth
(tc_rows) in {2..256}; vector-core width = tensor-core width; GLB in {2..128} MiB; all powers of two
(75,712 raw points). A candidate is kept iff min_fraction * budget <= area <= budget, the lower bound
waived when num_tc == 1 or num_vc == 1 -> 29,360 candidates under the TPUv4-like budget (278.83 mm^2).
That is ``template="paper"`` (``--space paper``): the paper's chips, areas and cost model, reproducible.

The default space (``template="chip"``) adds the on-chip hierarchy (issue 10): two more axes, the number
of GLB banks and the width of a bank's port (bytes per cycle), and per chip the buffers and network of
``presets.chip_hierarchy``. Areas come from ``phaze.hardware.chip_area`` and the budget is the area of
the ``tpuv4-like`` preset (the paper's chip with the same hierarchy rule) under that model.

Input staging (issue 34 item 1d, ``input_staging``): a tensor core's input row (R x e bytes) narrower than a GLB
bank word wastes the rest of the word without a staging buffer (``phaze.cost.gemm_chip``); with one it costs
its bytes, and the buffer costs area, energy and leakage. Staging is only considered on the chips where it can
matter, R x e < bank width (elsewhere it is a no-op that only costs area): ``input_staging`` = (True,), the
default, buys it on exactly those chips (no extra candidates); (False, True) enumerates both on those chips
(the others once, without); (False,) never buys it. The rule looks at the full row: a GEMM with K < R
(attention scores) has narrower rows still, which staging would also help on chips whose full row is a word.

The default space also chooses each chip's off-chip network (issue 34 item 5, ``phaze.hardware.chip_network``):
the ``net_*`` axes (scale-up domain size, its per-chip bandwidth and topology, the scale-out bandwidth) are crossed
with the chips, a candidate being (chip, network); its area is the chip's plus the network's PHY, under the same
budget, which is the reference chip's with its own network (TPU v4's ICI). With no ``net_*`` values (the paper's
space, ``--space paper``) every chip is on the search's ``--cluster`` (the paper's flat 4 GiB/s).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np

from phaze.errors import ConfigError
from phaze.filefields import got
from phaze.limits import MAX_SPACE_POINTS, check
from phaze.hardware.accelerator import NOC_KINDS, Accelerator, ArchArrays
from phaze.hardware.area import AreaModel, area_mm2, read_mapping, default_area_model
from phaze.hardware.presets import (TPUV4_FREQ_HZ, TPUV4_HBM_BANDWIDTH_BPS, TPUV4_HBM_BYTES, TPUV4_LIKE,
                                    TPUV4, TPUV4_LIKE_PAPER, chip_hierarchy)
from phaze.units import MiB



def pow2_range(lo: int, hi: int) -> tuple[int, ...]:
    """Powers of two in [lo, hi]."""
    out, v = [], 1
    while v <= hi:
        if v >= lo:
            out.append(v)
        v *= 2
    return tuple(out)


_RANGE_FIELDS = ("num_tc", "num_vc", "tc_widths", "tc_depths", "glb_bytes")
_AXIS_LIMIT = {"num_tc": "num_tc", "num_vc": "num_vc", "tc_widths": "tc_cols", "tc_depths": "tc_rows",
               "glb_bytes": "glb_bytes", "glb_banks": "glb_banks", "glb_bank_widths": "glb_bank_width_bytes"}
# axis -> the phaze.limits.RANGES entry of its chip field
_CHIP_FIELDS = ("glb_banks", "glb_bank_widths")
_NET_FIELDS = ("net_scale_up_chips", "net_scale_up_Bps", "net_topologies", "net_scale_out_Bps")
TEMPLATES = ("chip", "paper")
DEFAULT_NETWORK_AXES = {"net_scale_up_chips": (4, 8, 64), "net_scale_up_Bps": (50e9, 100e9, 200e9),
                        "net_topologies": ("torus", "switch"), "net_scale_out_Bps": (12.5e9, 25e9, 50e9)}


@dataclass(frozen=True)
class DesignSpace:
    """Value lists of each template parameter and the area constraint. ``tc_widths`` are the tensor-core
    columns (also the vector-core lanes, as in the paper), ``tc_depths`` the rows. ``budget_mm2=None``
    means the area of the tpuv4-like preset under the area model used."""

    num_tc: tuple[int, ...] = pow2_range(1, 4096)
    num_vc: tuple[int, ...] = pow2_range(1, 4096)
    tc_widths: tuple[int, ...] = pow2_range(4, 256)
    tc_depths: tuple[int, ...] = pow2_range(4, 256)
    glb_bytes: tuple[int, ...] = tuple(m * MiB for m in pow2_range(2, 128))
    budget_mm2: float | None = None
    min_fraction: float = 0.3
    waive_min_for_single_core: bool = True
    template: str = "chip"
    glb_banks: tuple[int, ...] = (16, 64)
    glb_bank_widths: tuple[int, ...] = (64, 256)
    # the network axes (module docstring; all empty: no axis, every chip on the search's --cluster): a handful of
    # values, as issue 34 asks, around today's scale-up links (NVLink4: 450 GB/s, TPU v4 ICI: 270 GB/s per chip)
    # and scale-out NICs (100-400 Gb/s = 12.5-50 GB/s per chip); design choices of the space, not measurements.
    # None: DEFAULT_NETWORK_AXES for the chip template, none for the paper's
    net_scale_up_chips: tuple[int, ...] | None = None
    net_scale_up_Bps: tuple[float, ...] | None = None
    net_topologies: tuple[str, ...] | None = None
    net_scale_out_Bps: tuple[float, ...] | None = None
    # input staging (module docstring): the values a chip whose input row is narrower than a bank word may take;
    # None: (True,) for the chip template (bought where it matters), (False,) for the paper's (no GLB banks)
    input_staging: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        if self.template not in TEMPLATES:
            raise ConfigError(f"design space: 'template' must be one of {', '.join(TEMPLATES)}, got {self.template!r}")
        for f in _RANGE_FIELDS + _CHIP_FIELDS:
            vals = getattr(self, f)
            if isinstance(vals, (int, np.integer)):
                vals = (vals,)
            ok = isinstance(vals, (list, tuple, np.ndarray)) and all(
                isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in vals)
            if not ok or len(vals) == 0:
                raise ConfigError(f"design space: '{f}' must be a non-empty list of positive integers, got {getattr(self, f)!r}")
            vals = tuple(sorted({int(v) for v in vals}))
            for v in vals:
                check(_AXIS_LIMIT[f], v, f"design space: '{f}' value")
            object.__setattr__(self, f, vals)
        if self.budget_mm2 is not None:
            check("budget_mm2", self.budget_mm2, "budget_mm2 (--budget-mm2)")
        if self.raw_size > MAX_SPACE_POINTS:
            raise ConfigError(f"design space: {self.raw_size:,} chips (the product of the axes' value counts); at most "
                              f"{MAX_SPACE_POINTS:,} are enumerated at once (55x the default space); split the space")
        if not (isinstance(self.min_fraction, (int, float)) and 0.0 <= self.min_fraction <= 1.0):
            raise ConfigError(f"design space: 'min_fraction' must be in [0, 1], got {self.min_fraction!r}")
        self._check_staging()
        self._check_network_axes()

    def _check_staging(self) -> None:
        v = self.input_staging
        if v is None:
            v = (True,) if self.template == "chip" else (False,)
        if isinstance(v, (bool, np.bool_)):
            v = (v,)
        if not isinstance(v, (list, tuple)) or not v or not all(isinstance(x, (bool, np.bool_)) for x in v):
            raise ConfigError(f"design space: 'input_staging' must be a non-empty list of true/false, got {v!r}")
        v = tuple(sorted({bool(x) for x in v}))
        if self.template != "chip":  # no GLB banks to stage from (a chip space replaced to the paper's template)
            v = (False,)
        object.__setattr__(self, "input_staging", v)

    def _check_network_axes(self) -> None:
        from phaze.hardware.chip_network import network_axis

        vals = {f: tuple(getattr(self, f) if getattr(self, f) is not None else
                         (DEFAULT_NETWORK_AXES[f] if self.template == "chip" else ())) for f in _NET_FIELDS}
        for f, v in vals.items():
            object.__setattr__(self, f, tuple(dict.fromkeys(v)))
        if self.template != "chip" and vals == DEFAULT_NETWORK_AXES:  # a chip space replaced to the paper's template
            vals = {f: () for f in _NET_FIELDS}
            for f in _NET_FIELDS:
                object.__setattr__(self, f, ())
        given = [f for f in _NET_FIELDS if vals[f]]
        if given and len(given) != len(_NET_FIELDS):
            missing = ", ".join(f for f in _NET_FIELDS if not vals[f])
            raise ConfigError(f"design space: the network axes need all of {', '.join(_NET_FIELDS)} (or none, for "
                              f"the search's --cluster); missing: {missing}")
        if given and self.template != "chip":
            raise ConfigError("design space: the network axes need the chip template (the paper's template has no "
                              "area or power model for a PHY); drop the net_* fields or the paper template")
        network_axis(self)  # every value checked (ChipNetwork's one-line errors)

    def without_network(self) -> "DesignSpace":
        """The same chips with no network axis (every chip on the search's --cluster, or a caller's network)."""
        return replace(self, **{f: () for f in _NET_FIELDS})

    @property
    def has_network_axis(self) -> bool:
        return bool(self.net_scale_up_chips)

    @property
    def reference_network(self):
        """The reference chip's network when the space has a network axis (TPU v4's ICI), else None."""
        from phaze.hardware.chip_network import TPUV4_ICI

        return TPUV4_ICI if self.has_network_axis else None

    @property
    def reference(self):
        """The TPUv4-like chip of this template: the area budget and the score's reference."""
        return TPUV4_LIKE if self.template == "chip" else TPUV4_LIKE_PAPER

    @property
    def real_reference(self):
        """The second reference a search reports its winner against, the real TPU v4 (``tpuv4`` preset), in the
        template with the on-chip hierarchy; None for the paper's template (its comparison stays the paper's)."""
        return TPUV4 if self.template == "chip" else None

    def resolved_budget_mm2(self, area_model: AreaModel | None = None) -> float:
        if self.budget_mm2 is not None:
            return float(self.budget_mm2)
        return float(area_mm2(self.reference, area_model)) + self.reference_phy_mm2

    @property
    def reference_phy_mm2(self) -> float:
        """PHY area of the reference's network (TPU v4's ICI) with a network axis, else 0."""
        from phaze.hardware.chip_network import phy_area_mm2

        net = self.reference_network
        return float(phy_area_mm2(net)) if net is not None else 0.0

    @property
    def axes(self) -> tuple[str, ...]:
        return _RANGE_FIELDS + (_CHIP_FIELDS if self.template == "chip" else ())

    @property
    def raw_size(self) -> int:
        return int(np.prod([len(getattr(self, f)) for f in self.axes]))


@dataclass(frozen=True)
class CandidateSet:
    """The candidate chips of a space: ``arch`` (struct-of-arrays) and each chip's ``area_mm2``. With a network
    axis a candidate is a (chip, network) pair: ``networks`` the choices, ``network_index`` each candidate's,
    ``base`` the distinct chips and ``chip_index`` each candidate's row of it (``arch`` = base rows), ``area_mm2``
    the chip's plus its network's PHY. Without: ``networks`` empty, ``base`` = ``arch``. With an axis ``arch`` is
    built from ``base`` when first asked for (``rows``): the default space's 3.6 M pairs x 23 fields took 1.1 s
    and 0.6 GB to build, and a search asks for it only after the power cap has kept 558,084."""

    rows: ArchArrays | None
    area_mm2: np.ndarray
    budget_mm2: float
    networks: tuple = ()
    network_index: np.ndarray | None = None
    base: ArchArrays | None = None
    chip_index: np.ndarray | None = None

    @property
    def arch(self) -> ArchArrays:
        """Each candidate's chip, one row per candidate (struct-of-arrays)."""
        if self.rows is None:
            object.__setattr__(self, "rows", self.base.select(self.chip_index))
        return self.rows

    def __len__(self) -> int:
        return len(self.area_mm2)

    def row_of(self, i: int) -> tuple[ArchArrays, int]:
        """Where candidate ``i``'s chip is: (arrays, row), without building ``arch`` when it is not built."""
        if self.rows is None:
            return self.base, int(self.chip_index[i])
        return self.rows, int(i)

    def accelerator(self, i: int, name: str | None = None) -> Accelerator:
        """Candidate ``i``'s chip as a scalar Accelerator (named ``cand{i}`` unless ``name``): what
        ``arch.accelerator(i)`` gives, without building ``arch`` (1.7 s for the default space's 3.6 M pairs)."""
        arrays, row = self.row_of(i)
        return arrays.accelerator(row, name=name or f"cand{int(i)}")

    def network(self, i: int):
        """Candidate ``i``'s ChipNetwork (None without a network axis)."""
        return self.networks[int(self.network_index[i])] if self.networks else None

    def peak_power_w(self) -> np.ndarray:
        """Each candidate's peak power (W): the chip's (``phaze.hardware.power``) plus its network's PHY."""
        from phaze.hardware.chip_network import network_power_w
        from phaze.hardware.power import peak_power_w

        if not self.networks:
            return np.asarray(peak_power_w(self.arch), np.float64)
        base = self.base.memo("peak_power_w", lambda a: np.asarray(peak_power_w(a), np.float64))
        return base[self.chip_index] + np.asarray(network_power_w(list(self.networks)))[self.network_index]

    def network_usd(self) -> np.ndarray:
        """Each candidate's network cost (USD, ``phaze.hardware.chip_network.network_usd``; 0 without an axis)."""
        from phaze.hardware.chip_network import network_usd

        if not self.networks:
            return np.zeros(len(self))
        return np.asarray(network_usd(list(self.networks)))[self.network_index]

    def select(self, keep: np.ndarray) -> "CandidateSet":
        """Candidates ``keep`` (indices), renumbered in that order."""
        if not self.networks:
            return CandidateSet(self.arch.select(keep), self.area_mm2[keep], self.budget_mm2)
        return CandidateSet(None, self.area_mm2[keep], self.budget_mm2, self.networks, self.network_index[keep],
                            self.base, self.chip_index[keep])

    @property
    def num_tc_configs(self) -> int:
        """Distinct (num_tc, tc_rows, tc_cols, glb_bytes): the inputs a GEMM's cost depends on. The
        reference counts tensor-core configurations this way (4,186 in the default space)."""
        a = self.arch
        return len(np.unique(np.stack([a.num_tc, a.tc_rows, a.tc_cols, a.glb_bytes]), axis=1).T)

    @property
    def num_vc_configs(self) -> int:
        """Distinct (num_vc, vc_width, glb_bytes), as the reference counts them (697 by default)."""
        a = self.arch
        return len(np.unique(np.stack([a.num_vc, a.vc_width, a.glb_bytes]), axis=1).T)


# The last few candidate sets enumerated, by the value of their inputs: a search enumerates its space for the
# input checks, the candidates, the setting table and the report (0.4-2.6 s each for the default space), and the
# sets' derived arrays (areas, peak powers: ``ArchArrays.memo``) are then computed once. Their arrays are made
# read-only, so a caller cannot change what the next one gets.
_ENUMERATED: dict = {}
ENUMERATED_MAX = 4


def enumerate_space(space: DesignSpace | None = None, hbm_bytes: int = TPUV4_HBM_BYTES,
                    hbm_bandwidth_Bps: float = TPUV4_HBM_BANDWIDTH_BPS, freq_hz: float = TPUV4_FREQ_HZ, *,
                    bytes_per_element: int = 2, matrix_efficiency: float = 1.0, vector_efficiency: float = 1.0,
                    memory_efficiency: float = 1.0, op_overhead_s: float = 0.0,
                    area_model: AreaModel | None = None, networks=None) -> CandidateSet:
    """Every point of ``space`` within its area constraint, as one CandidateSet (meshgrid, no loops).
    HBM, clock and efficiencies are not part of the area and are the same for every candidate. ``networks``:
    the network choices crossed with the chips (default: the space's whole network axis). The same inputs give
    the same (read-only) set, enumerated once (``_ENUMERATED``)."""
    args = (space or DesignSpace(), hbm_bytes, hbm_bandwidth_Bps, freq_hz, bytes_per_element, matrix_efficiency,
            vector_efficiency, memory_efficiency, op_overhead_s, area_model,
            None if networks is None else tuple(networks))
    try:
        hit = _ENUMERATED.get(args)
    except TypeError:  # an input that cannot be hashed: no memo
        return _enumerate(*args)
    if hit is None:
        if len(_ENUMERATED) >= ENUMERATED_MAX:
            _ENUMERATED.pop(next(iter(_ENUMERATED)))
        hit = _ENUMERATED[args] = _read_only(_enumerate(*args))
    return hit


def _read_only(cands: CandidateSet) -> CandidateSet:
    for part in (cands.rows, cands.base):
        for f in fields(part) if part is not None else ():
            x = getattr(part, f.name)
            if isinstance(x, np.ndarray):
                x.flags.writeable = False
    for x in (cands.area_mm2, cands.network_index, cands.chip_index):
        if isinstance(x, np.ndarray):
            x.flags.writeable = False
    return cands


def _enumerate(space: DesignSpace, hbm_bytes, hbm_bandwidth_Bps, freq_hz, bytes_per_element, matrix_efficiency,
               vector_efficiency, memory_efficiency, op_overhead_s, area_model, networks) -> CandidateSet:
    model = area_model or default_area_model()
    if not (hbm_bytes > 0 and hbm_bandwidth_Bps > 0 and freq_hz > 0):
        raise ConfigError("enumerate_space: hbm_bytes, hbm_bandwidth_Bps and freq_hz must be positive")
    grids = np.meshgrid(*(np.asarray(getattr(space, f), dtype=np.int64) for f in space.axes), indexing="ij")
    num_tc, num_vc, width, depth, glb = (g.ravel() for g in grids[:5])
    n_all = len(num_tc)
    if space.template == "chip":
        banks, bank_w = grids[5].ravel(), grids[6].ravel()
        h = chip_hierarchy(num_tc, depth, width, num_vc, banks, bank_w, bytes_per_element)
        hier = {k: np.asarray(h[k], np.int64) for k in ("glb_banks", "glb_bank_width_bytes", "tc_operand_bytes",
                                                         "tc_acc_bytes", "noc_link_bytes")}
        hier["noc"] = np.where(h["noc"] == "crossbar", NOC_KINDS.index("crossbar"), NOC_KINDS.index("mesh"))
        # input staging only where the input row is narrower than a bank word (module docstring)
        narrow = depth * bytes_per_element < bank_w
        hier["input_staging"] = (narrow & (True in space.input_staging)).astype(np.int64)
        if len(space.input_staging) == 2:  # both: the narrow chips once more, without staging
            extra = np.flatnonzero(narrow)
            rows = np.concatenate([np.arange(n_all), extra])
            num_tc, num_vc, width, depth, glb = (v[rows] for v in (num_tc, num_vc, width, depth, glb))
            hier = {k: v[rows] for k, v in hier.items()}
            hier["input_staging"][n_all:] = 0
            n_all = len(rows)
    else:
        hier = {k: np.zeros(n_all, np.int64) for k in ("glb_banks", "glb_bank_width_bytes", "tc_operand_bytes",
                                                        "tc_acc_bytes", "noc_link_bytes", "noc", "input_staging")}
    base = {"num_tc": num_tc, "tc_rows": depth, "tc_cols": width, "num_vc": num_vc, "vc_width": width.copy(),
            "glb_bytes": glb, "hbm_bytes": np.full(n_all, hbm_bytes, np.int64),
            "hbm_bandwidth_Bps": np.full(n_all, hbm_bandwidth_Bps, np.float64),
            "freq_hz": np.full(n_all, freq_hz, np.float64),
            "bytes_per_element": np.full(n_all, bytes_per_element, np.int64),
            "matrix_efficiency": np.full(n_all, matrix_efficiency, np.float64),
            "vector_efficiency": np.full(n_all, vector_efficiency, np.float64),
            "memory_efficiency": np.full(n_all, memory_efficiency, np.float64),
            "op_overhead_s": np.full(n_all, op_overhead_s, np.float64),
            "fp8_matrix_factor": np.zeros(n_all), "attention_efficiency": np.ones(n_all)}  # template: no FP8, ideal
    every = ArchArrays(**base, **hier)
    if space.template == "chip":
        area = np.asarray(area_mm2(every, model), np.float64)
    else:
        area = 1e-6 * model.area_um2_of(num_tc, depth, width, num_vc, width, glb)
    budget = space.resolved_budget_mm2(model)
    if space.has_network_axis:
        return _with_networks(space, every, area, budget, num_tc, num_vc, networks)
    # Relative slack so the budget chip itself (area == budget up to float rounding) is always kept.
    keep = area <= budget * (1 + 1e-12)
    lower = area >= space.min_fraction * budget
    if space.waive_min_for_single_core:
        lower |= (num_tc == 1) | (num_vc == 1)
    keep &= lower
    return CandidateSet(rows=every.select(np.flatnonzero(keep)), area_mm2=area[keep], budget_mm2=budget)


def _with_networks(space: DesignSpace, every: ArchArrays, area, budget: float, num_tc, num_vc, networks):
    """(chip, network) candidates, chip-major, networks in the given order: the area window applies to the chip's
    area plus the network's PHY."""
    from phaze.hardware.chip_network import network_axis, phy_area_mm2

    nets = tuple(network_axis(space) if networks is None else networks)
    phy = np.asarray(phy_area_mm2(list(nets)), np.float64)
    fits = area + phy.min() <= budget * (1 + 1e-12)  # chips some network fits with
    chips = np.flatnonzero(fits)
    base = every.select(chips)
    total = area[chips][:, None] + phy[None, :]
    keep = total <= budget * (1 + 1e-12)
    lower = total >= space.min_fraction * budget
    if space.waive_min_for_single_core:
        lower |= ((num_tc[chips] == 1) | (num_vc[chips] == 1))[:, None]
    keep &= lower
    ci, ni = np.nonzero(keep)  # row-major: chip-major, then the networks' order
    return CandidateSet(rows=None, area_mm2=total[ci, ni], budget_mm2=budget, networks=nets,
                        network_index=ni.astype(np.int64), base=base, chip_index=ci.astype(np.int64))


PAPER_SPACE = DesignSpace(tc_widths=pow2_range(2, 256), tc_depths=pow2_range(2, 256), template="paper")

_ALIASES = {"tc_width": "tc_widths", "tc_depth": "tc_depths", "width": "tc_widths", "depth": "tc_depths"}


def space_from_dict(d: dict, source: str = "design space") -> DesignSpace:
    """A DesignSpace from a mapping. A range is a list of integers or {min: a, max: b} (powers of two in
    [a, b]); ``glb_mib`` may replace ``glb_bytes``. Unknown keys are errors."""
    known = {f.name for f in fields(DesignSpace)}
    kw = {}
    for key, val in d.items():
        name = _ALIASES.get(key, key)
        scale = 1
        if name == "glb_mib":
            name, scale = "glb_bytes", MiB
        if name not in known:
            raise ConfigError(f"{source}: unknown field {key!r}; known: {', '.join(sorted(known | {'glb_mib'}))}")
        if name in _RANGE_FIELDS + _CHIP_FIELDS:
            if isinstance(val, dict):
                try:
                    val = pow2_range(int(val["min"]), int(val["max"]))
                except (KeyError, TypeError, ValueError):
                    raise ConfigError(f"{source}: field {key!r} as a mapping needs integer 'min' and 'max'") from None
            elif not isinstance(val, (list, tuple, int)):
                raise ConfigError(f"{source}: field {key!r} must be a list of integers or {{min, max}}")
            vals = val if isinstance(val, (list, tuple)) else [val]
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
                bad = next(v for v in vals if not (isinstance(v, int) and not isinstance(v, bool)))
                raise ConfigError(f"{source}: {key}: expected a list of integers, got {got(bad)} in {val!r}")
            val = tuple(v * scale for v in vals)
        elif name in _NET_FIELDS:
            val = tuple(val) if isinstance(val, (list, tuple)) else (val,)
        elif name == "input_staging":
            vals = val if isinstance(val, (list, tuple)) else [val]
            if not vals or not all(isinstance(v, bool) for v in vals):
                bad = next((v for v in vals if not isinstance(v, bool)), val)
                raise ConfigError(f"{source}: input_staging: expected true, false or a list of them, got {got(bad)}")
            val = tuple(vals)
        elif name == "template" and val not in TEMPLATES:
            raise ConfigError(f"{source}: template: expected one of {', '.join(TEMPLATES)}, got {got(val)}")
        elif name in ("budget_mm2", "min_fraction") and not (isinstance(val, (int, float)) and not isinstance(val, bool)):
            raise ConfigError(f"{source}: {key}: expected a number, got {got(val)}")
        kw[name] = val
    if True in kw.get("input_staging", ()) and kw.get("template", "chip") != "chip":
        raise ConfigError(f"{source}: input_staging: true needs the chip template (the paper's template has no GLB "
                          f"banks to stage from); use false or drop the field")
    try:
        return DesignSpace(**kw)
    except ConfigError as err:
        raise ConfigError(f"{source}: {err}") from None


def stored_design_space(d: dict) -> DesignSpace:
    """The DesignSpace of a stored search's ``space`` mapping (``SearchSpec.fingerprint()``); a store from before
    the network axis has no ``net_*`` fields: its chips were on the search's cluster (no axis)."""
    known = {f.name for f in fields(DesignSpace)}
    kw = {k: v for k, v in d.items() if k in known}
    for f in _NET_FIELDS:
        kw.setdefault(f, ())
    kw.setdefault("input_staging", (False,))  # a store from before staging (issue 34 item 1d) had none
    if isinstance(kw["input_staging"], list):
        kw["input_staging"] = tuple(kw["input_staging"])
    return DesignSpace(**kw)


def load_space(path: str | Path) -> DesignSpace:
    """A DesignSpace from a YAML or JSON file (see :func:`space_from_dict`); errors are one-line ConfigErrors."""
    p = Path(path)
    return space_from_dict(read_mapping(p, "space file"), source=str(p))


def resolve_space(space: DesignSpace | str | Path | None = "default", budget_mm2: float | None = None) -> DesignSpace:
    """A DesignSpace from an object, ``"default"``/None, ``"paper"`` (the paper's 29,360-chip space, its
    template and areas), or a YAML/JSON path; ``budget_mm2`` overrides."""
    if space is None or (isinstance(space, str) and space == "default"):
        out = DesignSpace()
    elif isinstance(space, str) and space == "paper":
        out = PAPER_SPACE
    elif isinstance(space, DesignSpace):
        out = space
    else:
        out = load_space(space)
    if budget_mm2 is not None:
        out = replace(out, budget_mm2=budget_mm2)
    return out


def space_summary(space: DesignSpace | str | Path | None = "default", budget_mm2: float | None = None) -> dict:
    """Size of a space under its budget: plain numbers for tables and JSON (used by ``phaze arch``)."""
    ds = resolve_space(space, budget_mm2)
    cands = enumerate_space(ds)
    return {
        "space": str(space) if space is not None else "default",
        "raw_points": ds.raw_size,
        "candidates": len(cands),
        "tc_configs": cands.num_tc_configs,
        "vc_configs": cands.num_vc_configs,
        "budget_mm2": cands.budget_mm2,
        "min_fraction": ds.min_fraction,
        "min_area_mm2": float(cands.area_mm2.min()) if len(cands) else None,
        "max_area_mm2": float(cands.area_mm2.max()) if len(cands) else None,
        "lower_bound_mm2": ds.min_fraction * cands.budget_mm2,
        "lower_bound_waived_for_single_core": ds.waive_min_for_single_core,
        "template": ds.template,
        "axes": {"num_tc": list(ds.num_tc), "tc_rows (depth)": list(ds.tc_depths),
                 "tc_cols = vc_width (width)": list(ds.tc_widths), "num_vc": list(ds.num_vc),
                 "glb_mib": [g // MiB for g in ds.glb_bytes],
                 **({"glb_banks": list(ds.glb_banks), "glb_bank_width_bytes": list(ds.glb_bank_widths),
                     "input_staging (where a row is narrower than a bank word)": list(ds.input_staging)}
                    if ds.template == "chip" else {})},
    }
