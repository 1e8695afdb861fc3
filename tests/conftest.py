"""Shared test fixtures."""
import pytest

from clirunner import run_phaze


@pytest.fixture
def cli(capsys):
    """cli(*argv) -> (exit code, stdout, stderr) of the `phaze` command run in-process."""
    return lambda *argv: run_phaze(capsys, *argv)
