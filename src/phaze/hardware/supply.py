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




def _macro_row_rate(arch: ArchArrays, role: str, row_bytes: np.ndarray, nominal_bytes: np.ndarray,
                    key: str) -> np.ndarray:
    """Rows per clock cycle a core buffer's macro (``chip_area.sram_parts`` role) sustains on each of its two
    ports: a row of ``row_bytes`` is ceil(row / port width) accesses, and the macro, clocked by the core,
    takes whole clock cycles per access, ceil(CACTI cycle time x clock) (a multicycle access):
    1 / (accesses x ceil(cycle time x clock)). ZigZag's ports likewise move a row in whole port cycles.
    1 on the paper's template (no hierarchy: not modelled), and 1 where the buffer's own capacity
    (``nominal_bytes``) is below the smallest macro the table builds for its port (32 words deep, at least
    1 KiB; ``chip_area`` charges that macro's area, an overestimate): such a buffer is a register file,
    which is clocked with the core (a vector core's 16 B per lane always is)."""
    def compute(a: ArchArrays) -> np.ndarray:
        from phaze.hardware.chip_area import SRAM_MIN_BYTES, SRAM_MIN_WORDS, macro_port_width, sram_parts

        out = np.ones(len(a))
        least = np.maximum(SRAM_MIN_BYTES, SRAM_MIN_WORDS * macro_port_width(row_bytes))
        idx = np.flatnonzero((np.asarray(a.glb_banks) > 0) & (np.asarray(nominal_bytes) >= least))
        if len(idx):
            h = a if len(idx) == len(a) else a.select(idx)
            rb = np.asarray(row_bytes, np.int64)[idx]
            accesses = np.ceil(np.asarray(rb, np.float64) / macro_port_width(rb))
            cycle = np.asarray(sram_parts(h)[role].cycle_time_s, np.float64)
            clocks = np.maximum(1.0, np.ceil(cycle * np.asarray(h.freq_hz, np.float64) - 1e-9))
            out[idx] = 1.0 / (accesses * clocks)
        return out

    return arch.memo(key, compute)


def acc_row_rate(arch: ArchArrays) -> np.ndarray:
    """fp32 accumulator rows (C x 4 B) per clock a tensor core's accumulator macro sustains on each port
    (one port reads the row a streamed input row adds to, the other writes it back): a 32x256 array's
    256 KiB macro with 512 B ports (a 1 KiB row is two accesses of CACTI's 0.77 ns, one 1 GHz cycle each)
    sustains 0.5 rows per cycle (issue 34 item 1a; 0.65 if the macro ran on its own 0.77 ns clock)."""
    from phaze.hardware.chip_area import ACC_BYTES

    return _macro_row_rate(arch, "acc", np.asarray(arch.tc_cols, np.int64) * ACC_BYTES,
                           np.asarray(arch.tc_acc_bytes, np.int64), "acc_row_rate")


def vc_row_rate(arch: ArchArrays) -> np.ndarray:
    """Rows of one element per lane (lanes x bytes per element) per clock a vector core's buffer macro
    sustains on each port (one port reads an operand row, the other writes a result row). The template's
    buffer, 16 B per lane (``chip_area``), is 8 rows deep at 2 B per element: a register file under the
    table's smallest macro (32 words), so this is 1 on every chip of the template; it binds for a chip file
    or a template whose vector buffer is a real macro."""
    from phaze.hardware.chip_area import VC_BYTES_PER_LANE

    # each lane owns its 16 B (a vector unit's register file is per lane: TPU v4's 128 lanes x 8 sublanes each
    # have their own registers, Jouppi et al., ISCA 2023), so a row is one element per lane's own buffer, not
    # one wide macro's row: a 2,048-lane core is not read through one 512 B port
    lanes = np.ones_like(np.asarray(arch.vc_width, np.int64))
    return _macro_row_rate(arch, "vc", lanes * np.asarray(arch.bytes_per_element, np.int64),
                           VC_BYTES_PER_LANE * lanes, "vc_row_rate")
