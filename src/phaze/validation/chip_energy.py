"""phaze's GEMM energy against ZigZag's minimum-energy mapping on the same core (``validate --chip``).

The panel (``data/chip_energy_panel.json``, made by ``scripts/chip_energy_panel.py``) holds the latency
panel's cases (``phaze.validation.chip``) with the energies phaze charges on each case's core -- the MAC,
an operand-buffer and an accumulator row read and written, a GLB byte read and written -- and what ZigZag
reports under exactly those costs for its minimum-energy mapping (both operand orientations). The
constants are shared, so the comparison checks the counting: how many GLB bytes, accumulator rows and
weight rows a GEMM moves (``phaze.cost.gemm_chip``'s schedule, ``phaze.cost.energy.gemm_energy_parts_j``).
phaze's wires (NoC) and HBM terms have no ZigZag counterpart here (operands are resident in the GLB, and
ZigZag has no interconnect energy) and are left out of both sides.

The reference is ZigZag run on phaze's own schedule (the loop order and blocking of
``phaze.cost.gemm_chip`` for one core, given to ZigZag as its temporal ordering, in the orientation
phaze's latency model streams, ``streams_m``): the same schedule, the same constants, two counts. Where
ZigZag cannot take phaze's loops whole (K not a multiple of the array's rows) the reference is ZigZag's
minimum-energy search in that orientation. ``min_error_pct`` reports phaze against the lowest energy
ZigZag's searches found in either orientation: what a schedule chosen for energy rather than time would
save. phaze below its reference means phaze gives some movement away for free (the defect this check is
for). Goal (``ENERGY_GOAL_*``): every case within 15% of ZigZag, the mean within 5%, as for the latency.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from phaze.errors import ConfigError
from phaze.validation.chip import error_stats
from phaze.validation.goals import goal

ENERGY_PANEL_FILE = "chip_energy_panel.json"
ONE_PASS = (1,)  # the pass split of the schedules the panel's ZigZag runs were made on
ENERGY_GOAL_MAX_PCT = goal("chip_gemm_energy").max_abs_pct  # data/goals.json
ENERGY_GOAL_MEAN_PCT = goal("chip_gemm_energy").mean_abs_pct
# phaze's energy parts and the ZigZag memory each is compared with (None: ZigZag's MAC energy)
COMPARED_PARTS = {"mac": None, "glb": "glb", "accumulator": "accumulator", "operand_buffer": "operand_buffer"}


@lru_cache(maxsize=1)
def load_energy_panel() -> dict:
    """The packaged energy panel: tool version, the command that made it, the cases with ZigZag's energies."""
    return json.loads(resources.files("phaze.validation").joinpath("data", ENERGY_PANEL_FILE).read_text())


def energy_costs_pj(case: dict) -> dict:
    """phaze's energies on the case's chip in pJ, as ZigZag's costs (scripts/chip_energy_panel.py): per MAC,
    per operand-buffer and accumulator row read and written, per GLB byte read and written."""
    from phaze.hardware.power import MAC_J, energy_parts
    from phaze.validation.chip import panel_accelerator

    p = energy_parts(panel_accelerator(case).as_arrays())
    one = lambda key: float(p[key][0]) * 1e12  # noqa: E731
    return {"mac": MAC_J * 1e12, "operand_row_read": one("operand_row_read_J"),
            "operand_row_write": one("operand_row_write_J"), "acc_row_read": one("acc_row_read_J"),
            "acc_row_write": one("acc_row_write_J"), "glb_read_per_byte": one("glb_read_J_per_B"),
            "glb_write_per_byte": one("glb_write_J_per_B")}


@dataclass(frozen=True)
class EnergyCase:
    name: str
    stream: str  # the orientation phaze's schedule streams: "m" (A's rows) or "n" (the transposed product)
    phaze_pj: dict  # per compared part (COMPARED_PARTS), pJ
    zigzag_pj: dict | None  # the same parts from ZigZag on phaze's schedule, else its best mapping in phaze's
    # orientation (None: no run)
    zigzag_min_pj: float | None = None  # the lowest total ZigZag's searches found, either orientation
    reference: str = "schedule"  # what zigzag_pj is: "schedule" (phaze's, given) or "search" (ZigZag's best)

    @property
    def min_error_pct(self) -> float | None:
        z = self.zigzag_min_pj
        return None if not z else (self.phaze_total_pj - z) / z * 100.0

    @property
    def phaze_total_pj(self) -> float:
        return sum(self.phaze_pj.values())

    @property
    def zigzag_total_pj(self) -> float | None:
        return None if self.zigzag_pj is None else sum(self.zigzag_pj.values())

    @property
    def error_pct(self) -> float | None:
        z = self.zigzag_total_pj
        return None if not z else (self.phaze_total_pj - z) / z * 100.0

    def to_dict(self) -> dict:
        return {"name": self.name, "stream": self.stream, "reference": self.reference,
                "phaze_pj": self.phaze_pj, "zigzag_pj": self.zigzag_pj,
                "phaze_total_pj": self.phaze_total_pj, "zigzag_total_pj": self.zigzag_total_pj,
                "error_pct": self.error_pct, "zigzag_min_pj": self.zigzag_min_pj,
                "min_error_pct": self.min_error_pct}


