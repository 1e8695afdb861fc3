"""Area of a chip with the on-chip hierarchy (``Accelerator.has_hierarchy``), vectorized over chips.

    area = MACs + vector lanes                     (the paper's 22 nm per-MAC and per-lane areas, area_22nm.json)
         + num_tc * (operand buffer + accumulator) (SRAM macros, CACTI 7 at 22 nm: ``phaze.hardware.sram``)
         + num_vc * vector-core buffer             (SRAM, CACTI; the paper's 16 B per lane, at least 8 KiB)
         + num_tc * input staging buffer           (chips with ``input_staging`` only; SRAM, CACTI, below)
         + GLB                                     (SRAM of glb_banks banks x glb_bank_width_bytes, CACTI)
         + network                                 (routers / crosspoints, below)
         + per-core control                        (a fraction of each core's datapath, below)

SRAM macros (CACTI table, ``sram_macro(capacity, banks, width, ports)``):
- tensor-core operand buffer: 2 banks (the two halves of the weight double buffer), one port each, a
  weight row (C elements) wide;
- accumulator: 1 bank, 2 ports (read-modify-write of C fp32 partial sums per cycle), C x 4 B wide;
- vector-core buffer: 1 bank, 2 ports, one element per lane wide;
- GLB: ``glb_banks`` banks, 1 port each of ``glb_bank_width_bytes``;
- input staging buffer (issue 34 item 1d, chips with ``input_staging``): two GLB bank words (a double buffer:
  one word arrives from the GLB while the array drains the other row by row), 1 bank, 2 ports (a word in,
  rows out) a bank word wide. Two words are under the table's smallest bank (32 words), so it is charged
  that smallest macro, max(1 KiB, 32 words): the register-file convention below, an overestimate.
Widths and capacities are clamped into the table's range (ports 8..512 B; at least 1 KiB and at least 32
words of the port width per bank, the smallest bank CACTI builds): a smaller buffer is charged as that
smallest macro (it would be a register file; an overestimate we accept).

Network area. One published figure: the 5-port mesh router of Intel's 80-tile Teraflops chip, 0.34 mm^2
in 65 nm with 39-bit links (Hoskote et al., "A 5-GHz Mesh Interconnect for a Teraflops Processor",
IEEE Micro 27(5), 2007). Scaled to 22 nm by the square of the feature size, (22/65)^2, and expressed per
crosspoint-bit: 0.34 * (22/65)^2 / (5 * 5 * 39) mm^2. A router (or crossbar) of P inputs x Q outputs and
w-bit links costs P * Q * w of those: a mesh router has 5 x 5 (one per core), a crossbar
(cores + banks)... ports x banks, a bus one tap per core and bank. Linear scaling in link width and
quadratic in ports are our assumptions (the crosspoint count), not measured figures.

Per-core control (instruction sequencing, address generation, the core's DMA/loop state). One published
figure: the floor plan of the TPU v1 die (Jouppi et al., "In-Datacenter Performance Analysis of a Tensor
Processing Unit", ISCA 2017, Figure 2): data buffers 37% of the die, compute 30%, I/O 10%, control 2%. The
TPU v1 is one core, so its control sequences a datapath of 30% + 37% of the die: control = 2/67 (3.0%) of
the datapath it controls. Each core is charged that fraction of its own datapath (its MACs or lanes and
its buffers); the GLB's controllers are in CACTI's periphery and the network's area. A lower bound in two
ways, both stated in the README: the TPU's 37% includes its 24 MiB Unified Buffer (GLB-like), so the
fraction of a core's own datapath is larger; and a small core's sequencer does not shrink with its array.
A fixed per-core figure (2% of the < 331 mm^2 28 nm die, 4.1 mm^2 scaled to 22 nm) would be the control
of a 64K-MAC core with its host interface, too large for the small cores of the space: not used.
The SRAM macros' own periphery is in CACTI's area.
"""
from __future__ import annotations

import numpy as np

