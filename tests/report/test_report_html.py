"""The HTML report: self-contained, complete, and its numbers agree with the search and plan they draw."""
import json
import math
import re
import sys

import pytest

from phaze import api
from phaze.errors import ConfigError
from phaze.report.details import iteration_parts
from phaze.search.details import search_details
from phaze.report.html_figures import busy_shares
from phaze.report.html import check_output_path, search_report_html, write_search_report
from phaze.report.html_reproduce import reproduce_report_html
from phaze.report.svg import nice_ticks

SECTIONS = ("answer", "assumptions", "versus", "pareto", "plan", "schedule", "counts")



def assert_self_contained(html: str) -> None:
    """No file or address the page would have to fetch: no src/href to anything but an in-page anchor."""
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html)
    assert not re.search(r"\bsrc\s*=", html)
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', html))
    assert "@import" not in html and "url(" not in html
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {"http://www.w3.org/2000/svg"}


def assert_charts_labelled(html: str) -> None:
    svgs = re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
    assert svgs
    for s in svgs:
        assert 'class="ttl"' in s  # a title
        assert "<title>" in s  # hover details on the marks
        assert re.search(r'aria-label="[^"]+"', s)


def test_search_report_is_complete_and_self_contained(tiny_search, tmp_path):
    res, rows = tiny_search
    path = write_search_report(res, str(tmp_path / "r.html"), rows, search_details(res.spec, res.best))
    html = open(path, encoding="utf-8").read()
    assert_self_contained(html)
    assert_charts_labelled(html)
    for key in SECTIONS:
        assert f'<section id="{key}">' in html
    b = res.best
    assert f"{b.num_tc} tensor cores of {b.tc_rows}x{b.tc_cols}" in html
    assert "chip area (mm^2)" in html and "score (throughput / TPUv4-like best plan)" in html
    assert "TPUv4-like chip, best plan (score 1)" in html and ">winner<" in html
    assert "HBM capacity 1 GiB" in html or "HBM capacity 2 GiB" in html
    assert "Where the iteration time goes" in html and "tensor cores (" in html  # breakdown and Gantt lanes
    # the chip template has a power model: the winner and the front carry power_w, so the front against
    # power is drawn (the paper's template has none: see test_paper_space_report_says_no_power)
    assert b.power_w is not None and "Score against chip power" in html
    assert not (tmp_path / "r.html.part").exists()


def test_paper_space_report_says_no_power(tiny_search):
    """The paper's template has no power model (power_w None): the report says so instead of crashing."""
    res, rows = tiny_search
    from dataclasses import replace
    best = replace(res.best, power_w=None)
    html = search_report_html(replace(res, best=best), [replace(r, power_w=None) for r in rows], details=[])
    assert "no power figure" in html


def test_report_shows_power_when_rows_have_it(tiny_search):
    """A newer chip model adds power_w to each row: the report draws the front against power too."""
    res, rows = tiny_search
    from dataclasses import replace
    powered = [replace(r, power_w=100.0 + r.area_mm2) for r in rows]
    best = replace(res.best, power_w=100.0 + res.best.area_mm2,
                   outcomes=tuple(replace(o, explained=True, bound_by="compute") for o in res.best.outcomes))
    html = search_report_html(replace(res, best=best), powered, details=[])
    assert "Score against chip power" in html and "chip power (W)" in html
    assert "bound_by compute" in html


def test_winner_evaluated_again_matches_the_store(tiny_search):
    """Two routes to the winner's throughput: the search's exact evaluation, and the report's rebuild of the
    chip from the stored space and of the plan from its JSON through placement.evaluate."""
    res, _ = tiny_search
    (d,) = search_details(res.spec, res.best)
    assert d.evaluation["throughput_seq_per_s"] == pytest.approx(d.stored_seq_per_s, rel=1e-9)
    assert d.accelerator.num_tc == res.best.num_tc and d.accelerator.hbm_bytes == res.best.hbm_gib * 2**30
    for g in d.schedules:
        assert max(o.end_s for o in g.ops) == pytest.approx(g.makespan_s)
        assert {o.kind for o in g.ops} <= {"tc", "vc", "net"}
        caps = {"tc": d.accelerator.num_tc, "vc": d.accelerator.num_vc, "net": 1}
        assert all(1 <= o.cores <= caps[o.kind] for o in g.ops)
        share = busy_shares(g, caps)
        # a valid schedule never has more core-seconds of work than cores x makespan
        assert all(0 <= v <= 1 + 1e-9 for v in share.values()) and share["tc"] > 0


def test_iteration_parts_sum_to_the_iteration(tiny_search, small_plan):
    res, _ = tiny_search
    evs = [d.evaluation for d in search_details(res.spec, res.best)]
    result, _ = small_plan
    evs += [e.to_dict() for e in (result.best,) + tuple(result.alternatives)]
    for ev in evs:
        parts = iteration_parts(ev)
        assert all(v >= 0 for _, v in parts)
        assert sum(v for _, v in parts) == pytest.approx(ev["iteration_time_s"], rel=1e-9)


def test_plan_report(small_plan, tmp_path):
    result, a = small_plan
    path = api.plan_report(result, str(tmp_path / "plan.html"), a["model"], a["accelerator"], a["devices"],
                           a["global_batch"])
    html = open(path, encoding="utf-8").read()
    assert_self_contained(html)
    assert_charts_labelled(html)
    assert result.best.plan.describe() in html
    assert "alternative 1" in html and "baseline: megatron" in html
    assert "HBM capacity 32 GiB" in html
    assert "one transformer block, backward" in html  # designed chip: its block's Gantt chart


