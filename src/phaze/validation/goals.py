"""The validation goals, read from one packaged file (``data/goals.json``).

Each goal is a mean and a max |error| % (or neither, for a yes/no check such as "every published plan fits")
and the issue that set it. The GOAL_* constants of ``phaze.validation.chip`` and ``chip_energy`` and the
strict-xfail tests read them here, so a goal figure is written once.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

GOALS_FILE = "goals.json"


@dataclass(frozen=True)
class Goal:
    name: str
    what: str
    mean_abs_pct: float | None  # the mean |error| % must be at most this (None: not a percentage goal)
    max_abs_pct: float | None  # every case's |error| % must be at most this
    source: str  # the issue (or commit) that set it

    def met(self, mean_abs_pct: float, max_abs_pct: float) -> bool:
        """Both figures within the goal."""
        return mean_abs_pct <= self.mean_abs_pct and max_abs_pct <= self.max_abs_pct

    def text(self) -> str:
        """'5% mean / 10% max', as the reports and test reasons quote a goal."""
        return f"{self.mean_abs_pct:g}% mean / {self.max_abs_pct:g}% max"


def _pct(v) -> float | None:
    return None if v is None else float(v)


@lru_cache(maxsize=1)
def goals() -> dict[str, Goal]:
    """Every goal of the packaged file, by name."""
    data = json.loads(resources.files("phaze.validation").joinpath("data", GOALS_FILE).read_text())
    return {name: Goal(name, g["what"], _pct(g["mean_abs_pct"]), _pct(g["max_abs_pct"]), g["source"])
            for name, g in data["goals"].items()}


def goal(name: str) -> Goal:
    """One goal by name (KeyError naming the known goals otherwise)."""
    table = goals()
    if name not in table:
        raise KeyError(f"no validation goal {name!r}; known: {', '.join(sorted(table))}")
    return table[name]
