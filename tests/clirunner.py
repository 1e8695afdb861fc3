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


# A small data-parallel plan of GPT-2 XL on 8 A100s with ZeRO-1: the CLI tests of a runtime flag evaluate it
# with and without the flag.
EVALUATE_GPT2_XL = ("evaluate", "--model", "gpt2-xl", "--accelerator", "a100-80g", "--devices", "8",
                    "--global-batch", "64", "--tp", "1", "--pp", "1", "--dp", "8", "--mbs", "2", "--zero1")


def evaluate_json_pair(capsys, *flag):
    """``phaze evaluate ... --json`` of ``EVALUATE_GPT2_XL`` with ``flag`` and without: (with, without) dicts."""
    import json

    out = []
    for extra in (flag, ()):
        code, text, err = run_phaze(capsys, *EVALUATE_GPT2_XL, *extra, "--json")
        assert code == 0, err
        out.append(json.loads(text))
    return tuple(out)
