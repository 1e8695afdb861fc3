"""A plan's activation recompute: the one type from the CLI to the solvers.

``Recompute.per_stage`` holds one mode per pipeline device stage, or a single mode that every stage uses.
Canonical: modes that all agree collapse to that one mode, so two plans that recompute alike compare equal
and a plan file keeps writing the plain string (``to_json``). Values from outside (a CLI flag, an API
argument, a stored plan) become a Recompute in one place, ``Recompute.parse``; everything downstream
takes only this type.
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.errors import ConfigError
from phaze.workload.config import RECOMPUTE_MODES


@dataclass(frozen=True)
class Recompute:
    """Activation recompute of a plan's pipeline stages (see the module docstring)."""

    per_stage: tuple[str, ...]

    def __post_init__(self) -> None:
        modes = tuple(self.per_stage)
        if not modes:
            raise ConfigError("recompute: give at least one mode")
        for m in modes:
            if m not in RECOMPUTE_MODES:
                raise ConfigError(f"recompute must be one of {', '.join(RECOMPUTE_MODES)}, got {m!r}")
        if len(set(modes)) == 1:
            modes = modes[:1]
        object.__setattr__(self, "per_stage", modes)

    @classmethod
    def uniform(cls, mode: str) -> "Recompute":
        """The same mode on every pipeline stage."""
        return cls((mode,))

    @classmethod
    def parse(cls, value: "Recompute | str | list[str] | tuple[str, ...]", stages: int | None = None,
              what: str = "recompute") -> "Recompute":
        """The edge: a Recompute as it is; a string "full" (every stage) or "full,none" (one per stage, as
        the CLI and plan files write it); a sequence of modes. ``stages``: the pipeline depth, when known,
        so a count of modes other than 1 or ``stages`` is refused before equal modes collapse."""
        if isinstance(value, Recompute):
            modes = value.per_stage
        elif isinstance(value, str):
            modes = tuple(m.strip() for m in value.split(","))
        elif isinstance(value, (list, tuple)):
            modes = tuple(value)
        else:
            raise ConfigError(f"{what}: expected a mode or a list of modes ({', '.join(RECOMPUTE_MODES)}), "
                              f"got {value!r}")
        if not modes:
            raise ConfigError(f"{what}: give at least one mode ({', '.join(RECOMPUTE_MODES)})")
        if stages is not None and len(modes) not in (1, stages):
            raise ConfigError(f"{what}: give one mode or one per pipeline stage ({stages}), got {len(modes)}")
        for m in modes:
            if m not in RECOMPUTE_MODES:
                raise ConfigError(f"{what}: unknown mode {m!r}; use {', '.join(RECOMPUTE_MODES)}")
        return cls(modes)

    @property
    def is_uniform(self) -> bool:
        """Every stage uses the same mode."""
        return len(self.per_stage) == 1

    @property
    def stages(self) -> int:
        """How many stages the modes are given for (1 when uniform: any pipeline depth)."""
        return len(self.per_stage)

    @property
    def modes(self) -> tuple[str, ...]:
        """The distinct modes used, in stage order."""
        return tuple(dict.fromkeys(self.per_stage))

    def mode_of(self, stage: int) -> str:
        """The mode of pipeline device stage ``stage``."""
        return self.per_stage[0] if self.is_uniform else self.per_stage[stage]

    def for_stages(self, pp: int) -> tuple[str, ...]:
        """One mode per stage of a ``pp``-deep pipeline."""
        return tuple(self.mode_of(i) for i in range(pp))

    def describe(self) -> str:
        """The mode, or the per-stage modes as runs, e.g. "full*2/none*6"."""
        runs: list[list] = []
        for mode in self.per_stage:
            if runs and runs[-1][0] == mode:
                runs[-1][1] += 1
            else:
                runs.append([mode, 1])
        return "/".join(mode if n == 1 else f"{mode}*{n}" for mode, n in runs)

    def to_json(self) -> str | list[str]:
        """The plain mode when every stage agrees (the stored format of plans), else the list per stage."""
        return self.per_stage[0] if self.is_uniform else list(self.per_stage)