REPRO = [
    {"model": "gpt2-xl", "role": "phaze", "plan_kind": "best", "throughput_seq_per_s": 30.0,
     "ratio_to_tpuv4_like": 1.5, "area_mm2": 250.0, "power_w": None, "plan": "p=8 t=1 d=128",
     "search_wall_s": 40.0, "evaluated": 120},
    {"model": "gpt2-xl", "role": "tpuv4-like", "plan_kind": "best", "throughput_seq_per_s": 20.0,
     "ratio_to_tpuv4_like": 1.0, "area_mm2": 278.8, "power_w": None, "plan": "p=4 t=1 d=256",
     "search_wall_s": None, "evaluated": None},
    {"model": "gpt2-xl", "role": "spotlight", "plan_kind": "paper", "throughput_seq_per_s": 18.0,
     "ratio_to_tpuv4_like": 0.9, "area_mm2": 200.0, "power_w": None, "plan": "p=32 t=1 d=32",
     "search_wall_s": 100.0, "evaluated": 500, "notes": "a field added later"},
]


def test_reproduce_report_with_and_without_power(tmp_path):
    html = reproduce_report_html(REPRO)
    assert_self_contained(html)
    assert_charts_labelled(html)
    assert "gpt2-xl: best is <b>phaze</b>" in html
    assert "No row has a power figure" in html and "a field added later" in html
    powered = [dict(r, power_w=100.0 + i) for i, r in enumerate(REPRO)]
    html = reproduce_report_html(powered)
    assert "Throughput ratio against chip power" in html and "chip power (W)" in html
    (tmp_path / "repro.json").write_text(json.dumps({"rows": REPRO}))
    out = api.report(str(tmp_path / "repro.html"), reproduce=str(tmp_path / "repro.json"))
    assert "spotlight" in open(out, encoding="utf-8").read()


def test_store_report_equals_the_run(tiny_search, tmp_path, cli):
    """The report command rebuilds the result from the store: the same winner, front and counts as the run."""
    res, _ = tiny_search
    again = api.load_search(res.store)
    assert again.best == res.best and again.pareto == res.pareto and again.references == res.references
    for k in ("candidates", "exact", "bounded", "infeasible", "pruned"):
        assert again.counts[k] == res.counts[k]
    code, out, err = cli("report", "--store", res.store, "--html", str(tmp_path / "s.html"))
    assert code == 0, err
    assert "HTML report written to" in out and (tmp_path / "s.html").stat().st_size > 10_000


@pytest.mark.parametrize("path, msg", [("nowhere/x.html", "does not exist"), ("x.txt", "ending in .html")])
def test_bad_html_path_fails_before_work(tmp_path, cli, monkeypatch, path, msg):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("search", "--model", "gpt2-xl", "--store", "r.db", "--html", path)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.db").exists() and out == ""
    with pytest.raises(ConfigError):
        check_output_path(path)


def test_report_needs_one_source(cli, tmp_path):
    code, _, err = cli("report", "--html", str(tmp_path / "x.html"))
    assert code == 2 and "exactly one of --store" in err
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = cli("report", "--reproduce", str(tmp_path / "bad.json"), "--html", str(tmp_path / "x.html"))
    assert code == 2 and "does not parse as JSON" in err


def test_missing_matplotlib_fails_before_the_search(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    code, out, err = cli("search", "--model", "gpt2-xl", "--store", "r.db", "--plot", "plots")
    assert code == 2 and "phaze[plot]" in err and not (tmp_path / "r.db").exists()
    code, out, err = cli("schedule", "--model", "bert-large", "--accelerator", "tpuv4-like", "--gantt", "g.png")
    assert code == 2 and "phaze[plot]" in err and not list(tmp_path.iterdir())


def test_gantt_png_is_a_png_and_other_suffixes_fail(tmp_path, cli):
    pytest.importorskip("matplotlib")
    png = tmp_path / "g.png"
    code, out, err = cli("schedule", "--model", "bert-large", "--accelerator", "tpuv4-like", "--layer", "block",
                         "--gantt", str(png))
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "g.txt").exists()
    code, out, err = cli("schedule", "--model", "bert-large", "--accelerator", "tpuv4-like",
                         "--gantt", str(tmp_path / "g.svg"))
    assert code == 2 and ".png" in err


@pytest.mark.parametrize("lo, hi", [(0.0, 1.0), (0.0, 278.8), (3.3, 17.0), (0.0, 2.3e-3), (0.0, 13959.0)])
def test_nice_ticks_cover_the_range_in_round_steps(lo, hi):
    t = nice_ticks(lo, hi)
    assert t[0] <= lo and t[-1] >= hi and 3 <= len(t) <= 12
    steps = {round(b - a, 12) for a, b in zip(t, t[1:])}
    assert len(steps) == 1
    step = steps.pop()
    mant = step / 10 ** math.floor(math.log10(step))
    assert round(mant, 6) in (1.0, 2.0, 5.0)


def test_report_of_a_search_where_nothing_fits(tiny_search):
    from dataclasses import replace
    res, _ = tiny_search
    html = search_report_html(replace(res, best=None, pareto=[]), [], details=None)
    assert "No candidate chip fits any plan" in html and '<section id="plan">' not in html
