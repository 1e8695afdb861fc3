"""What a chip costs over its service life (its TCO), in US dollars, vectorized over many chips.

tco_usd = die_usd + hbm_usd + package_usd + network_usd + energy_usd, with

- die_usd = WAFER_PRICE_USD / (dies_per_wafer(area) x murphy_yield(area)): a 300 mm wafer's price shared by its
  good dies. dies_per_wafer = floor(pi d^2 / (4 A) - pi d / sqrt(2 A)) (gross dies of a round wafer less the
  partial dies on its edge: de Vries, "Investigation of gross die per wafer formulas", IEEE Trans. Semicond.
  Manuf. 18(1), 2005; no scribe lines or edge exclusion); murphy_yield = ((1 - e^(-A D0)) / (A D0))^2 (Murphy,
  "Cost-size optima of monolithic integrated circuits", Proc. IEEE 52(12), 1964), A in cm^2, D0 the defect
  density below;
- hbm_usd = HBM GB (10^9 bytes) x HBM_USD_PER_GB;
- package_usd = PACKAGE_USD + ASSEMBLY_TEST_USD, flat per chip (a 2.5D package carrying HBM);
- network_usd: the switch ports, optics and cables of the chip's own network when it has one (a search over a
  space with a network axis, issue 34 item 5: ``phaze.hardware.chip_network.network_usd``, per GB/s, cited
  there); 0 for a chip on the search's shared ``--cluster`` (the paper's space: the same network for every chip,
  not priced). The network's PHY is in the die's area, so in die_usd; its power in the power given;
- energy_usd = power_w x SERVICE_LIFE_YEARS x HOURS_PER_YEAR / 1000 x ELECTRICITY_USD_PER_KWH x PUE.

The power is the caller's: the average power of a plan for the reported TCO, the peak (design) power for the
chip-only figure ``--objective perf-per-dollar`` divides by (average power depends on the plan, peak power only
on the chip, so the search's bounds stay exact; peak >= average, so it is the chip's TCO at worst).

The process is the area model's, 22 nm (``phaze.hardware.chip_area``: CACTI 7 and the paper's 22 nm MAC and
lane areas); prices are today's published figures, not 22 nm's at its launch.
"""
from __future__ import annotations

import math

import numpy as np

# Foundry sale price of one processed 300 mm wafer at the 20 nm node, the nearest node CSET lists to the area
# model's 22 nm (28 nm: $2,891): Khan and Mann, "AI Chips: What They Are and Why They Matter", Center for
# Security and Emerging Technology, April 2020, Appendix (foundry sale price per wafer by node).
WAFER_PRICE_USD = 3677.0
WAFER_DIAMETER_MM = 300.0
# Defect density of a mature process: TSMC's N7 reached 0.09 defects per cm^2 three quarters after volume
# production (VLSI Symposium 2019) and its D0 levels off "to comparable levels as the prior nodes" (TSMC 2020
# Technology Symposium; AnandTech, "'Better Yield on 5nm than 7nm': TSMC Update on Defect Rates for N5",
# I. Cutress, 2020-08-25). A mature node's figure, used for 22 nm.
DEFECT_DENSITY_PER_CM2 = 0.09
# HBM price: $1,400 for the H100 SXM5's 80 GB of HBM3 in Silicon Analysts' manufacturing-cost model (Cost
# Bridge, siliconanalysts.com/tools/cost-bridge, February 2026: logic die $300, HBM $1.4K, packaging $750, test
# and assembly $920, total $3.3K, in line with Raymond James' $3,320 estimate of 2023) = $17.50 per GB.
HBM_USD_PER_GB = 1400.0 / 80.0
# Package and assembly, the same source and chip: CoWoS-S packaging $750 and test and assembly $920, taken flat
# per chip (the H100's interposer carries an 814 mm^2 die and six HBM sites: more than our chips need).
PACKAGE_USD = 750.0
ASSEMBLY_TEST_USD = 920.0
# Energy: US industrial electricity, 8.06 cents per kWh, 2023 average (U.S. Energy Information Administration,
# Electric Power Annual / Electric Power Monthly, average retail price to the industrial sector).
ELECTRICITY_USD_PER_KWH = 0.0806
# Power usage effectiveness (facility power / IT power): the industry average, 1.58 in 2023 (Uptime Institute,
# Global Data Center Survey 2023).
PUE = 1.58
# Service life: Alphabet depreciates its servers over six years since January 2023 (Alphabet Inc., Form 10-K
# for 2022: "a change in the estimated useful life of our servers ... to six years").
SERVICE_LIFE_YEARS = 6.0
HOURS_PER_YEAR = 365.25 * 24.0

