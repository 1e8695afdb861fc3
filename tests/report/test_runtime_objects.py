"""Issue 32: one Runtime (defaults and cross-field rules in one place), one PlanSpace, the plan report's Gantt
drawn under the plan's own runtime, and the seams' faults (a power-capped store's winner, --tdp-w inf/nan, a
reproduce file with a wrong-typed field)."""
import inspect
import json
import math

import pytest

from phaze import api
from phaze.cli import build_parser
from phaze.errors import ConfigError
from phaze.workload.runtime import PAPER_RUNTIME, PlanSpace, Runtime, TrainSetting


def test_cli_flags_default_to_the_runtime():
    """One set of defaults: `phaze plan`'s runtime flags, unset, build exactly Runtime()."""
    from phaze.cli.commands import _runtime
    args = build_parser().parse_args(["plan", "--model", "gpt2-xl", "--accelerator", "h100-80g", "--devices", "8",
                                      "--global-batch", "8"])
    assert _runtime(args) == Runtime()
    assert Runtime().attention == "flash" and Runtime().precision == "bf16"
    assert Runtime().memory_reserve_bytes == 3 * 2**30


@pytest.mark.parametrize("kw, shape, words", [
    (dict(attention="standard"), dict(cp=2, seq_len=1024), "needs flash attention"),
    (dict(tp_overlap=True), dict(tp=2, sequence_parallel=False), "needs sequence parallelism"),
])
def test_shape_rules_live_in_the_runtime(kw, shape, words):
    rt = Runtime(**kw)
    with pytest.raises(ConfigError, match=words):
        rt.check_shape(**shape)
    # the same rule refuses a TrainSetting and a Plan of that shape (they ask the runtime, nothing else)
    with pytest.raises(ConfigError, match=words):
        TrainSetting(1, shape.get("seq_len", 1024), shape.get("tp", 1), shape.get("sequence_parallel", False),
                     cp=shape.get("cp", 1), runtime=rt)


def test_runtime_refuses_bad_values_on_one_line():
    for kw in (dict(attention="paged"), dict(precision="int4"), dict(grad_dtype="fp8"), dict(optimizer="lion"),
               dict(deterministic=True, tp_overlap=True), dict(memory_reserve_bytes=-1.0),
               dict(memory_reserve_bytes=math.inf), dict(tp_overlap="yes")):
        with pytest.raises(ConfigError) as exc:
            Runtime(**kw)
        assert "\n" not in str(exc.value)


def test_runtime_for_shape_drops_overlap_without_sp():
    rt = Runtime(tp_overlap=True, tp_overlap_config="te-default")
    assert rt.for_shape(8, True) is rt
    off = rt.for_shape(8, False)
    assert not off.tp_overlap and off.tp_overlap_config == Runtime().tp_overlap_config
    assert rt.for_shape(1, True).tp_overlap is False


def test_plan_space_normalises_and_refuses():
    s = PlanSpace(microbatch_sizes=[2, 1, 2], interleave_values=(4, 1), zero=True)
    assert s.microbatch_sizes == (2, 1) and s.interleave_values == (1, 4) and s.zero == (1,)
    with pytest.raises(ConfigError, match="unknown mode"):
        PlanSpace(recompute_modes=("some",))
    with pytest.raises(ConfigError, match="empty"):
        PlanSpace(cp_values=())
    # a flash kernel stores no scores: selective recompute repeats "none" and leaves the space
    assert "selective" not in PlanSpace().for_runtime(Runtime()).recompute_modes
    assert "selective" in PlanSpace().for_runtime(PAPER_RUNTIME).recompute_modes


def test_plan_round_trips_its_runtime():
    from phaze.placement import Plan
    rt = Runtime(attention="flash", precision="fp8", dp_overlap=True, grad_dtype="bf16", memory_reserve_bytes=0.0)
    p = Plan.balanced(4, 2, 1, 2, 1, 4, runtime=rt)
    assert Plan.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_public_calls_take_at_most_ten_parameters():
    from phaze.placement import evaluate, optimize
    for fn in (optimize, evaluate, api.plan, api.evaluate_plan, api.plan_setting, api.plan_report, api.search,
               api.search_spec, api.spotlight):
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind != p.VAR_KEYWORD]
        assert len(params) <= 11, (fn.__qualname__, len(params))


