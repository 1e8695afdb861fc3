"""The CLI states its assumptions: every option's help gives its default; search and plan print their
setting before any work; arch explains its axes and the area window; progress is one line per stage off a
terminal and nothing with --quiet."""
import argparse
import io
import re

import pytest

from phaze.cli import build_parser
from phaze.progress import Progress



def options():
    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            yield name, a


def test_every_option_has_help_that_states_its_default():
    missing, no_default = [], []
    for cmd, a in options():
        label = f"{cmd} {a.option_strings or a.dest}"
        if not a.help:
            missing.append(label)
            continue
        if a.option_strings and not a.required and "default" not in a.help:
            no_default.append(label)  # every optional flag says what happens when it is not given
    assert missing == [] and no_default == []


def test_help_defaults_match_the_parser():
    """A stated default that is a plain value must be the one argparse uses."""
    wrong = []
    for cmd, a in options():
        if not a.option_strings or a.default in (None, False) or not a.help:
            continue
        d = a.default if not isinstance(a.default, tuple) else ",".join(map(str, a.default))
        if f"default: {d}" not in a.help and f"default: {d}," not in a.help:
            wrong.append(f"{cmd} {a.option_strings[0]}: default {d!r}, help {a.help!r}")
    assert wrong == []


def test_plan_prints_its_setting_before_the_answer(cli):
    code, out, err = cli("plan", "--model", "gpt2-xl", "--accelerator", "a100-80g", "--devices", "16",
                         "--global-batch", "64", "--mbs", "1,2")
    assert code == 0, err
    setting = out.index("setting")
    assert setting < out.index("best plan and alternatives")
    head = out[setting:out.index("best plan and alternatives")]
    for word in ("gpt2-xl", "a100-80g", "devices", "16", "global batch", "64", "dgx-a100", "nvlink", "infiniband",
                 "1, 2", "kernels one after another"):
        assert word in head, word


def test_search_prints_its_setting_first(cli, tmp_path):
    (tmp_path / "m.yaml").write_text("name: tiny\nnum_layers: 4\nhidden: 256\nheads: 4\nffn: 1024\nvocab: 2000\n"
                                     "seq_len: 128\nmax_tp: 2\n")
    (tmp_path / "s.yaml").write_text("num_tc: [1, 4, 16]\nnum_vc: [1, 4]\ntc_widths: [16, 64]\ntc_depths: [16, 64]\n"
                                     "glb_mib: [2, 32]\ntemplate: paper\n")
    code, out, err = cli("search", "--model", str(tmp_path / "m.yaml"), "--space", str(tmp_path / "s.yaml"),
                         "--devices", "16", "--global-batch", "32", "--mbs", "1,2", "--hbm-gib", "1,2",
                         "--store", str(tmp_path / "r.db"), "--workers", "1")
    assert code == 0, err
    head = out[:out.index("candidates (chips x HBM sizes)")]
    for word in ("setting (what this search assumes)", "tiny", "16", "32", "flat-4gib", "4.295 GB/s",
                 "tensor cores (num_tc)", "1, 4, 16", "0.3 x budget <= area <= budget", "83.65 to 278.83 mm^2",
                 "33 chips kept of 48 raw points", "HBM sizes (GiB)", "1, 2", "recompute none, full"):
        assert word in head, word
    # the winner's MFU and the devices its plan uses, in the terminal too (not only in the JSON export)
    assert "MFU" in out and re.search(r"\b\d+(\.\d)?% \S* *\d+ of 16\b", out.replace("│", " "))


def test_an_empty_space_fails_before_a_store_is_written(cli, tmp_path):
    code, out, err = cli("search", "--model", "gpt2-xl", "--store", str(tmp_path / "r.db"),
                         "--budget-mm2", "1")
    assert code == 2 and "0.30 to 1.00 mm^2" in err and "raise --budget-mm2" in err
    assert not (tmp_path / "r.db").exists()


def test_arch_explains_the_budget(cli):
    import json
    code, out, err = cli("arch", "--space", "paper", "--budget-mm2", "800", "--json")
    d = json.loads(out)
    assert d["axes"]["num_tc"][0] == 1 and d["axes"]["num_tc"][-1] == 4096 and d["axes"]["glb_mib"] == [2, 4, 8, 16, 32, 64, 128]
    assert d["lower_bound_mm2"] == pytest.approx(240.0)
    code, out, err = cli("arch", "--space", "paper", "--budget-mm2", "800")
    assert "240.00 to 800.00 mm^2" in out and "FEWER chips" in out and "19,325 of 75,712" in out


def test_progress_off_a_terminal_is_one_line_per_stage():
    buf = io.StringIO()
    p = Progress(prefix="t", stream=buf, tty=False)
    p.stage("bounding", 3, "settings")
    for _ in range(3):
        p.advance()
    p.done("all bounded")
    lines = buf.getvalue().splitlines()
    assert lines[0] == "t: bounding: 3 settings ..."
    assert lines[1].startswith("t: bounding: 3/3 settings in ") and lines[1].endswith("; all bounded")
    assert len(lines) == 2


def test_progress_quiet_prints_nothing_and_a_terminal_gets_a_bar():
    buf = io.StringIO()
    p = Progress(quiet=True, stream=buf, tty=True)
    p.stage("x", 5)
    p.advance(5)
    p.done()
    assert buf.getvalue() == ""
    p = Progress(stream=buf, tty=True)
    p.stage("exact evaluation", 4, "candidates")
    assert p._bar is not None  # a rich bar with counts, rate and ETA columns
    cols = " ".join(type(c).__name__ for c in p._bar.columns)
    assert "MofNCompleteColumn" in cols and "TimeRemainingColumn" in cols
    p.advance(4)
    p.done()
    assert "exact evaluation: 4/4 candidates" in buf.getvalue()


def test_validate_quiet_and_not(cli):
    code, out, err = cli("validate", "--quiet")
    assert code == 0 and err == ""
    code, out, err = cli("validate")
    assert code == 0 and "phaze validate: validating against published measurements" in err