from phaze.hardware.accelerator import NOC_KINDS, ArchArrays
from phaze.hardware.area_model import AreaModel, default_area_model

# Hoskote et al. 2007 (module docstring): 0.34 mm^2, 65 nm, 5x5 ports, 39-bit links.
TERAFLOPS_ROUTER_MM2 = 0.34
TERAFLOPS_NODE_NM = 65.0
TERAFLOPS_PORTS = 5
TERAFLOPS_LINK_BITS = 39
NODE_NM = 22.0
CROSSPOINT_BIT_MM2 = (TERAFLOPS_ROUTER_MM2 * (NODE_NM / TERAFLOPS_NODE_NM) ** 2
                      / (TERAFLOPS_PORTS * TERAFLOPS_PORTS * TERAFLOPS_LINK_BITS))
# CACTI table range used by the SRAM macros (phaze.hardware.sram / data/sram_cacti22nm.csv).
SRAM_MIN_BYTES = 1024
SRAM_MIN_WORDS = 32
SRAM_MIN_WIDTH, SRAM_MAX_WIDTH = 8, 512
ACC_BYTES = 4
STAGING_WORDS = 2  # input staging buffer: two GLB bank words per tensor core, double-buffered (module docstring)
VC_BYTES_PER_LANE = 16  # the paper's vector-core buffer per lane (module docstring)
# TPU v1 floor plan (Jouppi et al., ISCA 2017, Fig. 2): control 2% of the die, compute 30%, data buffers 37%
CONTROL_FRACTION_OF_DATAPATH = 2.0 / (30.0 + 37.0)


def macro_port_width(w) -> np.ndarray:
    """Port width (bytes) of the SRAM macro that serves accesses of ``w`` bytes (the CACTI table's range)."""
    return np.clip(np.asarray(w, np.int64), SRAM_MIN_WIDTH, SRAM_MAX_WIDTH)


def _cap(c, banks, width) -> np.ndarray:
    least = np.maximum(SRAM_MIN_BYTES, SRAM_MIN_WORDS * np.asarray(banks, np.int64) * np.asarray(width, np.int64))
    return np.maximum(np.asarray(c, np.int64), least)


