"""Shared test fixtures."""
import pytest

from phaze.cli import main


def run_phaze(capsys, *argv):
    """Run the `phaze` command in-process: (exit code, stdout, stderr)."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cli(capsys):
    """cli(*argv) -> (exit code, stdout, stderr) of the `phaze` command run in-process."""
    return lambda *argv: run_phaze(capsys, *argv)
