"""Progress of long steps (bounding, exact evaluation, validation, reproduce) on stderr.

On a terminal: a ``rich`` bar with counts, rate, elapsed time and ETA. When stderr is not a terminal
(a log file, CI): one line when a stage starts and one when it ends, nothing in between. ``quiet``:
nothing at all. Every stage may import this (like ``phaze.errors``); it depends on nothing in phaze.
"""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """One reporter for a run; ``stage(label, total)`` opens a bar (or a line), ``advance``/``update`` move
    it, ``done`` closes it. ``note`` prints one line (a phase without a count)."""

    def __init__(self, quiet: bool = False, prefix: str = "phaze", stream: TextIO | None = None,
                 tty: bool | None = None) -> None:
        self.quiet = bool(quiet)
        self.prefix = prefix
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._bar = None
        self._task = None
        self._label = ""
        self._total = 0
        self._done = 0
        self._t0 = 0.0

    def note(self, text: str) -> None:
        if not self.quiet:
            print(f"{self.prefix}: {text}", file=self.stream, flush=True)

    def stage(self, label: str, total: int, unit: str = "items") -> "Progress":
        """Start a counted stage of ``total`` ``unit``; closes the previous one."""
        self.done()
        self._label, self._total, self._done, self._unit = label, int(total), 0, unit
        self._t0 = time.perf_counter()
        if self.quiet:
            return self
        if self.tty:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TaskProgressColumn,
                                       TextColumn, TimeElapsedColumn, TimeRemainingColumn)
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn(),
                                     TextColumn("ETA"), TimeRemainingColumn(),
                                     console=Console(file=self.stream), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(label, total=self._total, rate="")
        else:
            print(f"{self.prefix}: {label}: {self._total} {unit} ...", file=self.stream, flush=True)
        return self

    def update(self, completed: int, description: str | None = None) -> None:
        self._done = int(completed)
        if self._bar is not None:
            el = time.perf_counter() - self._t0
            rate = f"{self._done / el:.1f} {self._unit}/s" if el > 0 else ""
            self._bar.update(self._task, completed=self._done, rate=rate,
                             description=description if description is not None else self._label)

    def advance(self, n: int = 1, description: str | None = None) -> None:
        self.update(self._done + n, description)

    def done(self, summary: str = "") -> None:
        """Close the current stage (no-op when none is open)."""
        if not self._label:
            return
        el = time.perf_counter() - self._t0
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        if not self.quiet:
            extra = f"; {summary}" if summary else ""
            print(f"{self.prefix}: {self._label}: {self._done}/{self._total} {self._unit} in {el:.1f} s{extra}",
                  file=self.stream, flush=True)
        self._label = ""

    def close(self) -> None:
        """Stop a bar left open by an error (no summary line)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        self._label = ""
