"""``Recompute``: the one type a plan's recompute has from the CLI to the solvers (issue 15 item 5).

Canonical form, the edge parser, the plan-file round trip (CLI string -> Recompute -> to_dict -> from_dict),
old stored files, and a source check that no module sorts recompute values by their Python type any more.
"""
import ast
import json
from pathlib import Path

import pytest
from clirunner import run_phaze

import phaze
from phaze.errors import ConfigError
from phaze.placement import Plan, Recompute
from phaze.workload.runtime import PAPER_RUNTIME

# what an old Plan(...) without runtime keywords ran: standard attention, fp16, no DP overlap, no reserve
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)


def test_equal_modes_collapse_to_one():
    assert Recompute(("full", "full", "full")) == Recompute.uniform("full")
    assert Recompute(("full", "full")).per_stage == ("full",) and Recompute(("full", "full")).is_uniform
    mixed = Recompute(("full", "full", "none", "selective"))
    assert not mixed.is_uniform and mixed.stages == 4
    assert mixed.modes == ("full", "none", "selective")
    assert [mixed.mode_of(i) for i in range(4)] == ["full", "full", "none", "selective"]
    assert mixed.for_stages(4) == ("full", "full", "none", "selective")
    assert Recompute.uniform("selective").for_stages(3) == ("selective",) * 3
    assert mixed.describe() == "full*2/none/selective"
    assert Recompute.uniform("none").describe() == "none"
    assert mixed.to_json() == ["full", "full", "none", "selective"]
    assert Recompute.uniform("full").to_json() == "full"


@pytest.mark.parametrize("value, per_stage", [
    ("full", ("full",)),
    ("full,none", ("full", "none")),
    (" full , none ", ("full", "none")),
    (["selective", "none"], ("selective", "none")),
    (("none", "none"), ("none",)),
    (Recompute(("full", "none")), ("full", "none")),
])
def test_parse_accepts_every_outside_form(value, per_stage):
    assert Recompute.parse(value).per_stage == per_stage


@pytest.mark.parametrize("value, stages, msg", [
    ("some", None, "unknown mode 'some'"),
    (["full", "sometimes"], None, "unknown mode 'sometimes'"),
    (3, None, "expected a mode or a list of modes"),
    ([], None, "--recompute: give at least one mode"),
    ("full,full,full", 2, "give one mode or one per pipeline stage (2), got 3"),  # refused before collapsing
    (Recompute(("full", "none")), 4, "one per pipeline stage (4), got 2"),
])
def test_parse_refuses_with_one_line(value, stages, msg):
    with pytest.raises(ConfigError) as e:
        Recompute.parse(value, stages=stages, what="--recompute")
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_plan_takes_only_the_one_type():
    kw = dict(stages=((0, 2), (2, 4)), tp=1, dp=1, microbatch_size=1, num_microbatches=4)
    with pytest.raises(ConfigError, match="must be a Recompute"):
        Plan(**kw, recompute="full", runtime=PLAN_RUNTIME)
    with pytest.raises(ConfigError, match="must be a Recompute"):
        Plan(**kw, recompute=("full", "none"), runtime=PLAN_RUNTIME)
    with pytest.raises(ConfigError, match="3 per-stage recompute modes for 2 pipeline stages"):
        Plan(**kw, recompute=Recompute(("full", "none", "full")), runtime=PLAN_RUNTIME)
    assert Plan(**kw, runtime=PLAN_RUNTIME).recompute == Recompute.uniform("none")
    assert Plan(**kw, recompute=Recompute(("full", "none")), runtime=PLAN_RUNTIME).recompute_modes == ("full", "none")


def test_round_trip_cli_string_to_plan_file_and_back(capsys):
    """`phaze evaluate --recompute full,full,none,none --json` writes the per-stage list; read back it is the
    plan the API builds from the same string; a uniform request writes the plain string as before."""
    argv = ("evaluate", "--model", "bert-large", "--accelerator", "a100-80g", "--devices", "4",
            "--global-batch", "8", "--tp", "1", "--pp", "4", "--dp", "1", "--mbs", "1", "--json", "--recompute")
    for flag, stored in (("full,full,none,none", ["full", "full", "none", "none"]), ("full", "full"),
                         ("full,full,full,full", "full")):
        code, out, err = run_phaze(capsys, *argv, flag)
        assert code == 0, err
        d = json.loads(out)
        assert d["recompute"] == stored
        again = Plan.from_dict(d)
        built = phaze.api.evaluate_plan("bert-large", "a100-80g", 4, 8,
                                          phaze.api.PlanShape(tp=1, pp=4, dp=1, mbs=1, recompute=flag)).plan
        assert again == built and again.recompute == Recompute.parse(flag)
        assert [s["recompute"] for s in d["stage_breakdown"]] == list(again.recompute_modes)
        assert Plan.from_dict(json.loads(json.dumps(again.to_dict()))) == again


def test_old_plan_files_still_read():
    """Files written before the type: a per-stage list whose modes all agree (an old evaluate run), and a
    plan without a recompute key read as "none"."""
    d = Plan.balanced(4, 2, 1, 1, 1, 4, recompute=Recompute(("full", "none")), runtime=PLAN_RUNTIME).to_dict()
    old = dict(d, recompute=["full", "full"])
    assert Plan.from_dict(old).recompute == Recompute.uniform("full")
    assert Plan.from_dict(old).to_dict()["recompute"] == "full"
    no_key = {k: v for k, v in d.items() if k != "recompute"}
    assert Plan.from_dict(no_key).recompute == Recompute.uniform("none")
    with pytest.raises(ConfigError, match="plan: recompute: unknown mode 'sometimes'"):
        Plan.from_dict(dict(d, recompute="sometimes"))


# Names a recompute value goes by in src/ (a plan's field, locals in solvers and loaders).
_RECOMPUTE_NAMES = ("recompute", "rc", "mode", "modes")


def type_sorting_sites(root: Path) -> list[str]:
    """file:line of every ``isinstance(<recompute value>, ...)`` under ``root``, except checks against
    ``Recompute`` itself (a type check, not a sort). The one place outside values are sorted by type is the
    edge parser ``Recompute.parse``, whose argument is named ``value``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"
                    and len(node.args) == 2):
                continue
            names = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.args[0]) if isinstance(n, ast.Attribute)}
            names |= {n.value for n in ast.walk(node.args[0]) if isinstance(n, ast.Constant)}
            if not names & set(_RECOMPUTE_NAMES):
                continue
            if isinstance(node.args[1], ast.Name) and node.args[1].id == "Recompute":
                continue
            out.append((str(path.relative_to(root)), node.lineno))
    return [f"{f}:{line}" for f, line in sorted(out)]


def test_no_module_sorts_recompute_by_type():
    src = Path(phaze.__file__).resolve().parent
    assert type_sorting_sites(src) == []


def test_the_source_check_finds_the_old_forms(tmp_path):
    """The check is not vacuous: each of the forms the tree used before the type is reported."""
    (tmp_path / "old.py").write_text(
        "def f(plan, kw, rc, found, recompute):\n"
        "    a = plan.recompute if isinstance(plan.recompute, str) else list(plan.recompute)\n"
        "    b = isinstance(kw.get('recompute'), list)\n"
        "    c = rc if isinstance(rc, str) else tuple(rc)\n"
        "    d = isinstance(found[0].recompute, str)\n"
        "    e = not isinstance(recompute, str)\n"
        "    g = isinstance(plan.tp, int)\n")
    assert type_sorting_sites(tmp_path) == [f"old.py:{i}" for i in (2, 3, 4, 5, 6)]
