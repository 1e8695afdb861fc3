"""On-chip bandwidth an op may use, for chips with the on-chip hierarchy (``Accelerator.has_hierarchy``).

Supply. The GLB delivers ``glb_banks * glb_bank_width_bytes * rate`` bytes per cycle, where a bank
takes one access per ``max(1 / freq_hz, cycle_time_s)`` (the bank's random cycle time from the CACTI
table, ``phaze.hardware.sram``): rate = min(1, 1 / (cycle_time_s * freq_hz)). The network caps what
reaches the cores: a bus carries one link (``noc_link_bytes``) per cycle in total, a crossbar one link per
bank port up to the number of core ports, a 2-D mesh with the banks on its edge at most one link per
edge router, ``4 * ceil(sqrt(P))`` for P core ports. Every core's own port carries one link per cycle.

An op is costed with the whole supply (issue 34 item 1e): an op on ``c`` cores of either kind gets
``min(GLB supply, c links)`` of the GLB and all of the chip's achievable HBM bandwidth, what it would get
running alone. Ops that run at the same time share that supply: the layer schedule is re-timed so that
the bandwidth concurrent ops draw never sums above it (``phaze.schedule.bandwidth``). Until session 18 each
core owned a fixed slice of both, proportional to its peak demand, whatever the schedule ran: a TPU v4's
4,096 vector lanes held 80% of the GLB and HBM even while idle.

``bandwidth_cap`` costs an op at a lower bandwidth than that (the schedule builder asks what bandwidth an
op needs to keep its full-bandwidth latency).
"""
from __future__ import annotations

import numpy as np

from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.supply import bank_rate, core_ports, glb_supply_bytes_per_cycle, noc_cap_bytes_per_cycle  # noqa: F401

_CAP_KEY = "onchip_bandwidth_cap"  # memo key of an ArchArrays built by ``bandwidth_cap``


def supply_Bps(arch: ArchArrays) -> tuple[np.ndarray, np.ndarray]:
    """Per chip: the GLB bytes per second all cores can draw together, and the achievable HBM bytes per second."""
    def build(a: ArchArrays):
        f = np.asarray(a.freq_hz, np.float64)
        glb = glb_supply_bytes_per_cycle(a) * f
        hbm = np.asarray(a.hbm_bandwidth_Bps, np.float64) * np.asarray(a.memory_efficiency, np.float64)
        return {"glb": glb, "hbm": hbm}

    d = arch.memo("onchip_supply", build)
    return d["glb"], d["hbm"]


def _cap(arch: ArchArrays):
    return arch.__dict__.get("_memo", {}).get(_CAP_KEY)


def glb_bandwidth_Bps(arch: ArchArrays, kind: str, cores) -> np.ndarray:
    """GLB bytes per second an op on ``cores`` cores of ``kind`` ("tc" or "vc") gets: the whole supply, at
    most one network link per core (and at most ``bandwidth_cap``'s, when set)."""
    glb, _ = supply_Bps(arch)
    link = np.asarray(arch.noc_link_bytes, np.float64) * np.asarray(arch.freq_hz, np.float64)
    out = np.minimum(glb, np.asarray(cores, np.float64) * link)
    cap = _cap(arch)
    return out if cap is None else np.minimum(out, cap["glb"])


def hbm_bandwidth_Bps(arch: ArchArrays, kind: str, cores) -> np.ndarray:
    """Achievable HBM bytes per second of an op on ``cores`` cores of ``kind``: the chip's (at most
    ``bandwidth_cap``'s, when set)."""
    _, hbm = supply_Bps(arch)
    out = np.broadcast_to(hbm, np.broadcast(hbm, np.asarray(cores)).shape).astype(np.float64)
    cap = _cap(arch)
    return out if cap is None else np.minimum(out, cap["hbm"])


def bandwidth_cap(arch: ArchArrays, glb_Bps, hbm_Bps) -> ArchArrays:
    """A copy of ``arch`` on which every op gets at most ``glb_Bps`` of the GLB and ``hbm_Bps`` of HBM (scalars
    or per-chip arrays). What ``arch`` has derived is reused: none of it depends on the cap, which is applied
    last (``glb_bandwidth_Bps``, ``hbm_bandwidth_Bps``)."""
    import copy

    out = copy.copy(arch)
    memo = dict(arch.__dict__.get("_memo", {}))
    n = len(arch)
    memo[_CAP_KEY] = {"glb": np.broadcast_to(np.asarray(glb_Bps, np.float64), (n,)).copy(),
                      "hbm": np.broadcast_to(np.asarray(hbm_Bps, np.float64), (n,)).copy()}
    out.__dict__["_memo"] = memo
    return out
