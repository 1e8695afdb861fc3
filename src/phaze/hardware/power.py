"""Energy constants of the chip template at 22 nm and each chip's peak (design) power, vectorized.

Energy per operation (each with its source; the 22 nm scaling is ours and stated):
- MAC (bf16 multiply + fp32 accumulate): Horowitz, "Computing's energy problem", ISSCC 2014, 45 nm
  0.9 V: 16-bit FP multiply 1.1 pJ + 32-bit FP add 0.9 pJ = 2.0 pJ.
- vector lane operation (an fp32 add-class op): the same table, 32-bit FP add 0.9 pJ.
- scaling 45 nm -> 22 nm: dynamic energy C V^2 with C proportional to the feature size, 0.9 V -> 0.8 V:
  (22/45) * (0.8/0.9)^2 = 0.386 (our assumption, not a measured figure).
- SRAM accesses: the CACTI 7 table (``phaze.hardware.sram``), per access of the macro's port width.
- on-chip wires: 26 pJ to move 256 bits 1 mm at 40 nm (Keckler et al., "GPUs and the Future of Parallel
  Computing", IEEE Micro 31(5), 2011) = 0.10 pJ/bit/mm; wire capacitance per mm does not shrink with the
  node, so only the voltage term is scaled: (0.8/0.9)^2. A transfer crosses half the chip's side on a bus
  or crossbar, two thirds of it on a mesh (the mean Manhattan distance from an edge bank to a core).
- input staging buffer (chips with ``input_staging``, issue 34 item 1d): each input byte is written into it
  as part of a GLB bank word and read out as part of an input row, at CACTI's write + read energy per access
  of its bank-word-wide port, per byte (``chip_area``'s staging macro).
- HBM: 3.9 pJ/bit for HBM2 (O'Connor et al., "Fine-Grained DRAM", MICRO 2017), i.e. 31.2 pJ/byte.

Peak power (what ``--tdp-w`` constrains): every MAC and lane busy every cycle, each tensor core's
accumulator read and written once per cycle, each vector-core buffer read and written once per cycle,
each input staging buffer (where bought) passing one input row (R elements) per cycle,
the GLB delivering its full supply through the network, and HBM at its full bandwidth, plus the SRAMs'
leakage (CACTI's standby leakage of every macro). Logic leakage (MACs, lanes, routers) is not counted:
we found no per-MAC leakage figure to cite.
"""
from __future__ import annotations

import numpy as np

from phaze.hardware.accelerator import NOC_KINDS, Accelerator, ArchArrays

SCALE_45_TO_22 = (22.0 / 45.0) * (0.8 / 0.9) ** 2
MAC_J = (1.1e-12 + 0.9e-12) * SCALE_45_TO_22
LANE_OP_J = 0.9e-12 * SCALE_45_TO_22
WIRE_J_PER_BIT_MM = 26e-12 / 256 * (0.8 / 0.9) ** 2
HBM_J_PER_BYTE = 3.9e-12 * 8


def noc_distance_mm(arch: ArchArrays, area_mm2: np.ndarray) -> np.ndarray:
    """Mean distance a GLB word travels to a core (module docstring)."""
    side = np.sqrt(np.asarray(area_mm2, np.float64))
    return np.where(np.asarray(arch.noc) == NOC_KINDS.index("mesh"), 2.0 / 3.0 * side, 0.5 * side)


