"""phaze's GEMM latency against ZigZag and SCALE-Sim on a panel of one-core GEMMs (``validate --chip``).

The panel (``data/chip_panel.json``) was produced by ``scripts/chip_panel.py`` with both tools installed
(docs/chip-validation.md: how each tool is configured, what each counts); this module only reads it, so
the comparison runs without the tools. For each case the chip is built with the case's parameters by
:func:`panel_accelerator` (one core, the case's array, buffers, GLB bandwidth and HBM rate) and the case's
GEMM goes through ``phaze.cost.gemm_latency_s`` as it is; cycles = latency x clock.

Goal (issue 10): every case within 15% of ZigZag's latency (memory stalls included), mean within 5%.
ZigZag's reference for a banked GLB is the fastest of a fixed set of static splits of its banks
(configuration 4 of the script), and for every case the fastest of ZigZag's mapping search at
LOMA lpf_limit 6 and 8 (configuration 6; their lpf-6 reference is kept as ``zigzag_lpf6``); the file also
keeps the reference of configuration 3 (the row rule alone at lpf 6, ``zigzag_v3``), reported beside it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import lru_cache
from importlib import resources

from phaze.cost.gemm import gemm_latency_s, gemm_terms
from phaze.errors import ConfigError
from phaze.hardware.accelerator import Accelerator
from phaze.validation.goals import goal
from phaze.workload.ops import Gemm

PANEL_FILE = "chip_panel.json"
FREQ_HZ = 1.0e9  # cycles are what the tools report; any clock gives the same cycles
GOAL_MAX_PCT = goal("chip_gemm_latency").max_abs_pct  # data/goals.json (issue 10)
GOAL_MEAN_PCT = goal("chip_gemm_latency").mean_abs_pct
_GiB = 2**30


@lru_cache(maxsize=1)
def load_panel() -> dict:
    """The packaged panel: tool versions, the command that made it, and the cases with each tool's cycles."""
    text = resources.files("phaze.validation").joinpath("data", PANEL_FILE).read_text()
    return json.loads(text)


def glb_organisation(glb_bytes: int, bytes_per_cycle: int, freq_hz: float = FREQ_HZ) -> tuple[int, int]:
    """(banks, bank width in bytes) with ``banks * width == bytes_per_cycle`` whose CACTI banks cycle fastest
    (ties: fewer banks), as an architect would build a GLB of that bandwidth. When no organisation of the
    table cycles at ``freq_hz`` the GLB delivers less than ``bytes_per_cycle`` (phaze's bank-rate term;
    ZigZag's ports have no cycle time)."""
    from phaze.hardware.sram import default_sram_table, sram_macro

    t = default_sram_table()
    best = None
    for w in sorted({int(round(2 ** x)) for x in t.log_width}):
        b = bytes_per_cycle // w
        if b < 1 or b * w != bytes_per_cycle or b > 2 ** t.log_banks[-1]:
            continue
        try:
            cycle = sram_macro(glb_bytes, b, w, 1).cycle_time_s
        except ConfigError:  # CACTI builds no such bank
            continue
        key = (min(1.0, 1.0 / (cycle * freq_hz)), -b)
        if best is None or key > best[0]:
            best = (key, b, w)
    if best is None:
        raise ConfigError(f"chip panel: no GLB of {glb_bytes} B delivers {bytes_per_cycle} B/cycle from the "
                          f"CACTI table's banks")
    return best[1], best[2]


