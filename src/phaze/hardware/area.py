"""Chip area (mm^2) of any chip, vectorized over many chips: the Phaze template's closed form
(``phaze.hardware.area_model``, phaze-paper.md "Area model") or, for a chip with the on-chip hierarchy, its
SRAM macros, network and control (``phaze.hardware.chip_area``). The area tables and their loading live in
``phaze.hardware.area_model`` and are re-exported here."""
from __future__ import annotations

import numpy as np

from phaze.hardware.accelerator import Accelerator, ArchArrays
from phaze.hardware.area_model import DEFAULT_TABLE, AreaModel, default_area_model, load_area_model, read_mapping
from phaze.hardware.chip_area import chip_area_mm2

__all__ = ["DEFAULT_TABLE", "AreaModel", "area_mm2", "default_area_model", "load_area_model", "read_mapping"]


def area_mm2(arch: ArchArrays | Accelerator, model: AreaModel | None = None):
    """Chip area (mm^2) of each chip in ``arch`` (array), or of one Accelerator (float). Chips with the on-chip
    hierarchy are costed by ``phaze.hardware.chip_area`` (CACTI SRAM macros, network), the paper's template by
    ``AreaModel.area_um2_of`` (the formula of ``phaze.hardware.area_model``'s docstring)."""
    m = model or default_area_model()
    one = isinstance(arch, Accelerator)
    a = arch.as_arrays() if one else arch
    out = 1e-6 * m.area_um2_of(a.num_tc, a.tc_rows, a.tc_cols, a.num_vc, a.vc_width, a.glb_bytes)
    hier = np.asarray(a.glb_banks) > 0
    if hier.any():
        idx = np.flatnonzero(hier)
        out = np.asarray(out, np.float64).copy()
        out[idx] = chip_area_mm2(a.select(idx), m)
    return float(out[0]) if one else out
