"""What a co-search maximises, as a per-chip weight on the throughput score, and the TDP filter.

score = mean over models of throughput / (TPUv4-like throughput x w), with w per chip:
- ``throughput``: w = 1 (the paper's score);
- ``perf-per-area``: w = area / TPUv4-like area;
- ``perf-per-watt``: w = peak power / TPUv4-like peak power (``phaze.hardware.power``: the design power
  a TDP bounds; a chip-only figure, so the bounds and pruning stay exact: a throughput upper bound
  divided by w is an upper bound of the score).
``--tdp-w`` drops chips whose peak power exceeds it before the search (a filter on the space).
"""
from __future__ import annotations

import numpy as np

from phaze.errors import InfeasibleError

OBJECTIVES = ("throughput", "perf-per-area", "perf-per-watt")


def chip_weights(objective: str, cands, reference) -> np.ndarray:
    """w of every candidate (see module docstring)."""
    from phaze.hardware.area import area_mm2
    from phaze.hardware.power import peak_power_w

    if objective == "perf-per-area":
        return np.asarray(cands.area_mm2, np.float64) / float(area_mm2(reference))
    if objective == "perf-per-watt":
        return np.asarray(peak_power_w(cands.arch), np.float64) / float(peak_power_w(reference))
    return np.ones(len(cands))


def apply_tdp(cands, tdp_w: float | None):
    """The candidates whose peak power is at most ``tdp_w`` (all of them when None)."""
    if tdp_w is None:
        return cands
    from phaze.hardware.power import peak_power_w
    from phaze.hardware.space import CandidateSet

    peak = np.asarray(peak_power_w(cands.arch), np.float64)
    keep = np.flatnonzero(peak <= tdp_w)
    if len(keep) == 0:
        raise InfeasibleError(f"no chip of the space has a peak power <= --tdp-w {tdp_w:g} W (the lowest is "
                              f"{np.nanmin(peak):.1f} W); raise --tdp-w")
    return CandidateSet(arch=cands.arch.select(keep), area_mm2=cands.area_mm2[keep], budget_mm2=cands.budget_mm2)
