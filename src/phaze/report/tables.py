"""Terminal tables (rich) and engineering-notation formatting shared by every CLI command."""
from __future__ import annotations

from typing import Iterable, Sequence

from rich.console import Console
from rich.table import Table

_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")]


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """Format ``value`` with an SI prefix: si(1.5e-3, 's') == '1.5 ms'."""
    if value is None:
        return "-"
    if value == 0:
        return f"0 {unit}".strip()
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.2f} GiB"


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[object]], left: bool = False) -> Table:
    """Columns after the first are right-aligned (numbers) unless ``left`` (text)."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 or left else "right")
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


class _Console(Console):
    """rich's Console, but a closed pipe is a BrokenPipeError for the CLI to end on (rich itself exits 1)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def print_tables(*tables: Table, console: Console | None = None) -> None:
    """Print to stdout; when stdout is not a terminal, use a wide fixed width instead of wrapping at 80."""
    import sys
    console = console or (_Console() if sys.stdout.isatty() else _Console(width=200))
    for t in tables:
        console.print(t)
