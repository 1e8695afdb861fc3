"""Chip area of the Phaze template, closed form, vectorized over many chips (phaze-paper.md, "Area model").

    area_um2 = mac_um2  * num_tc * tc_rows * tc_cols            (16-bit MAC + its register file)
             + lane_um2 * num_vc * vc_width                     (vector lane + its register file)
             + num_tc * SRAM_core(max(1 KiB, 16 B * tc_rows * tc_cols))   (per-tensor-core buffer)
             + num_vc * SRAM_core(max(1 KiB, 16 B * vc_width))            (per-vector-core buffer)
             + SRAM_glb(glb_bytes)                                        (shared global buffer)

The coefficients and the two SRAM tables are data (``data/area_22nm.json`` by default); pass another
file to :func:`load_area_model` for another technology. SRAM sizes between table entries are linearly
interpolated in bytes, sizes outside the table are linearly extrapolated from the nearest segment (SRAM
area grows about linearly with capacity); table points are reproduced exactly. The area of any chip (this
template's, or a chip with the on-chip hierarchy: ``phaze.hardware.chip_area``) is
``phaze.hardware.area.area_mm2``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from phaze.errors import ConfigError
from phaze.fileio import read_data_file

DEFAULT_TABLE = "area_22nm.json"


def _interp(x: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Piecewise-linear in x through (xs, ys), extrapolated linearly past both ends, never negative."""
    x = np.asarray(x, dtype=np.float64)
    y = np.interp(x, xs, ys)
    if len(xs) >= 2:
        lo, hi = x < xs[0], x > xs[-1]
        if lo.any():
            y[lo] = ys[0] + (x[lo] - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0])
        if hi.any():
            y[hi] = ys[-1] + (x[hi] - xs[-1]) * (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    return np.maximum(y, 0.0)


@dataclass(frozen=True)
class AreaModel:
    """Area coefficients of one technology. Table sizes are in bytes, sorted ascending."""

    technology: str
    mac_um2: float
    lane_um2: float
    core_sram_min_bytes: int
    core_sram_bytes_per_mac: int
    core_sram_bytes_per_lane: int
    sram_core_bytes: tuple[float, ...]
    sram_core_um2: tuple[float, ...]
    sram_glb_bytes: tuple[float, ...]
    sram_glb_mm2: tuple[float, ...]

    @classmethod
    def from_dict(cls, d: dict, source: str = "area table") -> "AreaModel":
        try:
            core = sorted((float(k), float(v)) for k, v in d["sram_core_um2"].items())
            glb = sorted((float(k), float(v)) for k, v in d["sram_glb_mm2"].items())
            model = cls(
                technology=str(d.get("technology", source)),
                mac_um2=float(d["mac_um2"]),
                lane_um2=float(d["lane_um2"]),
                core_sram_min_bytes=int(d.get("core_sram_min_bytes", 1024)),
                core_sram_bytes_per_mac=int(d.get("core_sram_bytes_per_mac", 16)),
                core_sram_bytes_per_lane=int(d.get("core_sram_bytes_per_lane", 16)),
                sram_core_bytes=tuple(k for k, _ in core),
                sram_core_um2=tuple(v for _, v in core),
                sram_glb_bytes=tuple(k for k, _ in glb),
                sram_glb_mm2=tuple(v for _, v in glb),
            )
        except KeyError as e:
            raise ConfigError(f"{source}: missing field {e.args[0]!r} (need mac_um2, lane_um2, sram_core_um2, sram_glb_mm2)") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise ConfigError(f"{source}: malformed area table ({e}); sizes are bytes, areas numbers") from None
        if not model.sram_core_bytes or not model.sram_glb_bytes:
            raise ConfigError(f"{source}: sram_core_um2 and sram_glb_mm2 must each have at least one entry")
        if model.mac_um2 <= 0 or model.lane_um2 <= 0:
            raise ConfigError(f"{source}: mac_um2 and lane_um2 must be positive")
        return model

    def _sram_core_um2(self, nbytes) -> np.ndarray:
        return _interp(np.maximum(self.core_sram_min_bytes, nbytes),
                       np.asarray(self.sram_core_bytes), np.asarray(self.sram_core_um2))

    def _sram_glb_um2(self, nbytes) -> np.ndarray:
        return 1e6 * _interp(nbytes, np.asarray(self.sram_glb_bytes), np.asarray(self.sram_glb_mm2))

    def area_um2_of(self, num_tc, tc_rows, tc_cols, num_vc, vc_width, glb_bytes) -> np.ndarray:
        """Area (um^2) from raw parameter arrays (broadcastable); the formula of the module docstring."""
        num_tc, num_vc = np.asarray(num_tc, np.float64), np.asarray(num_vc, np.float64)
        macs = np.asarray(tc_rows, np.float64) * np.asarray(tc_cols, np.float64)
        lanes = np.asarray(vc_width, np.float64)
        return (self.mac_um2 * num_tc * macs
                + self.lane_um2 * num_vc * lanes
                + num_tc * self._sram_core_um2(self.core_sram_bytes_per_mac * macs)
                + num_vc * self._sram_core_um2(self.core_sram_bytes_per_lane * lanes)
                + self._sram_glb_um2(np.asarray(glb_bytes, np.float64)))


def read_mapping(path: Path, what: str = "file") -> dict:
    """A JSON or YAML file as a dict; any parse problem is a one-line ConfigError."""
    data = read_data_file(path, what)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON or YAML mapping at the top level")
    return data


def load_area_model(path: str | Path) -> AreaModel:
    """An AreaModel from a JSON/YAML file with the fields of ``data/area_22nm.json``."""
    p = Path(path)
    return AreaModel.from_dict(read_mapping(p, "area table"), source=str(p))


@lru_cache(maxsize=1)
def default_area_model() -> AreaModel:
    """The 22 nm tables of the Phaze reference (packaged as ``hardware/data/area_22nm.json``)."""
    text = resources.files("phaze.hardware").joinpath("data", DEFAULT_TABLE).read_text()
    return AreaModel.from_dict(json.loads(text), source=DEFAULT_TABLE)
