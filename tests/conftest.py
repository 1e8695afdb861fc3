"""Shared test fixtures."""
import pytest

from clirunner import run_phaze


@pytest.fixture
def cli(capsys):
    """cli(*argv) -> (exit code, stdout, stderr) of the `phaze` command run in-process."""
    return lambda *argv: run_phaze(capsys, *argv)


@pytest.fixture(autouse=True)
def _fresh_one_row_chips(monkeypatch):
    """Each test starts without ``Accelerator.as_arrays``'s per-process chips: their memoized figures (SRAM
    macros, port rates) would otherwise carry a value derived before another test's monkeypatch into it."""
    import phaze.hardware.accelerator as hw

    monkeypatch.setattr(hw, "_ONE_ROW", {})
