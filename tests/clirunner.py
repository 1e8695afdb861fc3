"""Run the `phaze` command in-process (shared by the CLI tests; tests/conftest.py wraps it as ``cli``)."""
from phaze.cli import main


def run_phaze(capsys, *argv):
    """(exit code, stdout, stderr) of ``phaze *argv``; argparse usage errors give their exit code too."""
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