@dataclass(frozen=True)
class EnergyReport:
    tool: str
    command: str
    cases: tuple[EnergyCase, ...]
    mean_abs_pct: float
    max_abs_pct: float
    lowest_pct: float  # the most negative error: phaze counting less than ZigZag (movement given away)
    within_goal: int
    goal_met: bool

    def to_dict(self) -> dict:
        return {"tool": self.tool, "command": self.command, "cases": [c.to_dict() for c in self.cases],
                "mean_abs_pct": self.mean_abs_pct, "max_abs_pct": self.max_abs_pct,
                "lowest_pct": self.lowest_pct, "within_goal": self.within_goal,
                "goal": {"max_abs_pct": ENERGY_GOAL_MAX_PCT, "mean_abs_pct": ENERGY_GOAL_MEAN_PCT,
                         "met": self.goal_met}}


def phaze_energy_pj(case: dict) -> tuple[dict, str]:
    """phaze's energy (pJ) of the case's GEMM on its one-core chip, per compared part, and the orientation
    its schedule streams ("m" or "n")."""
    from phaze.cost.energy import gemm_energy_parts_j
    from phaze.cost.gemm import gemm_terms
    from phaze.validation.chip import panel_accelerator, panel_gemm

    g, arch = panel_gemm(case), panel_accelerator(case).as_arrays()
    # the one-pass schedule (no pass split) scripts/chip_energy_panel.py gave ZigZag
    parts = gemm_energy_parts_j(g, arch, 1, ONE_PASS)
    stream = "m" if bool(gemm_terms(g, arch, 1, ONE_PASS)["streams_m"][0]) else "n"
    return {p: float(parts[p][0]) * 1e12 for p in COMPARED_PARTS}, stream


def _zigzag_pj(run: dict | None) -> dict | None:
    if not run or "error" in run:
        return None
    mem = run["memory_pj"]
    return {p: float(run["mac_pj"]) if m is None else float(mem.get(m, 0.0)) for p, m in COMPARED_PARTS.items()}


def _energy_case(c: dict) -> EnergyCase:
    """One case. ZigZag's runs: "schedule" (phaze's own schedule given as the temporal ordering, no search:
    the reference when ZigZag can take its loops whole), "m" and "n" (each orientation's minimum-energy
    search at ZigZag's default depth) and "deep" (phaze's orientation searched deeper, when the panel has
    it). Without a schedule run the reference is the best search result in phaze's orientation."""
    phaze, stream = phaze_energy_pj(c)
    runs = c.get("zigzag") or {}
    sched = _zigzag_pj(runs.get("schedule"))
    found = [z for z in (_zigzag_pj(runs.get(stream)),
                         _zigzag_pj(runs.get("deep")) if (runs.get("deep") or {}).get("stream") == stream else None)
             if z]
    ref = sched or (min(found, key=lambda z: sum(z.values())) if found else None)
    searched = [sum(z.values()) for z in (_zigzag_pj(runs.get(s)) for s in ("m", "n", "deep")) if z]
    return EnergyCase(c["name"], stream, phaze, ref, min(searched) if searched else None,
                      "schedule" if sched else "search")


def validate_chip_energy(panel: dict | None = None) -> EnergyReport:
    """phaze vs ZigZag energy per case of the energy panel (default: the packaged one)."""
    panel = panel if panel is not None else load_energy_panel()
    try:
        raw = panel["cases"]
    except (KeyError, TypeError):
        raise ConfigError("chip energy panel: expected a mapping with a 'cases' list "
                          "(scripts/chip_energy_panel.py writes it)") from None
    cases = []
    for c in raw:
        try:
            cases.append(_energy_case(c))
        except KeyError as e:
            raise ConfigError(f"chip energy panel case {c.get('name', '?')!r}: missing field {e.args[0]!r}") from None
    errs = [c.error_pct for c in cases if c.error_pct is not None]
    mean, mx, n, within = error_stats(errs, ENERGY_GOAL_MAX_PCT)
    return EnergyReport(tool=str(panel.get("tools", {}).get("zigzag-dse", "?")), command=str(panel.get("command", "")),
                        cases=tuple(cases), mean_abs_pct=mean, max_abs_pct=mx,
                        lowest_pct=min(errs) if errs else float("nan"), within_goal=within,
                        goal_met=n > 0 and n == len(cases) and mx <= ENERGY_GOAL_MAX_PCT
                        and mean <= ENERGY_GOAL_MEAN_PCT)
