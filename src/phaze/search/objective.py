"""What a co-search maximises, as a per-candidate weight on the throughput score, and the TDP filter.

score = mean over models of throughput / (TPUv4-like throughput x w), with w per candidate (chip, HBM size):
- ``throughput``: w = 1 (the paper's score);
- ``perf-per-area``: w = area / TPUv4-like area;
- ``perf-per-watt``: w = peak power / TPUv4-like peak power (``phaze.hardware.power``: the design power
  a TDP bounds);
- ``perf-per-dollar``: w = TCO at peak power / TPUv4-like TCO at peak power (``phaze.hardware.cost``: die,
  HBM at the candidate's size, package, energy over the service life at the chip's peak power).
Each w is a chip-only figure (it does not depend on the plan), so the bounds and pruning stay exact: a
throughput upper bound divided by w is an upper bound of the score. Only perf-per-dollar's w depends on the
HBM size (its price); ``phaze.search.exact`` carries that through.
``--tdp-w`` drops chips whose peak power exceeds it before the search (a filter on the space).

With a network axis (``phaze.hardware.chip_network``) a candidate's area, peak power and TCO include its network's
PHY area, PHY power and price, and ``search_candidates`` leaves out the networks another network of the axis makes
redundant (``undominated``: cost counts only under perf-per-dollar).
"""
from __future__ import annotations

import numpy as np

from phaze.errors import InfeasibleError
from phaze.units import GiB

OBJECTIVES = ("throughput", "perf-per-area", "perf-per-watt", "perf-per-dollar")


def chip_weights(objective: str, cands, reference, hbm_gib=(32,)) -> np.ndarray:
    """w of every candidate, [HBM size of ``hbm_gib``, chip] (see module docstring)."""
    from phaze.hardware.area import area_mm2
    from phaze.hardware.chip_network import phy_area_mm2

    n_hbm = len(hbm_gib)
    if objective == "perf-per-area":
        net = _reference_network(cands)
        w = np.asarray(cands.area_mm2, np.float64) / (float(area_mm2(reference)) + (
            float(phy_area_mm2(net)) if net is not None else 0.0))
    elif objective == "perf-per-watt":
        w = cands.peak_power_w() / reference_peak_power_w(reference, cands)
    elif objective == "perf-per-dollar":
        return np.stack([chip_tco_at_peak_usd(cands, g * GiB) for g in hbm_gib]) / reference_tco_at_peak_usd(
            reference, _reference_network(cands))
    else:
        w = np.ones(len(cands))
    return np.tile(w, (n_hbm, 1))


def chip_tco_at_peak_usd(cands, hbm_bytes: int) -> np.ndarray:
    """TCO (``phaze.hardware.cost``) of every candidate chip with ``hbm_bytes`` of HBM, energy at peak power."""
    from phaze.hardware.cost import tco_parts

    return np.asarray(tco_parts(cands.area_mm2, np.full(len(cands), float(hbm_bytes)), cands.peak_power_w(),
                                cands.network_usd())["total_usd"], np.float64)


def _reference_network(cands):
    from phaze.hardware.chip_network import TPUV4_ICI

    return TPUV4_ICI if cands.networks else None


def reference_peak_power_w(reference, cands=None) -> float:
    """The reference chip's peak power, with its network's PHY when the candidates have networks."""
    from phaze.hardware.chip_network import network_power_w
    from phaze.hardware.power import peak_power_w

    net = _reference_network(cands) if cands is not None else None
    return float(peak_power_w(reference)) + (float(network_power_w(net)) if net is not None else 0.0)


def reference_tco_at_peak_usd(reference, network=None) -> float:
    from phaze.hardware.cost import chip_tco

    return float(chip_tco(reference, network=network)["total_usd"])


def search_candidates(space, tdp_w: float | None, objective: str = "throughput"):
    """The candidates a co-search numbers and ranks: the space's (chip, network) pairs with the networks no other
    network of the axis makes redundant (``phaze.hardware.chip_network.undominated``), then the power cap."""
    from phaze.hardware.chip_network import network_axis, undominated
    from phaze.hardware.space import enumerate_space

    nets = undominated(network_axis(space), objective == "perf-per-dollar") if space.has_network_axis else None
    return apply_tdp(enumerate_space(space, networks=nets), tdp_w)


def apply_tdp(cands, tdp_w: float | None):
    """The candidates whose peak power is at most ``tdp_w`` (all of them when None)."""
    if tdp_w is None:
        return cands
    peak = cands.peak_power_w()
    keep = np.flatnonzero(peak <= tdp_w)
    if len(keep) == 0:
        raise InfeasibleError(f"no chip of the space has a peak power <= --tdp-w {tdp_w:g} W (the lowest is "
                              f"{np.nanmin(peak):.1f} W); raise --tdp-w")
    return cands.select(keep)