TCO_PARTS = ("die_usd", "hbm_usd", "package_usd", "network_usd", "energy_usd")


def dies_per_wafer(area_mm2, diameter_mm: float = WAFER_DIAMETER_MM):
    """Whole dies of ``area_mm2`` on a round wafer (module docstring); 0 when none fits."""
    a = np.asarray(area_mm2, np.float64)
    gross = math.pi * diameter_mm ** 2 / (4.0 * a) - math.pi * diameter_mm / np.sqrt(2.0 * a)
    return np.maximum(np.floor(gross), 0.0)


def murphy_yield(area_mm2, defect_density_per_cm2: float = DEFECT_DENSITY_PER_CM2):
    """Murphy's yield of a die of ``area_mm2`` (module docstring); 1 for a die of no area or no defects."""
    ad = np.asarray(area_mm2, np.float64) / 100.0 * defect_density_per_cm2
    safe = np.where(ad > 0, ad, 1.0)
    return np.where(ad > 0, ((1.0 - np.exp(-safe)) / safe) ** 2, 1.0)


def die_cost_usd(area_mm2):
    """The wafer's price over its good dies (inf when no die fits on the wafer)."""
    good = dies_per_wafer(area_mm2) * murphy_yield(area_mm2)
    with np.errstate(divide="ignore"):
        return np.where(good > 0, WAFER_PRICE_USD / np.where(good > 0, good, 1.0), np.inf)


def energy_usd(power_w):
    """Electricity for ``power_w`` over the service life, the facility's overhead (PUE) included."""
    kwh = np.asarray(power_w, np.float64) / 1000.0 * SERVICE_LIFE_YEARS * HOURS_PER_YEAR
    return kwh * ELECTRICITY_USD_PER_KWH * PUE


def tco_parts(area_mm2, hbm_bytes, power_w, network_usd=0.0) -> dict:
    """Each part of TCO_PARTS and their sum ``total_usd`` (arrays, or floats for scalar inputs); ``network_usd``
    the network's price (module docstring; 0: on a shared cluster)."""
    area = np.asarray(area_mm2, np.float64)
    parts = {"die_usd": die_cost_usd(area),
             "hbm_usd": np.asarray(hbm_bytes, np.float64) / 1e9 * HBM_USD_PER_GB,
             "package_usd": np.full(area.shape, PACKAGE_USD + ASSEMBLY_TEST_USD),
             "network_usd": np.broadcast_to(np.asarray(network_usd, np.float64), area.shape).copy(),
             "energy_usd": energy_usd(power_w)}
    parts["total_usd"] = sum(parts[k] for k in TCO_PARTS)
    if area.ndim == 0:
        return {k: float(v) for k, v in parts.items()}
    return parts


def chip_tco(acc, power_w: float | None = None, network=None) -> dict:
    """One Accelerator's TCO parts (floats), its energy at ``power_w`` (default: its peak power, with its
    network's PHY power), with the area (with the network's PHY), power and what the power is. ``network``: the
    chip's ChipNetwork (``phaze.hardware.chip_network``), None on a shared cluster (not priced)."""
    from phaze.hardware.area import area_mm2
    from phaze.hardware.chip_network import network_power_w, network_usd, phy_area_mm2
    from phaze.hardware.power import peak_power_w

    basis = "average power of its best plan" if power_w is not None else "peak power"
    if power_w is None:
        p = float(peak_power_w(acc)) + (float(network_power_w(network)) if network is not None else 0.0)
    else:
        p = float(power_w)
    area = float(area_mm2(acc)) + (float(phy_area_mm2(network)) if network is not None else 0.0)
    out = tco_parts(area, acc.hbm_bytes, p, network_usd(network) if network is not None else 0.0)
    nb = (f"{network.name}: switch ports, optics and cables per GB/s (phaze.hardware.chip_network)"
          if network is not None else "flat: the cluster's network is the same for every chip (no per-chip "
                                      "network figure), not priced")
    return {**out, "area_mm2": area, "hbm_bytes": int(acc.hbm_bytes), "power_w": p,
            "power_basis": basis, "network_basis": nb}
