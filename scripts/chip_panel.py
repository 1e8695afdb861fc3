#!/usr/bin/env python3
"""Run the chip-validation GEMM panel through ZigZag and SCALE-Sim; write src/phaze/validation/data/chip_panel.json.

Not run by the project or its tests (``phaze validate --chip`` reads the JSON). The two tools need numpy
versions that clash, so each lives in its own scratch venv, and this driver calls them as subprocesses:

    python3 -m venv ../scratch-zz && ../scratch-zz/bin/pip install zigzag-dse==3.9.1 six
    python3 -m venv ../scratch-ss && ../scratch-ss/bin/pip install numpy==2.3.5 scalesim==3.0.0
    python3 scripts/chip_panel.py --zigzag-python ../scratch-zz/bin/python \\
        --scalesim-python ../scratch-ss/bin/python [--jobs 2]

A case is one tensor core (an R x C weight-stationary systolic array, 16-bit operands, fp32 partial sums)
with the on-chip hierarchy of phaze's chip template, running one GEMM slice (M x K) @ (K x N):
the core's operand (weight) buffer and fp32 accumulator, sized by the template's rule (operand = two
weight tiles, 2 R C x 2 B; accumulator = 8 R rows of C fp32 sums), a GLB of ``glb_bytes`` delivering
``glb_bytes_per_cycle``, and DRAM (HBM) delivering ``hbm_bytes_per_cycle``. docs/chip-validation.md says
how each tool is configured and what each counts. Results are cached in --cache so an interrupted run
resumes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/phaze/validation/data/chip_panel.json"
KiB, MiB = 2**10, 2**20
E = 2  # bytes per operand element (bf16/fp16)
ACC_E = 4  # fp32 partial sums
GLB_BYTES = 32 * MiB
HBM_BYTES_PER_CYCLE = 1024  # ~TPU v4's 1200 GB/s HBM at 1.05 GHz (Jouppi et al., ISCA 2023)
ACC_ROWS_PER_ARRAY_ROW = 8  # phaze's chip template rule (hardware.presets.chip_hierarchy)

# zoo layers (src/phaze/workload/zoo/models.yaml): gpt2-xl h=1600, ffn=6400, seq=1024, head dim 64;
# gpt3-175b h=12288, ffn=49152, seq=2048, head dim 128. GEMM (M x K) @ (K x N) with M = microbatch x seq.
LAYERS = {
    "gpt2-xl.qkv": (1024, 1600, 4800), "gpt2-xl.proj": (1024, 1600, 1600),
    "gpt2-xl.fc1": (1024, 1600, 6400), "gpt2-xl.fc2": (1024, 6400, 1600),
    "gpt2-xl.scores": (1024, 64, 1024),
    "gpt3.qkv": (2048, 12288, 36864), "gpt3.proj": (2048, 12288, 12288),
    "gpt3.fc1": (2048, 12288, 49152), "gpt3.fc2": (2048, 49152, 12288),
    "gpt3.scores": (2048, 128, 2048),
}

# (array, bandwidths in B/cycle, [(layer, microbatch, M-slice, K-slice, N-slice)]): each core computes the
# slice of a zoo layer it would own on a many-core chip (M / sm rows, K / sk, N / sn columns); sizes keep
# SCALE-Sim (a cycle-by-cycle simulator) to minutes. The bandwidths bracket each array's demand
# (~2 (R + C) B/cycle): starved, about balanced, ample.
PLAN = [
    ((4, 16), (8, 64, 512), [("gpt2-xl.qkv", 1, 16, 1, 150), ("gpt2-xl.fc2", 1, 32, 1, 100)]),
    ((16, 32), (8, 64, 512), [("gpt2-xl.fc1", 2, 8, 1, 50), ("gpt2-xl.proj", 4, 32, 1, 25)]),
    ((32, 32), (8, 64, 512, 4096), [("gpt2-xl.qkv", 8, 16, 1, 37.5), ("gpt2-xl.fc2", 1, 4, 1, 25)]),
    ((64, 64), (64, 512, 4096), [("gpt2-xl.fc1", 4, 8, 1, 12.5), ("gpt3.proj", 1, 8, 1, 96)]),
    ((128, 128), (64, 512, 4096), [("gpt2-xl.qkv", 1, 1, 1, 4.6875), ("gpt3.fc1", 1, 4, 1, 96)]),
    ((128, 256), (64, 512, 4096), [("gpt2-xl.fc1", 2, 1, 1, 6.25), ("gpt3.qkv", 1, 2, 1, 72)]),
    ((256, 256), (64, 512, 4096), [("gpt2-xl.fc1", 8, 4, 1, 6.25), ("gpt3.fc2", 1, 2, 8, 24)]),
]
# K < rows: attention scores (K = head dim) on the large arrays
SMALL_K = [
    ((128, 128), 512, ("gpt2-xl.scores", 1, 1, 1, 1)),
    ((256, 256), 4096, ("gpt2-xl.scores", 1, 1, 1, 1)),
    ((256, 256), 512, ("gpt3.scores", 1, 1, 1, 1)),
    ((128, 256), 4096, ("gpt3.scores", 1, 1, 1, 2)),
]


# SCALE-Sim-sized slices (cycle-by-cycle, its run time grows with the folds, ceil(K/R) x ceil(N/C), and the
# cycles): one per array, at most 16 folds and ~10^4 cycles, at two bandwidths, so the second tool covers
# every array (the slices above take it longer than --timeout on most arrays). Both tools run them.
SHORT = [
    ((4, 16), (8, 64), ("gpt2-xl.qkv", 1, 4, 100, 150)),
    ((16, 32), (8, 64), ("gpt2-xl.fc1", 2, 8, 25, 50)),
    ((32, 32), (64, 512), ("gpt2-xl.qkv", 8, 16, 12.5, 37.5)),
    ((64, 64), (64, 512), ("gpt2-xl.fc1", 4, 8, 6.25, 25)),
    ((128, 128), (512, 4096), ("gpt2-xl.qkv", 1, 2, 3.125, 9.375)),
    ((128, 256), (512, 4096), ("gpt2-xl.fc1", 2, 4, 3.125, 12.5)),
    ((256, 256), (512, 4096), ("gpt2-xl.fc1", 8, 16, 3.125, 12.5)),
]

# Issue 34 item 1 (no free on-chip resources): shapes that exercise each mechanism the model had for free.
# Small arrays at 8-32 B/cycle: an input row of 8-32 B against one bank word (granularity, no staging).
SMALL_BW = [((r, c), (8, 16, 32), ("gpt2-xl.qkv", 1, 8, 25, 75))
            for r, c in ((4, 16), (8, 8), (8, 16), (16, 16), (16, 32))]
# A ragged last K tile (K not a multiple of the array's rows) beside the same GEMM with K rounded up to
# whole tiles: (array, bandwidths, M, [K ragged, K whole], N).
RAGGED = [
    ((256, 256), (512,), 256, (1600, 1792), 256),
    ((128, 128), (64, 512), 256, (1600, 1664), 128),
    ((32, 32), (64,), 256, (48, 64), 64),
    ((16, 32), (32,), 256, (40, 48), 64),
]
# Accumulator-bound: arrays whose accumulator macro (CACTI) sustains less than one fp32 row per cycle, at
# bandwidths where the GLB does not bind (the existing 64x64, 128x256, 256x256 cases are such arrays too)
PSUM = [
    ((32, 256), (512, 4096), ("gpt2-xl.fc1", 1, 4, 6.25, 12.5)),
    ((128, 64), (512, 4096), ("gpt2-xl.fc1", 1, 4, 6.25, 12.5)),
]
# The same per-core block on 1, 4 and 16 cores (a GEMM split by output column blocks): ZigZag runs the one
# core's block at the core's GLB share (per core: one bank of the given width, like the 8 and 64 B/cycle
# cases); phaze runs the whole GEMM (N x cores) on `cores` cores with a GLB of `cores` such banks.
MULTI = [((32, 32), 64, (1, 4, 16), ("gpt2-xl.qkv", 1, 4, 12.5, 150)),
         ((16, 32), 8, (1, 16), ("gpt2-xl.fc1", 1, 4, 25, 200))]


def _phaze():
    """phaze from this checkout (the driver's main process; the tool workers do not need it)."""
    src = str(ROOT / "src")
    if src not in sys.path:
        sys.path.insert(0, src)
    import phaze.hardware.chip_area as area
    import phaze.validation.chip as chip
    return chip, area


def _with_acc_rate(case: dict) -> dict:
    """Add ``accumulator_bytes_per_cycle`` (each port) when the template's accumulator macro (phaze's
    ``chip_area.sram_parts``, the CACTI table) cannot move one fp32 row (C x 4 B) per cycle: its port
    width per CACTI cycle time, at a 1 GHz clock. ZigZag's accumulator ports get that bandwidth and move a
    row in whole port cycles, ceil(row / bandwidth): on every panel array the cycles per row phaze's rule
    gives (``phaze.hardware.supply.acc_row_rate``: accesses x whole clocks per access). Cases whose macro
    keeps up are unchanged."""
    chip, area = _phaze()
    arch = chip.panel_accelerator(case).as_arrays()
    row = case["cols"] * ACC_E
    width = float(area.macro_port_width(row))
    cycle_s = float(area.sram_parts(arch)["acc"].cycle_time_s[0])
    rate = min(1.0, 1.0 / (-(-row // width) * cycle_s * chip.FREQ_HZ))
    if rate < 1.0:
        case["accumulator_bytes_per_cycle"] = round(rate * row, 2)
    return case


def cases() -> list[dict]:
    out = []

    def raw(rc, bw, name, source, m, k, n, **extra):
        r, c = rc
        out.append(_with_acc_rate({
            "name": name, "source": source,
            "rows": r, "cols": c, "m": m, "k": k, "n": n, "batch": 1, "bytes_per_element": E,
            "operand_buffer_bytes": 2 * r * c * E, "accumulator_bytes": ACC_ROWS_PER_ARRAY_ROW * r * c * ACC_E,
            "glb_bytes": GLB_BYTES, "glb_bytes_per_cycle": bw, "hbm_bytes_per_cycle": HBM_BYTES_PER_CYCLE,
            **extra}))

    def add(rc, bw, spec, prefix="", **extra):
        layer, mb, sm, sk, sn = spec
        m0, k0, n0 = LAYERS[layer]
        m, k, n = m0 * mb // sm, int(k0 // sk), int(n0 // sn)
        assert m * sm == m0 * mb and k * sk == k0 and abs(n * sn - n0) < 1e-9, (layer, sm, sk, sn)
        r, c = rc
        sl = "/".join(f"{d}/{s:g}" for d, s in (("M", sm), ("K", sk), ("N", sn)) if s != 1)
        raw(rc, bw, f"{r}x{c} {prefix}{layer} mb{mb}{' ' + sl if sl else ''} @{bw}B/c",
            f"{layer} (microbatch {mb}){', slice ' + sl if sl else ''}", m, k, n, **extra)

    for rc, bws, specs in PLAN:
        for spec in specs:
            for bw in bws:
                add(rc, bw, spec)
    for rc, bw, spec in SMALL_K:
        add(rc, bw, spec)
    for rc, bws, spec in SHORT:
        for bw in bws:
            add(rc, bw, spec)
    for group in (SMALL_BW, PSUM):
        for rc, bws, spec in group:
            for bw in bws:
                add(rc, bw, spec)
    for rc, bws, m, ks, n in RAGGED:
        for bw in bws:
            for k in ks:
                raw(rc, bw, f"{rc[0]}x{rc[1]} ragged M{m} K{k} N{n} @{bw}B/c",
                    f"K = {k} on {rc[0]} rows ({k / rc[0]:g} tiles)", m, k, n)
    for rc, bw, counts, spec in MULTI:
        for cores in counts:
            add(rc, bw, spec, prefix=f"{cores} core{'s' if cores > 1 else ''} ", cores=cores)
    return out


# ---------------------------------------------------------------- ZigZag (runs inside the zigzag venv)

# The ZigZag configuration's version, part of the cache key: 1 = DRAM level above the GLB, no systolic
# drain (the first stored run); 2 = operands resident in the GLB (no DRAM level), systolic drain on, one
# GLB port; 3 = as 2, with a banked GLB's banks split between the input stream and the rest by the row
# rule (below; cases whose GLB is one bank are the same in 2 and 3 and keep the key of 2); 4 = a banked
# GLB is run under every port configuration of SPLITS and the fastest counts (the row rule's runs keep
# their key of 2 or 3: the same ZigZag input; the others are keyed 4 with their ports). Issue 34: a case
# whose accumulator macro sustains less than a row per cycle carries ``accumulator_bytes_per_cycle`` and its
# accumulator ports get that bandwidth (the case's fields are in its key, so those runs are new).
ZIGZAG_CONFIG = 4

# Configuration 5 (session 20): a case whose sums are final when they leave the array (K <= R, one K tile:
# ``sums_final_in_array``). ZigZag stores a sum whose reduction is complete at ``O_final`` precision (16
# bits) at every memory level above the array, the fp32 accumulator included (zigzag 3.9.1
# ``Mapping.gen_data_precision_dict`` / ``calc_data_movement``: O_final wherever no reduction loop is
# left at or above the level; ``MemoryAllocator.get_precision``: the same for what a level holds). The
# template's accumulator holds and moves fp32 sums and the GLB gets 16-bit outputs. The exact equivalent
# in ZigZag: keep O_final = 16 bits and give the accumulator half its port bits per cycle and half its
# capacity in bits, so it moves and holds the same number of sums as an fp32 accumulator (ZigZag's
# transfer cycles are ceil(sums x precision / port bits), its fits and double-buffering test sums x
# precision against capacity bits; every access of the accumulator in such a case is of final sums).
# Its earlier runs (configuration 2-4, ZigZag's default datapath) are kept in the file as ``zigzag_v4``.
ZIGZAG_CONFIG_FINAL = 5

# Configuration 6 (session 21): ZigZag's mapping search LOMA merges a case's loop prime factors into at most
# ``lpf_limit`` loops (6, its default, in every configuration above), which cannot express some schedules
# (4x16 ``gpt2-xl.qkv`` M = 2^7: no 32-row pass; docs/chip-validation.md "Item 1d"). The latency reference
# is the fastest run ZigZag finds at lpf_limit 6 and at lpf_limit 8 (the same rule as the port
# configurations: the fastest of a fixed set). The lpf-8 runs (key "zigzag<config>/lpf=8", the lpf-6 run's
# key otherwise) are made for the cases ``lpf8_case`` selects, every orientation and port configuration
# the case runs, at most LPF8_TIMEOUT_S seconds each (lpf 8 takes ~5x lpf 6's time; a run that does not
# finish keeps the lpf-6 reference, an upper bound). The lpf-6 reference stays in the file as ``zigzag_lpf6``.
ZIGZAG_CONFIG_LPF = 6
LPF_DEEP = 8
LPF8_TIMEOUT_S = 60.0


def lpf8_case(case: dict) -> bool:
    """The cases that get lpf-8 runs: every case (every orientation and port configuration it runs), the
    same rule for all. (Session 21's first landing ran the 52 one-bank-GLB cases only, chosen by run time.)
    A case whose sums are final in the array (K <= R) runs lpf 8 with configuration 5's accumulator (half
    the port and capacity bits), as its lpf-6 reference does: ``zigzag_case`` gives it from the case."""
    return True


# The port configurations of a banked GLB ZigZag runs (configuration 4): "row" = the row rule of
# configuration 3 (the input port gets the banks one input row needs), "one" = one shared port of all the
# banks (configuration 2's), "i/d" = the input port gets i/d of the banks (rounded, at least one bank, at
# least one left for W/O). One fixed set for every banked case, not chosen per case. (The set's first
# landing had no "one"; docs/chip-validation.md.)
SPLITS = ("row", "one", "1/4", "1/2", "3/4")

# The GLB organisation phaze builds for each panel bandwidth (32 MiB; banks x bank width, the fastest
# CACTI organisation: phaze.validation.chip.glb_organisation, which a test keeps equal to this table).
GLB_ORGANISATION = {8: (1, 8), 16: (1, 16), 32: (1, 32), 64: (1, 64), 512: (16, 32), 4096: (64, 64)}


# The splits a case with a rate-limited accumulator runs (issue 34; run time on a shared 2-core machine):
# the row rule and the one shared port, which held ZigZag's fastest run for every banked case of
# configuration 4 (docs/chip-validation.md); the others of SPLITS can only lower the reference.
ACC_LIMITED_SPLITS = ("row", "one")


def case_splits(case: dict) -> tuple[str, ...]:
    """The splits ZigZag runs for a case: all of SPLITS when its GLB has several banks (ACC_LIMITED_SPLITS
    when its accumulator's ports are rate-limited), else the one port."""
    if GLB_ORGANISATION[case["glb_bytes_per_cycle"]][0] == 1:
        return ("row",)
    return ACC_LIMITED_SPLITS if "accumulator_bytes_per_cycle" in case else SPLITS


def sums_final_in_array(case: dict) -> bool:
    """The whole reduction (K) fits the array's rows (one K tile, ceil(K / R) = 1): every sum is final when
    it leaves the array, so ZigZag keeps it at O_final precision in the accumulator (configuration 5)."""
    return -(-case["k"] // case["rows"]) == 1


def _zigzag_config(case: dict, split: str = "row", default_datapath: bool = False) -> int:
    """The configuration a ZigZag run of ``case`` under ``split`` is; ``default_datapath``: the run with
    ZigZag's O_final accumulator (what configurations 2-4 ran) for a case of configuration 5."""
    if sums_final_in_array(case) and not default_datapath:
        return ZIGZAG_CONFIG_FINAL
    if split != "row":
        return ZIGZAG_CONFIG
    return 2 if glb_ports(case)[0] == 0 else 3


def glb_ports(case: dict, split: str = "row") -> tuple[int, int]:
    """(bytes per cycle of the input stream's banks, of the other banks) of a banked GLB in ZigZag.

    phaze's GLB is ``banks`` banks of ``width`` bytes behind a crossbar: each cycle every bank serves one
    access of any stream. ZigZag's memory ports serve fixed operands and take whole port cycles per
    transfer, so one port of the total width would spend a full cycle of all banks on each input row
    (128 B of a 512 B port for a K = 64 slice). The closest ZigZag can express is a static split: the
    input stream (one row of min(K, R) elements per cycle, straight into the array) gets some banks,
    weights and outputs share the others. Shared banks can serve any static split's schedule (each cycle
    the same banks serve the same streams), so every split is at least as slow as phaze's GLB, and the
    fastest of several is the closest bound.

    ``split`` "row": the banks one input row needs; one bank, or an input row that needs every bank
    (nothing left to split off): one shared port (0, total). "one": one shared port (0, total), which
    shared banks also dominate (each cycle all banks serve one stream). "i/d": i/d of the banks (rounded,
    at least one each side); a one-bank GLB has no split (one shared port)."""
    banks, width = GLB_ORGANISATION[case["glb_bytes_per_cycle"]]
    if split == "row":
        row = min(case["k"], case["rows"]) * case["bytes_per_element"]
        in_banks = -(-row // width)
        if banks == 1 or in_banks >= banks:
            return 0, banks * width
    elif split == "one":
        return 0, banks * width
    else:
        i, d = (int(x) for x in split.split("/"))
        if banks == 1:
            return 0, width
        in_banks = min(banks - 1, max(1, round(banks * i / d)))
    return in_banks * width, (banks - in_banks) * width


def _slice_bytes(case: dict) -> int:
    """Bytes of the slice's operands and result: (M K + K N + M N) elements."""
    m, k, n = case["m"], case["k"], case["n"]
    return case["batch"] * case["bytes_per_element"] * (m * k + k * n + m * n)


def zigzag_case(case: dict, stream: str, split: str = "row", default_datapath: bool = False) -> dict:
    """One case through ZigZag; ``stream`` = 'm' (A's rows stream, B stationary) or 'n' (the transposed
    product C^T = B^T A^T); ``split`` of a banked GLB's banks (glb_ports). A latency run of a case whose
    sums are final in the array (``sums_final_in_array``) gets configuration 5's accumulator (half the port
    and capacity bits, the fp32 accumulator's sums at O_final's 16 bits) unless ``default_datapath``.

    A case with ``energy_costs_pj`` (scripts/chip_energy_panel.py) is an energy run: its MAC and memories
    cost what phaze charges (pJ per MAC, per access of each memory's port), ZigZag searches the
    minimum-energy mapping (at ``zigzag_lpf_limit`` when the case gives one) or, when the case gives
    ``zigzag_temporal_ordering`` (phaze's schedule), counts that schedule without searching; the result
    is its energy by memory and by operand and the word accesses."""
    import logging

    import yaml
    from zigzag.api import get_hardware_performance_zigzag

    r, c = case["rows"], case["cols"]
    bits = 8 * case["bytes_per_element"]
    costs = case.get("energy_costs_pj") or {}
    cost = lambda key, placeholder: float(costs.get(key, placeholder))  # noqa: E731

    def port(name, typ, bw_bits, alloc):
        return {"name": name, "type": typ, "bandwidth_min": min(bw_bits, bits), "bandwidth_max": bw_bits,
                "allocation": alloc}

    acc_bits = int(round(8 * case.get("accumulator_bytes_per_cycle", ACC_E * c)))
    acc_size_bits = 8 * case["accumulator_bytes"]
    # configuration 5 (ZIGZAG_CONFIG_FINAL): the accumulator's fp32 sums at ZigZag's O_final precision
    # (bits per element): the same sums per cycle and the same sums held. Not for energy runs
    # (scripts/chip_energy_panel.py keeps its own configuration).
    final = sums_final_in_array(case) and not costs and not default_datapath
    if final:
        acc_bits = int(round(acc_bits * bits / (8 * ACC_E)))
        acc_size_bits = acc_size_bits * bits // (8 * ACC_E)
    every_top = ["I1, tl", "I2, tl", "O, tl", "O, fl"]  # GLB <-> core buffers / array (nothing above)
    b_in, b_rest = glb_ports(case, split)
    memories = {
        # per-PE weight register, double-buffered (the next weight shifts in while the current one is used)
        "pe_weight": {"size": 2 * bits, "r_cost": 0.0, "w_cost": 0.0, "area": 0, "latency": 1,
                      "operands": ["I2"], "force_double_buffering": True,
                      "ports": [port("r_port_1", "read", bits, ["I2, tl"]),
                                port("w_port_1", "write", bits, ["I2, fh"])], "served_dimensions": []},
        # per-PE partial sum (passed down the column)
        "pe_psum": {"size": 32, "r_cost": 0.0, "w_cost": 0.0, "area": 0, "latency": 1, "operands": ["O"],
                    "ports": [port("r_port_1", "read", 32, ["O, tl"]), port("r_port_2", "read", 32, ["O, th"]),
                              port("w_port_1", "write", 32, ["O, fh"]), port("w_port_2", "write", 32, ["O, fl"])],
                    "served_dimensions": []},
        # the core's operand (weight) buffer: loads one array row (C weights) per cycle
        "operand_buffer": {"size": 8 * case["operand_buffer_bytes"], "r_cost": cost("operand_row_read", 1.0),
                           "w_cost": cost("operand_row_write", 1.0), "area": 0,
                           "latency": 1, "operands": ["I2"], "force_double_buffering": True,
                           "ports": [port("r_port_1", "read", bits * c, ["I2, tl"]),
                                     port("w_port_1", "write", bits * c, ["I2, fh"])],
                           "served_dimensions": ["D1", "D2"]},
        # the core's fp32 accumulator: one row of C partial sums in and out per cycle, or what its macro
        # sustains per port when that is less (accumulator_bytes_per_cycle); configuration 5 above
        "accumulator": {"size": acc_size_bits, "r_cost": cost("acc_row_read", 1.0),
                        "w_cost": cost("acc_row_write", 1.0), "area": 0,
                        "latency": 1, "operands": ["O"],
                        "ports": [port("r_port_1", "read", acc_bits, ["O, tl", "O, th"]),
                                  port("w_port_1", "write", acc_bits, ["O, fh", "O, fl"])],
                        "served_dimensions": ["D1", "D2"]},
        # the GLB, the top of the hierarchy: the slice's operands are resident in it (a panel case is the
        # slice one core owns of a layer on a many-core chip; the layer's operands were written to the GLB
        # by the previous op or prefetched by the DMA while it ran -- phaze costs HBM in its own term).
        # glb_bytes_per_cycle toward the core: one shared read-write port for a one-bank GLB, else the
        # banks split between the input stream and the rest (glb_ports). Sized to hold the whole slice
        # (a ZigZag top level must).
        # (an energy run's GLB costs are per access of the whole port, b_rest bytes: one shared port)
        "glb": {"size": 8 * max(case["glb_bytes"], _slice_bytes(case)),
                "r_cost": cost("glb_read_per_byte", 10.0 / b_rest) * b_rest,
                "w_cost": cost("glb_write_per_byte", 10.0 / b_rest) * b_rest,
                "area": 0, "latency": 1, "operands": ["I1", "I2", "O"],
                "ports": ([port("rw_port_1", "read_write", 8 * b_rest, every_top)] if not b_in else
                          [port("r_port_1", "read", 8 * b_in, ["I1, tl"]),
                           port("rw_port_2", "read_write", 8 * b_rest, ["I2, tl", "O, tl", "O, fl"])]),
                "served_dimensions": ["D1", "D2"]},
    }
    hw = {"name": f"core{r}x{c}", "memories": memories,
          # a systolic array along both dimensions (inputs move right, partial sums down, one PE per cycle):
          # ZigZag adds the drain (used rows - 1) + (used columns - 1), the skew phaze and SCALE-Sim count
          "operational_array": {"unit_energy": cost("mac", 0.04), "unit_area": 1, "dimensions": ["D1", "D2"],
                                "sizes": [r, c], "input_precision": [bits, bits],
                                "systolic_dimensions": ["D1", "D2"]}}
    # weight stationary: the reduction dim (C in ZigZag's names = our K) on the rows, output columns on D2
    mapping = [{"name": "default", "spatial_mapping": {"D1": [f"C, {r}"], "D2": [f"K, {c}"]},
                "memory_operand_links": {"O": "O", "W": "I2", "I": "I1"}}]
    if case.get("zigzag_temporal_ordering"):  # a given schedule (innermost loop first): no search
        mapping[0]["temporal_ordering"] = [list(x) for x in case["zigzag_temporal_ordering"]]
    rows, cols = (case["m"], case["n"]) if stream == "m" else (case["n"], case["m"])
    workload = [{"id": 0, "name": "gemm", "operator_type": "Gemm", "equation": "O[b][k]+=I[b][c]*W[c][k]",
                 "loop_dims": ["B", "C", "K"], "loop_sizes": [rows, case["k"], cols],
                 "operand_precision": {"I": bits, "W": bits, "O": 32, "O_final": bits}}]
    logging.disable(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="zz_") as d:
        paths = [os.path.join(d, f) for f in ("hw.yaml", "map.yaml", "wl.yaml")]
        for p, obj in zip(paths, (hw, mapping, workload)):
            with open(p, "w") as f:
                yaml.safe_dump(obj, f, sort_keys=False)  # memory order = hierarchy order: keep it
        t0 = time.time()
        _, latency, cmes = get_hardware_performance_zigzag(
            paths[2], paths[0], paths[1], opt="energy" if costs else "latency", dump_folder=os.path.join(d, "out"),
            loma_show_progress_bar=False, **({"lpf_limit": case["zigzag_lpf_limit"]}
                                             if "zigzag_lpf_limit" in case else {}))
        cme = cmes[0][0]
        if costs:  # the one layer's own evaluation (cmes[0][0] is the sum over layers, without the links)
            layer = cmes[0][1][0][0]
            return dict(_zigzag_energy(layer), cycles=float(layer.latency_total2), stream=stream, split=split,
                        seconds=round(time.time() - t0, 1))
        return {"cycles": float(latency), "ideal_cycles": float(cme.ideal_cycle),
                "config": _zigzag_config(case, split, default_datapath), "split": split, "glb_ports_bytes_per_cycle": [b_in, b_rest] if b_in else [b_rest],
                "systolic_drain_cycles": float(cme.systolic_drain_cycle),
                "spatial_ideal_cycles": float(cme.ideal_temporal_cycle),
                "compute_with_stalls_cycles": float(cme.latency_total0),
                "onloading_cycles": float(cme.latency_total1 - cme.latency_total0),
                "offloading_cycles": float(cme.data_offloading_cycle),
                "stream": stream, "seconds": round(time.time() - t0, 1)}


def _zigzag_energy(cme) -> dict:
    """An energy run's figures (pJ): the total, the MACs', each memory's (all operands) and each operand's
    per memory, and each operand's word accesses per memory (reads out, writes in)."""
    hierarchy = cme.accelerator.memory_hierarchy
    by_memory, by_operand, accesses = {}, {}, {}
    for layer_op, energies in cme.mem_energy_breakdown.items():
        levels = hierarchy.get_memory_levels(mem_op=cme.memory_operand_links.layer_to_mem_op(layer_op))
        for level, energy, acc in zip(levels, energies, cme.memory_word_access[layer_op]):
            name = level.name
            by_memory[name] = by_memory.get(name, 0.0) + float(energy)
            by_operand.setdefault(str(layer_op), {})[name] = float(energy)
            accesses.setdefault(str(layer_op), {})[name] = {str(d): float(acc.get(d)) for d in acc.data}
    return {"energy_pj": float(cme.energy_total), "mac_pj": float(cme.mac_energy), "memory_pj": by_memory,
            "operand_memory_pj": by_operand, "word_accesses": accesses}


# ---------------------------------------------------------------- SCALE-Sim (runs inside the scalesim venv)

SCALESIM_CFG = """[general]
run_name = panel

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: {ifmap_kb}
FilterSramSzkB: {filter_kb}
OfmapSramSzkB: {ofmap_kb}
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: {bw}
Dataflow: ws
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: {bw}
IfmapSRAMBankNum: 1
IfmapSRAMBankPort: 1
FilterCustomLayout: False
FilterSRAMBankBandwidth: {bw}
FilterSRAMBankNum: 1
FilterSRAMBankPort: 1

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: USER
UseRamulatorTrace: False
"""


def scalesim_case(case: dict, stream: str) -> dict:
    """One case through SCALE-Sim's weight-stationary GEMM with user bandwidth (docs/chip-validation.md).
    SCALE-Sim's words are 1 byte, so sizes and bandwidth are given in elements (16-bit operands)."""
    import contextlib
    import io

    from scalesim.scale_sim import scalesim

    e = case["bytes_per_element"]
    kb = lambda nbytes: max(1, -(-nbytes // (e * 1024)))  # noqa: E731  (whole KiB of elements, at least 1)
    rows, cols = (case["m"], case["n"]) if stream == "m" else (case["n"], case["m"])
    with tempfile.TemporaryDirectory(prefix="ss_") as d:
        cfg, topo, layout = (os.path.join(d, f) for f in ("panel.cfg", "topo.csv", "layout.csv"))
        with open(cfg, "w") as f:
            f.write(SCALESIM_CFG.format(
                rows=case["rows"], cols=case["cols"], ifmap_kb=kb(case["operand_buffer_bytes"]),
                filter_kb=kb(case["operand_buffer_bytes"]), ofmap_kb=kb(case["accumulator_bytes"]),
                bw=max(1, case["glb_bytes_per_cycle"] // e)))
        with open(topo, "w") as f:
            f.write(f"Layer, M, N, K,\ngemm, {rows}, {cols}, {case['k']},\n")
        with open(layout, "w") as f:
            f.write("Layer,a,b,c,d,e,f,g,\ngemm,1,1,1,1,1,1,1,\n")  # unused without custom layouts
        t0 = time.time()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            s = scalesim(save_disk_space=True, verbose=False, config=cfg, topology=topo, layout=layout,
                         input_type_gemm=True)
            s.run_scale(top_path=os.path.join(d, "out"))
        with open(os.path.join(d, "out", "panel", "COMPUTE_REPORT.csv")) as f:
            head, row = (ln.split(",") for ln in f.read().strip().splitlines()[:2])
        rep = dict(zip((h.strip() for h in head), (v.strip() for v in row)))
        return {"cycles": float(rep["Total Cycles"]), "cycles_incl_prefetch":
                float(rep["Total Cycles (incl. prefetch)"]), "stall_cycles": float(rep["Stall Cycles"]),
                "stream": stream, "seconds": round(time.time() - t0, 1)}


# ---------------------------------------------------------------- driver

def _tool_version(python: str, dist: str, fallback: str = "unknown") -> str:
    """The tool's version in its venv; ``fallback`` (the seed file's) when that venv is not here."""
    if not Path(python).exists():
        return fallback
    r = subprocess.run([python, "-c", f"from importlib.metadata import version; print(version({dist!r}))"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def write_zigzag_doc(path: str, description: str, zigzag_python: str, script: str, rows: list[dict]) -> None:
    """Write a ZigZag-only data file (the energy panel, the schedule check): its description, ZigZag's version,
    the command that made it (``script`` under scripts/) and its cases."""
    doc = {"description": description, "tools": {"zigzag-dse": _tool_version(zigzag_python, "zigzag-dse")},
           "command": f".venv/bin/python scripts/{script} --zigzag-python ../scratch-zz/bin/python", "cases": rows}
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")


def _run_tool(python: str, tool: str, case: dict, stream: str, timeout_s: float, split: str = "row",
              default_datapath: bool = False) -> dict:
    try:
        r = subprocess.run(["nice", python, __file__, "--worker", tool, "--stream", stream, "--split", split,
                            *(["--default-datapath"] if default_datapath else []), json.dumps(case)],
                           capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"not finished within {timeout_s:g} s (--timeout)"}
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    if r.returncode != 0 or not last.startswith("{"):
        return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(last)


def _key(tool: str, stream: str, case: dict, split: str = "row", default_datapath: bool = False,
         lpf: int | None = None) -> str:
    """Cache key of one tool run. A ZigZag key names its configuration's version and, for the splits of
    configuration 4 (and 5), the GLB ports (splits that give the same ports share one run);
    ``default_datapath``: a configuration-5 case's run with ZigZag's O_final accumulator (its key of 2-4)."""
    if tool != "zigzag":  # SCALE-Sim's input has no accumulator port rate
        plain = {f: v for f, v in case.items() if f != "accumulator_bytes_per_cycle"}
        return f"{tool}|{stream}|{json.dumps(plain, sort_keys=True)}"
    name = f"zigzag{_zigzag_config(case, split, default_datapath)}"
    if split != "row":
        name += "/ports=" + "+".join(map(str, glb_ports(case, split)))
    if lpf is not None:  # configuration 6: a run at another LOMA lpf_limit than ZigZag's default 6
        name += f"/lpf={lpf}"
    return f"{name}|{stream}|{json.dumps(case, sort_keys=True)}"


def _distinct_splits(case: dict) -> list[str]:
    """The case's splits, keeping the first of those that give the same ports (one ZigZag run each)."""
    seen, out = set(), []
    for sp in case_splits(case):
        ports = glb_ports(case, sp)
        if ports not in seen:
            seen.add(ports)
            out.append(sp)
    return out


def _seed(cache: dict, panel_file: str, panel: list[dict]) -> int:
    """Fill the cache from a stored panel file (the runs its "config" records: ZigZag's row-rule runs of
    configuration 2, 3 or 5, both orientations, and its splits; a configuration-5 case's default-datapath
    runs; SCALE-Sim's runs), for the cases that are still in the panel with the same fields. The tools are deterministic: the same input gives the same cycles."""
    stored = {c["name"]: c for c in json.loads(Path(panel_file).read_text())["cases"]}
    n = 0
    for c in panel:
        old = stored.get(c["name"])
        if old is None or any(old.get(f) != v for f, v in c.items() if f != "accumulator_bytes_per_cycle"):
            continue
        ss = old.get("scalesim")
        if ss and _key("scalesim", "m", c) not in cache:
            cache[_key("scalesim", "m", c)] = {f: v for f, v in ss.items() if f != "orientations"}
            n += 1
        if old.get("accumulator_bytes_per_cycle") != c.get("accumulator_bytes_per_cycle"):
            continue  # ZigZag ran another accumulator: its runs are not this case's
        # the runs the file records as the case's reference (zigzag, its row rule zigzag_v3) and, for a case
        # of configuration 5, its runs of ZigZag's default datapath (zigzag_v4, with its row rule under "row";
        # a file from before configuration 5 holds them as the reference), each under its configuration's key
        # (configuration 6: the lpf-6 runs' best is ``zigzag_lpf6`` when the case has lpf-8 runs)
        records = [(old.get("zigzag_v3") or old.get("zigzag") or {}, old.get("zigzag_lpf6") or old.get("zigzag") or {})]
        for sp, by_stream in ((old.get("zigzag") or {}).get("lpf8") or {}).items():  # configuration 6's lpf-8 runs
            for st, cyc in by_stream.items():
                key = _key("zigzag", st, c, sp, lpf=LPF_DEEP)
                if key not in cache and isinstance(cyc, (int, float)):
                    cache[key] = {"cycles": cyc, "config": _zigzag_config(c, sp), "split": sp, "stream": st,
                                  "lpf_limit": LPF_DEEP, "seeded": "a stored lpf-8 run's cycles"}
                    n += 1
        if "zigzag_v4" in old:
            records.append((old["zigzag_v4"].get("row") or {}, old["zigzag_v4"]))
        for row, best in records:
            final = row.get("config") == ZIGZAG_CONFIG_FINAL
            dd = sums_final_in_array(c) and not final  # a default-datapath run of a configuration-5 case
            if row.get("config") != _zigzag_config(c, default_datapath=dd) or "orientations" not in row:
                continue  # another configuration's runs: not this case's
            for st, cyc in row["orientations"].items():
                key = _key("zigzag", st, c, default_datapath=dd)
                if key in cache or cyc is None:
                    continue
                full = {f: v for f, v in row.items() if f not in ("orientations", "splits")}
                cache[key] = full if row.get("stream") == st else {
                    "cycles": cyc, "config": row["config"], "split": "row", "stream": st,
                    "glb_ports_bytes_per_cycle": row.get("glb_ports_bytes_per_cycle"),
                    "seeded": "the other orientation of a stored run (cycles only)"}
                n += 1
            for sp, by_stream in (best.get("splits") or {}).items():
                if sp == "row":  # taken above, with the run's full record
                    continue
                for st, cyc in by_stream.items():
                    key = _key("zigzag", st, c, sp, default_datapath=dd)
                    if key in cache or cyc is None:
                        continue
                    if (sp, st) == (best.get("split"), best.get("stream")):  # the stored best: its record
                        cache[key] = {f: v for f, v in best.items() if f not in ("orientations", "splits", "row")}
                    else:
                        cache[key] = {"cycles": cyc, "config": _zigzag_config(c, sp, dd), "split": sp,
                                      "stream": st, "glb_ports_bytes_per_cycle": [p for p in glb_ports(c, sp) if p],
                                      "seeded": "a stored split's cycles"}
                    n += 1
    return n


def _work(c: dict) -> float:
    """A rough cycle count (compute or GLB traffic, whichever is larger) to order the slow runs."""
    r, k, m, n = c["rows"], c["k"], c["m"], c["n"]
    tiles_n = -(-n // c["cols"])
    compute = -(-k // r) * tiles_n * (2 * r + c["cols"] + m)
    traffic = (m * k * tiles_n + k * n + m * n * -(-k // r)) * c["bytes_per_element"]
    return max(compute, traffic / c["glb_bytes_per_cycle"])


def _every_split(args, panel: list[dict], cache: dict, cache_path: Path) -> int:
    """--every-split: ZigZag's cycles of one case under each whole-bank split (both orientations)."""
    case = next((c for c in panel if c["name"] == args.every_split), None)
    if case is None:
        print(f"--every-split: no case named {args.every_split!r} (see --list)", file=sys.stderr)
        return 2
    banks = GLB_ORGANISATION[case["glb_bytes_per_cycle"]][0]
    if banks == 1:
        print(f"--every-split: {args.every_split!r} has a one-bank GLB (nothing to split)", file=sys.stderr)
        return 2
    jobs = [(f"{x}/{banks}", s) for x in range(1, banks) for s in "mn"]
    lock = threading.Lock()

    def one(job):
        split, stream = job
        key = _key("zigzag", stream, case, split)
        if key not in cache or "error" in cache[key]:
            res = _run_tool(args.zigzag_python, "zigzag", case, stream, args.timeout, split)
            with lock:
                cache[key] = res
                cache_path.write_text(json.dumps(cache))
        return cache[key].get("cycles")

    with ThreadPoolExecutor(args.jobs) as ex:
        got = dict(zip(jobs, ex.map(one, jobs)))
    print(f"{case['name']}: ZigZag cycles per split ({banks} banks; input port, W/O port in B/cycle)")
    for x in range(1, banks):
        sp = f"{x}/{banks}"
        print(f"  {x:3d} banks for inputs {glb_ports(case, sp)}: m {got[sp, 'm']}, n {got[sp, 'n']}")
    best = min((v, sp) for (sp, _), v in got.items() if v)
    print(f"fastest: {best[0]:,.0f} cycles ({best[1]} of the banks for inputs)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", choices=["zigzag", "scalesim"], help=argparse.SUPPRESS)
    ap.add_argument("--stream", default="m", help=argparse.SUPPRESS)
    ap.add_argument("--split", default="row", help=argparse.SUPPRESS)
    ap.add_argument("--default-datapath", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("case", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--zigzag-python", default="../scratch-zz/bin/python")
    ap.add_argument("--scalesim-python", default="../scratch-ss/bin/python")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "phaze_chip_panel_cache.json"))
    ap.add_argument("--merge-cache", action="append", default=[],
                    help="also read finished runs from this cache file (e.g. of a parallel run of one tool)")
    ap.add_argument("--seed-from", metavar="PANEL_JSON", help="take the runs a stored panel file records "
                    "(ZigZag's row-rule runs of its configuration, SCALE-Sim's) into the cache before running")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--every-split", metavar="CASE", help="run ZigZag on one banked case under every split of "
                    "its banks (x of the banks for the input port, x = 1 ... banks - 1), print the cycles and "
                    "exit (a check of the split set; writes nothing but the cache)")
    ap.add_argument("--tools", default="zigzag,scalesim", help="comma-separated tools to run (default both)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per tool run (SCALE-Sim is "
                    "cycle-by-cycle: its long cases may not finish; they are stored as not run)")
    ap.add_argument("--no-lpf8", action="store_true", help="skip configuration 6's lpf-8 runs (the reference "
                    "is then lpf 6's where none is cached)")
    ap.add_argument("--retry-errors", action="store_true", help="rerun cached runs that failed or timed out")
    ap.add_argument("-o", "--output", default=str(OUT))
    args = ap.parse_args()
    if args.worker:
        case = json.loads(args.case)
        print(json.dumps(zigzag_case(case, args.stream, args.split, args.default_datapath) if args.worker == "zigzag"
                         else scalesim_case(case, args.stream)))
        return 0
    panel = cases()
    if args.list:
        for c in panel:
            print(c["name"], c["m"], c["k"], c["n"])
        print(len(panel), "cases")
        return 0
    cache_path = Path(args.cache)
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    if args.every_split:
        return _every_split(args, panel, cache, cache_path)
    for extra in args.merge_cache:
        for k, v in json.loads(Path(extra).read_text()).items():
            if k not in cache or ("error" in cache[k] and "error" not in v):
                cache[k] = v
    if args.seed_from:
        print(f"seeded {_seed(cache, args.seed_from, panel)} runs from {args.seed_from}", flush=True)
    jobs = []
    tools = [t for t in ("zigzag", "scalesim") if t in args.tools.split(",")]
    for tool in tools:  # ZigZag first (seconds per run), then SCALE-Sim from the cheapest case up
        py = args.zigzag_python if tool == "zigzag" else args.scalesim_python
        for c in sorted(panel, key=_work) if tool == "scalesim" else panel:
            # a configuration-5 case also runs ZigZag's default datapath (kept as zigzag_v4)
            for dd in ((False, True) if tool == "zigzag" and sums_final_in_array(c) else (False,)):
                for split in (_distinct_splits(c) if tool == "zigzag" else ["row"]):
                    for stream in (("m", "n") if tool == "zigzag" else ("m",)):
                        key = _key(tool, stream, c, split, dd)
                        if key not in cache or (args.retry_errors and "error" in cache[key]):
                            jobs.append((key, py, tool, c, stream, split, dd))
    deep = []
    if "zigzag" in tools and not args.no_lpf8:  # configuration 6's lpf-8 runs, after the others
        for c in panel:
            if lpf8_case(c):
                for split in _distinct_splits(c):
                    for stream in ("m", "n"):
                        key = _key("zigzag", stream, c, split, lpf=LPF_DEEP)
                        if key not in cache or (args.retry_errors and "error" in cache[key]):
                            deep.append((key, args.zigzag_python, "zigzag", dict(c, zigzag_lpf_limit=LPF_DEEP),
                                         stream, split, False))
        jobs += sorted(deep, key=lambda j: _work(j[3]))  # the cheapest first
    if args.seed_from:  # cases the seed file does not hold first (its cases' runs are mostly reruns)
        held = {c["name"] for c in json.loads(Path(args.seed_from).read_text())["cases"]}
        jobs.sort(key=lambda j: ("zigzag_lpf_limit" in j[3], j[3]["name"] in held))
    print(f"{len(panel)} cases, {len(jobs)} tool runs to do", flush=True)
    lock = threading.Lock()

    def one(job):
        key, py, tool, c, stream, split, dd = job
        deep = "zigzag_lpf_limit" in c
        res = _run_tool(py, tool, c, stream, min(args.timeout, LPF8_TIMEOUT_S) if deep else args.timeout, split, dd)
        if deep and "error" not in res:
            res["lpf_limit"] = c["zigzag_lpf_limit"]
        with lock:
            cache[key] = res
            cache_path.write_text(json.dumps(cache))
        print(f"{tool:8s} {stream} {split}{' default-datapath' if dd else ''} {c['name']}: {res}", flush=True)

    with ThreadPoolExecutor(args.jobs) as ex:
        list(ex.map(one, jobs))

    seeded_tools = json.loads(Path(args.seed_from).read_text()).get("tools", {}) if args.seed_from else {}
    rows, failed, lpf8_missing = [], 0, []
    for c in panel:
        row = dict(c)
        for tool in ("zigzag", "scalesim") + (("zigzag_v4",) if sums_final_in_array(c) else ()):
            dd = tool == "zigzag_v4"  # a configuration-5 case's runs of ZigZag's default datapath
            name, tool = tool, "zigzag" if dd else tool
            streams = "mn" if tool == "zigzag" else "m"
            splits = _distinct_splits(c) if tool == "zigzag" else ["row"]
            runs = {(sp, s): cache.get(_key(tool, s, c, sp, dd), {"error": "not run"})
                    for sp in splits for s in streams}
            ok = {k: r for k, r in runs.items() if "error" not in r}
            failed += len(ok) < len(runs)
            # like phaze, the compiler may swap the operand roles: the faster orientation counts (ZigZag runs
            # both; SCALE-Sim, a cycle-by-cycle simulator, only the M-streamed one to bound its run time); and
            # for ZigZag the fastest static split of a banked GLB (configuration 4, glb_ports)
            # configuration 6: the lpf-8 runs of the case (if any) beside the lpf-6 ones; the fastest of both
            deep_runs = ({sp: {s: cache.get(_key(tool, s, c, sp, lpf=LPF_DEEP), {"error": "not run"}) for s in streams}
                          for sp in splits} if tool == "zigzag" and not dd and lpf8_case(c) else {})
            if any(r.get("error") == "not run" for by in deep_runs.values() for r in by.values()):
                deep_runs = {}  # lpf-8 runs not all reached (an interrupted run, --no-lpf8): lpf 6 alone
                lpf8_missing.append(c["name"])
            deep_ok = {(sp, s): r for sp, by in deep_runs.items() for s, r in by.items() if "error" not in r}
            if ok:
                best = min(ok, key=lambda k: ok[k]["cycles"])
                row[name] = dict(ok[best], **({"split": best[0]} if tool == "zigzag" else {}))
                if deep_runs:
                    lpf6 = dict(row[name], lpf_limit=6)
                    best8 = min(deep_ok, key=lambda k: deep_ok[k]["cycles"]) if deep_ok else None
                    if best8 and deep_ok[best8]["cycles"] < ok[best]["cycles"]:
                        row[name] = dict(deep_ok[best8], split=best8[0])
                    else:
                        row[name] = dict(lpf6)
                    row[name]["lpf8"] = {sp: {s: (r.get("cycles") if "error" not in r else r["error"])
                                              for s, r in by.items()} for sp, by in deep_runs.items()}
            else:
                row[name] = {"error": next(iter(runs.values()))["error"]}
            row[name]["orientations"] = {s: min((r["cycles"] for (sp, s2), r in ok.items() if s2 == s),
                                                default=None) for s in streams}
            if tool == "zigzag":
                row[name]["splits"] = {sp: {s: runs[sp, s].get("cycles") for s in streams} for sp in splits}
                # the reference of configuration 3 (the row rule alone), kept for the old-rule figures (of
                # zigzag_v4: under "row" in it)
                rr = [runs["row", s] for s in streams]
                rok = [r for r in rr if "error" not in r]
                v3 = (dict(min(rok, key=lambda r: r["cycles"]), split="row", orientations={
                    s: r.get("cycles") for s, r in zip(streams, rr)}) if rok else {"error": rr[0]["error"]})
                if dd:
                    row[name]["row"] = v3
                else:
                    row["zigzag_v3"] = v3
                if deep_runs and ok:  # the lpf-6 reference (configuration 4 / 5's rule), kept
                    row["zigzag_lpf6"] = dict(lpf6, splits=row[name]["splits"], orientations={
                        s: min((r["cycles"] for (sp, s2), r in ok.items() if s2 == s), default=None)
                        for s in streams})
                    row[name]["orientations"] = {s: min([r["cycles"] for (sp, s2), r in list(ok.items()) +
                                                         list(deep_ok.items()) if s2 == s], default=None)
                                                 for s in streams}
        rows.append(row)
    doc = {
        "description": "GEMM panel for `phaze validate --chip`: one tensor core with phaze's on-chip hierarchy "
                       "per case, cycles from ZigZag (latency incl. memory stalls, on- and off-loading) and "
                       "SCALE-Sim (weight-stationary, user bandwidth); see docs/chip-validation.md",
        "tools": {"zigzag-dse": _tool_version(args.zigzag_python, "zigzag-dse", seeded_tools.get("zigzag-dse", "unknown")),
                  "scalesim": _tool_version(args.scalesim_python, "scalesim", seeded_tools.get("scalesim", "unknown"))},
        "command": "python3 scripts/chip_panel.py --zigzag-python ../scratch-zz/bin/python "
                   "--scalesim-python ../scratch-ss/bin/python",
        "cases": rows,
    }
    Path(args.output).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output}: {len(rows)} cases ({failed} with a failed tool run)")
    if lpf8_missing:
        print(f"{len(lpf8_missing)} cases without every lpf-8 run (lpf-6 reference alone): " + "; ".join(lpf8_missing))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
