"""What the GLB and the on-chip network can deliver per cycle (a property of the chip; the costs that use it
are in ``phaze.cost.onchip``).

The GLB delivers ``glb_banks * glb_bank_width_bytes * rate`` bytes per cycle, a bank taking one access per
``max(1 / freq_hz, cycle_time_s)`` (the bank's random cycle time from the CACTI table): rate = min(1,
1 / (cycle_time_s * freq_hz)). The network caps what reaches the cores: a bus carries one link
(``noc_link_bytes``) per cycle in total, a crossbar one link per bank port up to the number of core ports,
a 2-D mesh with the banks on its edge at most one link per edge router, ``4 * ceil(sqrt(P))`` for P core
ports.
"""
from __future__ import annotations

import numpy as np

from phaze.hardware.accelerator import NOC_KINDS, ArchArrays

_BUS, _XBAR, _MESH = (NOC_KINDS.index(k) for k in ("bus", "crossbar", "mesh"))


def core_ports(arch: ArchArrays) -> np.ndarray:
    """Cores attached to the network: every tensor and vector core."""
    return np.asarray(arch.num_tc, np.int64) + np.asarray(arch.num_vc, np.int64)


def noc_cap_bytes_per_cycle(arch: ArchArrays) -> np.ndarray:
    """What the network can carry from the GLB banks to the cores per cycle (inf when not modelled)."""
    link = np.asarray(arch.noc_link_bytes, np.float64)
    banks = np.asarray(arch.glb_banks, np.float64)
    ports = core_ports(arch).astype(np.float64)
    edge = 4.0 * np.ceil(np.sqrt(ports))
    noc = np.asarray(arch.noc)
    return np.select([noc == _BUS, noc == _XBAR, noc == _MESH],
                     [link, np.minimum(banks, ports) * link, np.minimum(banks, edge) * link], default=np.inf)


def bank_rate(arch: ArchArrays) -> np.ndarray:
    """Accesses per clock cycle one GLB bank sustains: min(1, 1 / (CACTI cycle time x clock))."""
    def compute(a: ArchArrays) -> np.ndarray:
        from phaze.hardware.chip_area import sram_parts

        out = np.ones(len(a))  # the paper's template: no banks (its GLB term is not modelled)
        idx = np.flatnonzero(np.asarray(a.glb_banks) > 0)
        if len(idx):
            h = a if len(idx) == len(a) else a.select(idx)
            cycle = np.asarray(sram_parts(h)["glb"].cycle_time_s, np.float64)
            out[idx] = np.minimum(1.0, 1.0 / (cycle * np.asarray(h.freq_hz, np.float64)))
        return out

    return arch.memo("glb_bank_rate", compute)


def glb_supply_bytes_per_cycle(arch: ArchArrays) -> np.ndarray:
    """GLB bandwidth the cores can use together: min(banks x bank width x bank rate, network cap)."""
    glb = (np.asarray(arch.glb_banks, np.float64) * np.asarray(arch.glb_bank_width_bytes, np.float64)
           * bank_rate(arch))
    return np.minimum(glb, noc_cap_bytes_per_cycle(arch))


