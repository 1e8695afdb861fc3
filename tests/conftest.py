"""Fixtures shared by the test packages."""
import pytest

from phaze.cli import main


@pytest.fixture
def phaze_cli(capsys):
    """Run `phaze ARGV...` in-process: (exit code, stdout, stderr); argparse usage errors give their code."""
    def run(*argv):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err
    return run