def energy_parts(arch: ArchArrays) -> dict:
    """Per-chip energies the op energy model needs: J per GLB byte read and written, per NoC byte, per
    accumulator row read and written (a row of C fp32 sums) and their sum (a read-modify-write), per
    operand-buffer row written and read (a row of C weights) and their sum, per vector-buffer byte.

    A row wider than its macro's port (at most ``SRAM_MAX_WIDTH`` bytes: a 256-column fp32 row is 1 KiB)
    takes ceil(row / port) accesses; until 2026-12-02 every row was charged one access, which gave the
    accumulators of arrays with more than 128 columns half their energy for free (found by the
    cross-check against ZigZag, ``phaze.validation.chip_energy``)."""
    from phaze.hardware.chip_area import ACC_BYTES, chip_area_mm2, macro_port_width, sram_parts, staging

    s = sram_parts(arch)
    f64 = lambda x: np.asarray(x, np.float64)  # noqa: E731
    cols, e = np.asarray(arch.tc_cols), np.asarray(arch.bytes_per_element)
    glb_w = f64(macro_port_width(arch.glb_bank_width_bytes))
    vc_w = f64(macro_port_width(np.asarray(arch.vc_width) * e))
    acc_words = np.ceil(f64(cols * ACC_BYTES) / f64(macro_port_width(cols * ACC_BYTES)))  # accesses per row
    op_words = np.ceil(f64(cols * e) / f64(macro_port_width(cols * e)))
    acc_r, acc_w = f64(s["acc"].read_energy_j) * acc_words, f64(s["acc"].write_energy_j) * acc_words
    op_r, op_w = f64(s["operand"].read_energy_j) * op_words, f64(s["operand"].write_energy_j) * op_words
    dist = noc_distance_mm(arch, chip_area_mm2(arch))
    return {
        "glb_read_J_per_B": f64(s["glb"].read_energy_j) / glb_w,
        "glb_write_J_per_B": f64(s["glb"].write_energy_j) / glb_w,
        "noc_J_per_B": 8.0 * WIRE_J_PER_BIT_MM * dist,
        "acc_row_read_J": acc_r, "acc_row_write_J": acc_w, "acc_rmw_J": acc_r + acc_w,
        "operand_row_read_J": op_r, "operand_row_write_J": op_w, "operand_J": op_r + op_w,
        "vc_J_per_B": (f64(s["vc"].read_energy_j) + f64(s["vc"].write_energy_j)) / vc_w / 2,
        "staging_J_per_B": staging(arch) * (f64(s["staging"].read_energy_j) + f64(s["staging"].write_energy_j)) / glb_w,
    }


def sram_leakage_w(arch: ArchArrays) -> np.ndarray:
    """Standby leakage (W) of every SRAM macro of each chip with the hierarchy (CACTI table)."""
    from phaze.hardware.chip_area import sram_parts, staging

    s = sram_parts(arch)
    lk = {k: np.asarray(v.leakage_w, np.float64) for k, v in s.items()}
    return (np.asarray(arch.num_tc, np.float64) * (lk["operand"] + lk["acc"] + staging(arch) * lk["staging"])
            + np.asarray(arch.num_vc, np.float64) * lk["vc"] + lk["glb"])


def peak_power_w(arch: ArchArrays | Accelerator):
    """Peak (design) power in W of each chip with the hierarchy (NaN for the paper's template, whose
    SRAMs and network are not described); a float for one Accelerator."""
    from phaze.hardware.supply import glb_supply_bytes_per_cycle

    one = isinstance(arch, Accelerator)
    a = arch.as_arrays() if one else arch
    out = np.full(len(a), np.nan)
    hier = np.asarray(a.glb_banks) > 0
    if hier.any():
        idx = np.flatnonzero(hier)
        h = a.select(idx)
        p = energy_parts(h)
        f = np.asarray(h.freq_hz, np.float64)
        macs = np.asarray(h.num_tc, np.float64) * np.asarray(h.tc_rows, np.float64) * np.asarray(h.tc_cols, np.float64)
        lanes = np.asarray(h.num_vc, np.float64) * np.asarray(h.vc_width, np.float64)
        e = np.asarray(h.bytes_per_element, np.float64)
        supply = glb_supply_bytes_per_cycle(h)
        per_cycle = (macs * MAC_J + lanes * LANE_OP_J + np.asarray(h.num_tc, np.float64) * p["acc_rmw_J"]
                     + lanes * e * 2 * p["vc_J_per_B"] + supply * (p["glb_read_J_per_B"] + p["noc_J_per_B"])
                     + np.asarray(h.num_tc, np.float64) * np.asarray(h.tc_rows, np.float64) * e * p["staging_J_per_B"])
        out[idx] = (per_cycle * f + np.asarray(h.hbm_bandwidth_Bps, np.float64) * HBM_J_PER_BYTE
                    + sram_leakage_w(h))
    return float(out[0]) if one else out