def panel_accelerator(case: dict) -> Accelerator:
    """The phaze chip of a panel case: one tensor core of the case's array with its operand buffer and
    accumulator, a GLB of the case's capacity whose banks deliver ``glb_bytes_per_cycle``
    (:func:`glb_organisation`) through a crossbar link as wide, HBM at ``hbm_bytes_per_cycle``. The template
    needs a vector core; it gets one lane, and idle it takes no bandwidth (an op alone has all of the GLB and HBM,
    phaze.cost.onchip). Template fields this version of the Accelerator
    lacks are left out (the paper's template has unlimited GLB bandwidth). The only place that maps a case
    onto the template: change it when the template changes.

    A case with ``cores`` (issue 34 item 1b) is the same per-core block on that many cores: each core gets
    the case's GLB banks and bandwidth (the GLB has ``cores`` times the banks, every core a crossbar link
    of ``glb_bytes_per_cycle``) and HBM rate, and :func:`panel_gemm` is the GEMM of ``cores`` such column
    blocks side by side (N x cores), which phaze splits one column block per core; ZigZag ran one core's
    block at one core's bandwidth.

    No input staging (issue 34 item 1d): ``scripts/chip_panel.py``'s ZigZag core streams inputs from the GLB's
    port into the array, a whole port word per row, as phaze's unstaged core does."""
    have = {f.name for f in fields(Accelerator)}
    bw = int(case["glb_bytes_per_cycle"])
    cores = panel_cores(case)
    kw = dict(name=f"panel {case['name']}", num_tc=cores, tc_rows=int(case["rows"]), tc_cols=int(case["cols"]),
              # one vector core of one lane: a panel case is its tensor cores alone (the template needs a vector
              # core; an op alone has all of the GLB/HBM bandwidth, phaze.cost.onchip)
              num_vc=1, vc_width=1, glb_bytes=int(case["glb_bytes"]), hbm_bytes=32 * _GiB,
              hbm_bandwidth_Bps=cores * float(case["hbm_bytes_per_cycle"]) * FREQ_HZ, freq_hz=FREQ_HZ,
              bytes_per_element=int(case["bytes_per_element"]))
    if "glb_banks" in have:
        banks, width = glb_organisation(int(case["glb_bytes"]), bw)
        kw.update(glb_banks=cores * banks, glb_bank_width_bytes=width, tc_operand_bytes=int(case["operand_buffer_bytes"]),
                  tc_acc_bytes=int(case["accumulator_bytes"]), noc="crossbar", noc_link_bytes=bw)
    if "input_staging" in have:  # ZigZag's configuration reads inputs straight from the GLB port: no staging
        kw["input_staging"] = False
    return Accelerator(**kw)


@dataclass(frozen=True)
class ChipCase:
    name: str
    source: str
    rows: int
    cols: int
    m: int
    k: int
    n: int
    glb_bytes_per_cycle: int
    phaze_cycles: float
    zigzag_cycles: float | None  # None: the tool run failed or was not run (see the panel file)
    scalesim_cycles: float | None
    zigzag_error_pct: float | None  # signed: (phaze - tool) / tool * 100
    scalesim_error_pct: float | None
    zigzag_v3_cycles: float | None = None  # ZigZag under configuration 3's row rule alone (None: not stored)
    zigzag_v3_error_pct: float | None = None


@dataclass(frozen=True)
class ChipValidationReport:
    tools: dict
    command: str
    cases: tuple[ChipCase, ...]
    zigzag_mean_abs_pct: float
    zigzag_max_abs_pct: float
    scalesim_mean_abs_pct: float
    scalesim_max_abs_pct: float
    zigzag_cases: int
    scalesim_cases: int
    goal_met: bool  # every case within GOAL_MAX_PCT of ZigZag and the mean within GOAL_MEAN_PCT
    zigzag_within_goal: int = 0  # cases within GOAL_MAX_PCT of ZigZag
    zigzag_v3: dict | None = None  # the same statistics against configuration 3's reference (or None)

    def to_dict(self) -> dict:
        return {"tools": self.tools, "command": self.command,
                "cases": [c.__dict__ for c in self.cases],
                "zigzag_mean_abs_pct": self.zigzag_mean_abs_pct, "zigzag_max_abs_pct": self.zigzag_max_abs_pct,
                "scalesim_mean_abs_pct": self.scalesim_mean_abs_pct,
                "scalesim_max_abs_pct": self.scalesim_max_abs_pct,
                "zigzag_cases": self.zigzag_cases, "scalesim_cases": self.scalesim_cases,
                "zigzag_within_goal": self.zigzag_within_goal, "zigzag_v3": self.zigzag_v3,
                "goal": {"max_abs_pct": GOAL_MAX_PCT, "mean_abs_pct": GOAL_MEAN_PCT, "met": self.goal_met}}


def panel_cores(case: dict) -> int:
    """Tensor cores of the case (1 unless it gives ``cores``: the same per-core block on that many cores)."""
    c = case.get("cores", 1)
    if not isinstance(c, int) or isinstance(c, bool) or c < 1:
        raise ConfigError(f"chip panel case {case.get('name', '?')!r}: cores must be a positive integer, got {c!r}")
    return c


