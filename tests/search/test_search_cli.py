"""`phaze search` / `phaze results` end to end on a tiny space and model given as files."""
import csv
import io
import json

import pytest

from clirunner import run_phaze as run
from phaze.search.executor import InlineExecutor, make_executor
from phaze.errors import PhazeError
from tinysearch import MODEL_YAML, SPACE_YAML


@pytest.fixture
def files(tmp_path):
    (tmp_path / "m.yaml").write_text(MODEL_YAML)
    (tmp_path / "s.yaml").write_text(SPACE_YAML)
    return tmp_path


def search_args(d, *extra):
    return ("search", "--model", str(d / "m.yaml"), "--space", str(d / "s.yaml"), "--devices", "16",
            "--global-batch", "32", "--mbs", "1,2", "--hbm-gib", "1,2", "--store", str(d / "r.db"),
            "--workers", "1", *extra)


def test_search_json_then_results(capsys, files):
    code, out, err = run(capsys, *search_args(files, "--json"))
    assert code == 0, err
    res = json.loads(out)
    assert res["counts"]["candidates"] == res["counts"]["chips"] * 2
    assert sum(res["counts"][k] for k in ("exact", "bounded", "pruned", "infeasible")) == res["counts"]["candidates"]
    best = res["best"]
    from phaze.hardware import area_mm2, get_accelerator
    assert best["area_mm2"] <= area_mm2(get_accelerator("tpuv4-like"))  # the default budget: the TPUv4-like chip
    assert best["outcomes"][0]["plan_json"]["tp"] * best["outcomes"][0]["plan_json"]["pp"] * \
        best["outcomes"][0]["plan_json"]["dp"] <= 16
    code, out, err = run(capsys, "results", "show", "--store", str(files / "r.db"), "--top", "3", "--json")
    rows = json.loads(out)
    assert code == 0 and rows[0]["chip"] == best["chip"] and rows[0]["score"] == pytest.approx(best["score"])
    code, out, err = run(capsys, "results", "export", "--store", str(files / "r.db"), "--format", "csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and int(table[0]["chip"]) == best["chip"] and "tiny_seq_per_s" in table[0]
    # the same store again without --resume is refused; with other parameters it is refused too
    code, out, err = run(capsys, *search_args(files))
    assert code == 2 and "already exists" in err
    code, out, err = run(capsys, *search_args(files, "--resume", "--global-batch", "64"))
    assert code == 2 and "global_batch" in err and len(err.strip().splitlines()) == 1


def test_search_bad_inputs(capsys, files):
    (files / "bad.yaml").write_text("num_tc: [0]\n")
    args = list(search_args(files))
    args[args.index("--space") + 1] = str(files / "bad.yaml")
    code, out, err = run(capsys, *args)
    assert code == 2 and "num_tc" in err
    code, out, err = run(capsys, *search_args(files, "--workers", "0"))
    assert code == 2 and "workers" in err


def test_executors():
    ex = InlineExecutor()
    assert ex.submit(pow, 2, 10).result() == 1024
    with pytest.raises(ZeroDivisionError):
        ex.submit(lambda: 1 / 0).result()
    with pytest.raises(PhazeError):
        make_executor("local", 0)


@pytest.mark.slow
def test_ray_backend_runs_tasks():
    pytest.importorskip("ray")
    ex = make_executor("ray", 1)
    assert ex.submit(pow, 3, 3).result(timeout=120) == 27


def test_search_tables_and_plots(capsys, files):
    pytest.importorskip("matplotlib")
    code, out, err = run(capsys, *search_args(files, "--pareto", "--plot", str(files / "plots")))
    assert code == 0, err
    assert "Pareto front of score against area (exact over the whole space" in out
    assert "TPUv4-like, paper's plan" in out
    assert "TPUv4-like, winner's HBM" in out  # the tiny winner's 1-2 GiB, not the reference's own
    for name in ("pareto.png", "winner_vs_tpuv4.png"):
        png = files / "plots" / name
        assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_search_perf_per_dollar_json_and_tables(capsys, files):
    """`--objective perf-per-dollar --json` end to end: wins_because multiplies to the winner's throughput ratio,
    the winner's and the reference's TCO parts sum to their totals; the tables print the three new parts; the
    paper's space (no power model) is refused on one line before any work."""
    import math

    code, out, err = run(capsys, *search_args(files, "--objective", "perf-per-dollar", "--json"))
    assert code == 0, err
    res = json.loads(out)
    assert set(res["wins_because"]) == {"tpuv4-like", "tpuv4"}  # both references
    steps = res["wins_because"]["tpuv4-like"]
    ratio = res["best"]["outcomes"][0]["throughput_seq_per_s"] / res["references"][0]["best_seq_per_s"]
    assert math.prod(s["speedup"] for s in steps) == pytest.approx(ratio, rel=1e-12)
    real = res["best"]["outcomes"][0]["throughput_seq_per_s"] / res["real_references"][0]["best_seq_per_s"]
    assert math.prod(s["speedup"] for s in res["wins_because"]["tpuv4"]) == pytest.approx(real, rel=1e-12)
    assert set(res["tco"]) == {"winner", "tpuv4-like", "tpuv4"}  # the real TPU v4 priced too
    for t in res["tco"].values():
        parts = ("die_usd", "hbm_usd", "package_usd", "network_usd", "energy_usd")
        assert t["total_usd"] == pytest.approx(sum(t[k] for k in parts), rel=1e-12)
        assert t["tco_at_peak_usd"] >= t["total_usd"]  # peak power >= the plans' average power
    w, r = res["tco"]["winner"], res["tco"]["tpuv4-like"]
    assert res["best"]["score"] == pytest.approx(ratio / (w["tco_at_peak_usd"] / r["tco_at_peak_usd"]), rel=1e-9)
    assert set(res["fronts"]) == {"area_mm2", "peak_power_w", "tco_usd"}
    code, out, err = run(capsys, *search_args(files, "--objective", "perf-per-dollar", "--store", str(files / "t.db")))
    assert code == 0, err
    for title in ("why the winner wins against tpuv4-like", "cost of ownership per chip", "Pareto fronts among"):
        assert title in " ".join(out.split()), title
    code, out, err = run(capsys, *search_args(files, "--objective", "perf-per-dollar", "--space", "paper",
                                              "--store", str(files / "p.db")))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "perf-per-dollar" in err
    assert not (files / "p.db").exists()