def _macro_unique(cap, banks, width, ports):
    """``sram_macro`` evaluated once per distinct (capacity, banks, width, ports) and spread back: a space of
    ~10^5 chips has a few dozen distinct macros per role."""
    from phaze.hardware.sram import SramMacro, sram_macro

    c, b, w, p = np.broadcast_arrays(*(np.asarray(v, np.int64) for v in (cap, banks, width, ports)))
    if c.max(initial=0) < 2**31 and b.max(initial=0) < 2**7 and w.max(initial=0) < 2**10 and p.max(initial=0) < 4:
        code = ((c * 2**7 + b) * 2**10 + w) * 4 + p  # exact: 31 + 7 + 10 + 2 bits
        ucode, inv = np.unique(code, return_inverse=True)
        uniq = (ucode // (4 * 2**10 * 2**7), ucode // (4 * 2**10) % 2**7, ucode // 4 % 2**10, ucode % 4)
    else:  # values the table refuses anyway: let sram_macro say which
        keys = np.stack((c, b, w, p))
        uniq, inv = np.unique(keys, axis=1, return_inverse=True)
    m = sram_macro(*uniq)
    inv = np.asarray(inv).ravel()
    return SramMacro(*(np.asarray(getattr(m, f), np.float64).reshape(-1)[inv]
                       for f in ("area_mm2", "read_energy_j", "write_energy_j", "access_time_s", "cycle_time_s",
                                 "leakage_w")))


def sram_parts(arch: ArchArrays) -> dict:
    """The SRAM macros of each chip (results of ``sram_macro``) keyed by role: operand, acc, vc, glb, and
    staging (the input staging buffer a chip with ``input_staging`` has per tensor core; built for every chip,
    counted only where it is bought)."""
    sram_macro = _macro_unique

    def build(a: ArchArrays) -> dict:
        e = np.asarray(a.bytes_per_element, np.int64)
        one = np.ones(len(a), np.int64)
        w_op, w_acc = macro_port_width(np.asarray(a.tc_cols) * e), macro_port_width(np.asarray(a.tc_cols) * ACC_BYTES)
        w_vc, w_glb = macro_port_width(np.asarray(a.vc_width) * e), macro_port_width(a.glb_bank_width_bytes)
        banks = np.asarray(a.glb_banks, np.int64)
        return {
            "operand": sram_macro(_cap(a.tc_operand_bytes, 2, w_op), 2 * one, w_op, one),
            "acc": sram_macro(_cap(a.tc_acc_bytes, 1, w_acc), one, w_acc, 2 * one),
            "vc": sram_macro(_cap(VC_BYTES_PER_LANE * np.asarray(a.vc_width, np.int64), 1, w_vc), one, w_vc, 2 * one),
            "glb": sram_macro(_cap(a.glb_bytes, banks, w_glb), banks, w_glb, one),
            "staging": sram_macro(_cap(STAGING_WORDS * w_glb, 1, w_glb), one, w_glb, 2 * one),
        }

    return arch.memo("sram_parts", build)


def staging(arch: ArchArrays) -> np.ndarray:
    """1.0 where the chip's tensor cores have an input staging buffer, else 0.0 (float, to scale its costs)."""
    return (np.asarray(arch.input_staging) > 0).astype(np.float64)


def noc_area_mm2(arch: ArchArrays) -> np.ndarray:
    """Network area of each chip (module docstring); 0 for "ideal"."""
    bits = 8.0 * np.asarray(arch.noc_link_bytes, np.float64)
    cores = np.asarray(arch.num_tc, np.float64) + np.asarray(arch.num_vc, np.float64)
    banks = np.asarray(arch.glb_banks, np.float64)
    noc = np.asarray(arch.noc)
    crosspoints = np.select(
        [noc == NOC_KINDS.index("bus"), noc == NOC_KINDS.index("crossbar"), noc == NOC_KINDS.index("mesh")],
        [cores + banks, cores * banks, cores * TERAFLOPS_PORTS * TERAFLOPS_PORTS], default=0.0)
    return CROSSPOINT_BIT_MM2 * crosspoints * bits


def chip_area_breakdown_mm2(arch: ArchArrays, model: AreaModel | None = None) -> dict:
    """Area (mm^2) per part for each chip: compute (MACs + lanes), core_sram, glb, noc, control (per core,
    module docstring), and total."""
    m = model or default_area_model()
    macs = np.asarray(arch.num_tc, np.float64) * np.asarray(arch.tc_rows, np.float64) * np.asarray(arch.tc_cols, np.float64)
    lanes = np.asarray(arch.num_vc, np.float64) * np.asarray(arch.vc_width, np.float64)
    compute = 1e-6 * (m.mac_um2 * macs + m.lane_um2 * lanes)
    s = sram_parts(arch)
    core = (np.asarray(arch.num_tc, np.float64) * (np.asarray(s["operand"].area_mm2) + np.asarray(s["acc"].area_mm2)
                                                   + staging(arch) * np.asarray(s["staging"].area_mm2))
            + np.asarray(arch.num_vc, np.float64) * np.asarray(s["vc"].area_mm2))
    glb = np.asarray(s["glb"].area_mm2, np.float64)
    noc = noc_area_mm2(arch)
    control = CONTROL_FRACTION_OF_DATAPATH * (compute + core)  # the sum over cores of each core's share
    return {"compute": compute, "core_sram": core, "glb": glb, "noc": noc, "control": control,
            "total": compute + core + glb + noc + control}


def chip_area_mm2(arch: ArchArrays, model: AreaModel | None = None) -> np.ndarray:
    """Total area (mm^2) of each chip with the hierarchy."""
    return chip_area_breakdown_mm2(arch, model)["total"]
