"""On-chip bandwidth an op may use, for chips with the on-chip hierarchy (``Accelerator.has_hierarchy``).

Supply. The GLB delivers ``glb_banks * glb_bank_width_bytes * rate`` bytes per cycle, where a bank
takes one access per ``max(1 / freq_hz, cycle_time_s)`` (the bank's random cycle time from the CACTI
table, ``phaze.hardware.sram``): rate = min(1, 1 / (cycle_time_s * freq_hz)). The network caps what
reaches the cores: a bus carries one link (``noc_link_bytes``) per cycle in total, a crossbar one link per
bank port up to the number of core ports, a 2-D mesh with the banks on its edge at most one link per
edge router, ``4 * ceil(sqrt(P))`` for P core ports. Every core's own port carries one link per cycle.

Sharing (a safe bound, issue 10 item 3). Ops that run at the same time in a layer schedule share the GLB,
the network and HBM. We do not add a bandwidth resource to the scheduler; instead each core owns a fixed
slice of the supply, proportional to its peak demand (a tensor core ``(R + C) * e`` bytes per cycle: one
input row and one weight row; a vector core ``2 * lanes * e``: one operand in and one result out), and an
op on ``c`` cores of one kind gets the slices of those ``c`` cores. Ops running at once use disjoint
cores (the schedule's semantics), so the slices they use never sum above the supply: every schedule the
solver returns is feasible under the shared bandwidth. The bound is pessimistic when the other core kind
is idle (a weighted round-robin arbiter that does not hand idle slices on); it is exact when every core is
busy. The same slices divide HBM bandwidth.
"""
from __future__ import annotations

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.supply import bank_rate, core_ports, glb_supply_bytes_per_cycle, noc_cap_bytes_per_cycle  # noqa: F401

def core_demand_bytes_per_cycle(arch: ArchArrays) -> tuple[np.ndarray, np.ndarray]:
    """Peak demand of one tensor core and of one vector core (bytes per cycle; module docstring)."""
    e = np.asarray(arch.bytes_per_element, np.float64)
    tc = (np.asarray(arch.tc_rows, np.float64) + np.asarray(arch.tc_cols, np.float64)) * e
    vc = 2.0 * np.asarray(arch.vc_width, np.float64) * e
    return tc, vc


def _per_core(arch: ArchArrays) -> dict:
    """Per chip and core kind: the slice of the supply one core owns, and its GLB/HBM bytes per second."""
    def build(a: ArchArrays) -> dict:
        tc, vc = core_demand_bytes_per_cycle(a)
        total = np.asarray(a.num_tc, np.float64) * tc + np.asarray(a.num_vc, np.float64) * vc
        f = np.asarray(a.freq_hz, np.float64)
        supply = glb_supply_bytes_per_cycle(a) * f
        hbm = np.asarray(a.hbm_bandwidth_Bps, np.float64) * np.asarray(a.memory_efficiency, np.float64)
        link = np.asarray(a.noc_link_bytes, np.float64) * f
        out = {}
        for kind, d in (("tc", tc), ("vc", vc)):
            frac = d / total
            out[kind] = {"share": frac, "glb": np.minimum(supply * frac, link), "hbm": hbm * frac}
        return out

    return arch.memo("per_core_bandwidth", build)


def share(arch: ArchArrays, kind: str, cores) -> np.ndarray:
    """Fraction of the chip's GLB/HBM supply owned by ``cores`` cores of ``kind`` ("tc" or "vc")."""
    return np.asarray(cores, np.float64) * _per_core(arch)[kind]["share"]


def glb_bandwidth_Bps(arch: ArchArrays, kind: str, cores) -> np.ndarray:
    """GLB bytes per second an op on ``cores`` cores of ``kind`` gets: its slice of the supply, at most one
    network link per core."""
    return np.asarray(cores, np.float64) * _per_core(arch)[kind]["glb"]


def hbm_bandwidth_Bps(arch: ArchArrays, kind: str, cores) -> np.ndarray:
    """Achievable HBM bytes per second of an op on ``cores`` cores of ``kind`` (its slice)."""
    return np.asarray(cores, np.float64) * _per_core(arch)[kind]["hbm"]