def panel_gemm(case: dict) -> Gemm:
    """The case's GEMM, (M x K) @ (K x N x cores): the slice one core owns, side by side on ``cores`` cores."""
    return Gemm(name=case["name"], batch=int(case.get("batch", 1)), m=int(case["m"]),
                n=int(case["n"]) * panel_cores(case), k=int(case["k"]), bytes_per_element=int(case["bytes_per_element"]))


def phaze_cycles(case: dict) -> float:
    """Cycles phaze predicts for the case's GEMM on :func:`panel_accelerator` (on its ``cores`` cores)."""
    acc = panel_accelerator(case)
    return float(gemm_latency_s(panel_gemm(case), acc.as_arrays(), cores=panel_cores(case))[0]) * acc.freq_hz


def phaze_schedule_choice(case: dict) -> tuple[str, int]:
    """The schedule :func:`phaze_cycles` costs: the orientation ("m": the M side's rows stream, "n": the
    transposed product's) and the accumulator pass split (``phaze.cost.gemm_chip.PASS_SPLITS``)."""
    t = gemm_terms(panel_gemm(case), panel_accelerator(case).as_arrays(), panel_cores(case))
    return ("m" if bool(t["streams_m"][0]) else "n"), int(t["pass_split"][0])


def _tool(case: dict, tool: str) -> float | None:
    r = case.get(tool) or {}
    c = r.get("cycles")
    return float(c) if isinstance(c, (int, float)) and c > 0 else None


def _err(pred: float, ref: float | None) -> float | None:
    return None if ref is None else (pred - ref) / ref * 100.0


def validate_chip(panel: dict | None = None) -> ChipValidationReport:
    """phaze vs ZigZag vs SCALE-Sim cycles per panel case (default: the packaged panel), with signed %
    errors, mean and max |error| per tool, and whether the ZigZag goal is met."""
    panel = panel if panel is not None else load_panel()
    try:
        raw = panel["cases"]
    except (KeyError, TypeError):
        raise ConfigError("chip panel: expected a mapping with a 'cases' list (scripts/chip_panel.py writes it)") from None
    out = []
    for c in raw:
        try:
            p = phaze_cycles(c)
            zz, ss, z3 = _tool(c, "zigzag"), _tool(c, "scalesim"), _tool(c, "zigzag_v3")
            out.append(ChipCase(c["name"], c.get("source", ""), int(c["rows"]), int(c["cols"]), int(c["m"]),
                                int(c["k"]), int(c["n"]), int(c["glb_bytes_per_cycle"]), p, zz, ss,
                                _err(p, zz), _err(p, ss), z3, _err(p, z3)))
        except KeyError as e:
            raise ConfigError(f"chip panel case {c.get('name', '?')!r}: missing field {e.args[0]!r}") from None
    zmean, zmax, zn, zin = error_stats([c.zigzag_error_pct for c in out])
    smean, smax, sn, _ = error_stats([c.scalesim_error_pct for c in out])
    v3 = None
    if any(c.zigzag_v3_error_pct is not None for c in out):
        m3, x3, n3, in3 = error_stats([c.zigzag_v3_error_pct for c in out])
        v3 = {"mean_abs_pct": m3, "max_abs_pct": x3, "cases": n3, "within_goal": in3}
    return ChipValidationReport(
        tools=dict(panel.get("tools", {})), command=str(panel.get("command", "")), cases=tuple(out),
        zigzag_mean_abs_pct=zmean, zigzag_max_abs_pct=zmax, scalesim_mean_abs_pct=smean,
        scalesim_max_abs_pct=smax, zigzag_cases=zn, scalesim_cases=sn,
        goal_met=zn > 0 and zn == len(out) and zmax <= GOAL_MAX_PCT and zmean <= GOAL_MEAN_PCT,
        zigzag_within_goal=zin, zigzag_v3=v3)


def error_stats(errs: list[float | None], max_pct: float = GOAL_MAX_PCT) -> tuple[float, float, int, int]:
    """(mean |error|, max |error|, cases with a tool figure, cases within ``max_pct``) of signed % errors."""
    a = [abs(e) for e in errs if e is not None]
    if not a:
        return float("nan"), float("nan"), 0, 0
    return sum(a) / len(a), max(a), len(a), sum(x <= max_pct for x in a)