def test_plan_report_gantt_uses_the_plans_runtime(small_plan):
    """The report's block Gantt is the block the plan runs: under its runtime (flash, bf16 by default), not
    the library's paper setting (standard attention, fp16)."""
    from phaze.hardware.presets import get_accelerator, get_cluster
    from phaze.placement.detail import block_schedules, plan_block_setting, plan_detail
    from phaze.workload.zoo import get_model

    result, a = small_plan
    plan = result.best.plan
    assert plan.runtime == Runtime().for_shape(plan.tp, plan.sequence_parallel) and plan.attention == "flash"
    model, acc = get_model(a["model"]), get_accelerator(a["accelerator"])
    cluster = get_cluster("flat-4gib", a["devices"])
    d = plan_detail(model, acc, cluster, a["global_batch"], plan, devices_given=a["devices"],
                    evaluation=result.best.to_dict())
    setting = plan_block_setting(model, plan)
    assert setting.runtime == plan.runtime.for_shape(plan.tp, plan.sequence_parallel)
    own = block_schedules(model, setting, acc, None)
    paper = block_schedules(model, plan_block_setting(model, Plan_with(plan, PAPER_RUNTIME)), acc, None)
    assert [g.makespan_s for g in d.schedules] == pytest.approx([g.makespan_s for g in own])
    # the two runtimes give different blocks: a Gantt under the wrong one would show
    assert [g.makespan_s for g in own] != pytest.approx([g.makespan_s for g in paper], rel=1e-3)
    assert {o.name for g in own for o in g.ops} != {o.name for g in paper for o in g.ops}


def Plan_with(plan, runtime):
    from dataclasses import replace
    return replace(plan, runtime=runtime)


@pytest.mark.parametrize("value", ["inf", "nan", "-5", "0"])
def test_tdp_must_be_positive_and_finite(cli, value):
    code, out, err = cli("search", "--model", "gpt2-xl", "--tdp-w", value, "--store", "/nonexistent/x.db")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--tdp-w" in err


def test_power_capped_store_reports_its_own_winner(tmp_path):
    """Fault 7a: a store searched under --tdp-w numbers its chips after the cap; the report rebuilds the winner
    from the capped candidates, so it is the chip the search chose (before: another chip, or 'another phaze
    version')."""
    import numpy as np

    from phaze.hardware.power import peak_power_w
    from phaze.hardware.space import enumerate_space
    from phaze.search import SearchSpec, run_search
    from phaze.search.details import search_details, winner_chip
    from tinysearch import SPACE, TINY

    peak = np.asarray(peak_power_w(enumerate_space(SPACE).arch))
    tdp = float(sorted(peak)[len(peak) // 2])
    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1,),
                      recompute_modes=("none",), devices=16, global_batch=32, tdp_w=tdp)
    res = run_search(spec, str(tmp_path / "cap.db"), workers=1, quiet=True)
    chip = winner_chip(res.spec, res.best)
    for f in ("num_tc", "tc_rows", "tc_cols", "num_vc", "vc_width", "glb_bytes"):
        assert getattr(chip, f) == getattr(res.best, f)
    assert float(peak_power_w(chip)) <= tdp
    (d,) = search_details(res.spec, res.best)
    assert d.evaluation["throughput_seq_per_s"] == pytest.approx(d.stored_seq_per_s, rel=1e-9)
    html = api.report(str(tmp_path / "cap.html"), store=str(tmp_path / "cap.db"))
    assert open(html, encoding="utf-8").read().count("<svg") >= 4


def test_reproduce_file_with_a_wrong_typed_field(cli, tmp_path):
    """Fault 7d: a stored row with a wrong-typed field is one line and exit 2, and no report is written."""
    rows = [{"model": "gpt2-xl", "role": "phaze", "plan_kind": "best", "throughput_seq_per_s": "fast",
             "ratio_to_tpuv4_like": 1.5, "area_mm2": 250.0, "power_w": None, "plan": "p=8"}]
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"rows": rows}))
    code, out, err = cli("report", "--reproduce", str(path), "--html", str(tmp_path / "r.html"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "throughput_seq_per_s" in err
    rows[0].update(throughput_seq_per_s=30.0, area_mm2="big")
    path.write_text(json.dumps({"rows": rows}))
    code, out, err = cli("report", "--reproduce", str(path), "--html", str(tmp_path / "r.html"))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.html").exists()
