"""`phaze validate --chip`: phaze's GEMM cycles vs the stored ZigZag / SCALE-Sim panel (no tools needed)."""
import json
from dataclasses import fields

import numpy as np
import pytest

from phaze.cost.gemm import gemm_latency_s
from phaze.errors import PhazeError
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.sram import sram_macro
from phaze.validation.chip import (GOAL_MAX_PCT, GOAL_MEAN_PCT, glb_organisation, load_panel, panel_accelerator,
                                   panel_gemm, phaze_cycles, validate_chip)
from phaze.validation.goals import goal
from phaze.workload.ops import Gemm


@pytest.fixture(scope="module")
def report():
    return validate_chip()


def _case(**kw):
    c = {"name": "t", "rows": 32, "cols": 32, "m": 256, "k": 256, "n": 256, "batch": 1, "bytes_per_element": 2,
         "operand_buffer_bytes": 4096, "accumulator_bytes": 32768, "glb_bytes": 32 * 2**20,
         "glb_bytes_per_cycle": 64, "hbm_bytes_per_cycle": 1024}
    c.update(kw)
    return c


def test_adapter_builds_the_case_chip():
    acc = panel_accelerator(_case(rows=128, cols=256, glb_bytes_per_cycle=4096))
    assert (acc.num_tc, acc.tc_rows, acc.tc_cols, acc.glb_bytes) == (1, 128, 256, 32 * 2**20)
    assert acc.hbm_bandwidth_Bps == pytest.approx(1024 * acc.freq_hz)
    names = {f.name for f in fields(Accelerator)}
    if "glb_banks" in names:  # the template with the on-chip hierarchy: the GLB delivers the case's rate
        assert acc.glb_banks * acc.glb_bank_width_bytes == 4096
        assert (acc.tc_operand_bytes, acc.tc_acc_bytes) == (4096, 32768)


def test_glb_organisation_picks_the_fastest_banks():
    # 32 MiB at 512 B/cycle: 64x8, 32x16 and 16x32 B banks all cycle under 1 ns in the CACTI table (0.47, 0.51,
    # 0.61 ns), 8x64 B and wider ones do not (1.62 ns and more): the fewest banks at full rate is 16 x 32 B
    assert glb_organisation(32 * 2**20, 512) == (16, 32)
    assert sram_macro(32 * 2**20, 16, 32, 1).cycle_time_s < 1e-9 < sram_macro(32 * 2**20, 8, 64, 1).cycle_time_s
    # 8 B/cycle: one bank of 8 B; every choice multiplies out to the asked bandwidth
    assert glb_organisation(32 * 2**20, 8) == (1, 8)
    for bw in (8, 64, 512, 4096):
        b, w = glb_organisation(32 * 2**20, bw)
        assert b * w == bw
    with pytest.raises(PhazeError, match="delivers 3 B/cycle"):
        glb_organisation(32 * 2**20, 3)


def test_phaze_cycles_are_the_cost_models():
    # the adapter goes through phaze.cost.gemm unchanged: same number as calling it directly
    c = _case(m=512, k=1600, n=128)
    acc = panel_accelerator(c)
    want = gemm_latency_s(Gemm("g", 1, 512, 128, 1600, 2), acc.as_arrays(), cores=1)[0] * acc.freq_hz
    assert phaze_cycles(c) == pytest.approx(float(want), rel=1e-12)
    # and never below the array's MAC-bound (every cycle does at most R x C MACs)
    assert phaze_cycles(c) >= 512 * 1600 * 128 / (32 * 32)


def test_errors_are_signed_relative_to_each_tool():
    c1, c2 = _case(name="a"), _case(name="b", m=512)
    p1, p2 = phaze_cycles(c1), phaze_cycles(c2)
    c1 |= {"zigzag": {"cycles": p1 * 1.25}, "scalesim": {"cycles": p1 / 2}}
    c2 |= {"zigzag": {"cycles": p2 * 0.8}, "scalesim": {"error": "not finished"}}
    r = validate_chip({"tools": {"zigzag-dse": "x"}, "command": "y", "cases": [c1, c2]})
    assert [x.zigzag_error_pct for x in r.cases] == pytest.approx([-20.0, 25.0])
    assert r.cases[0].scalesim_error_pct == pytest.approx(100.0)
    assert r.cases[1].scalesim_cycles is None and r.cases[1].scalesim_error_pct is None
    assert (r.zigzag_mean_abs_pct, r.zigzag_max_abs_pct) == pytest.approx((22.5, 25.0))
    assert (r.scalesim_cases, r.scalesim_mean_abs_pct) == (1, pytest.approx(100.0))
    assert not r.goal_met and r.zigzag_within_goal == 0 and r.zigzag_v3 is None  # no configuration-3 figures
    c1["zigzag"]["cycles"], c2["zigzag"]["cycles"] = p1 * 1.01, p2 * 0.99
    assert validate_chip({"cases": [c1, c2]}).goal_met
    with pytest.raises(PhazeError, match="case 'x': missing field"):
        validate_chip({"cases": [{"name": "x"}]})


def test_stored_panel_is_complete_and_plausible():
    panel = load_panel()
    assert panel["tools"]["zigzag-dse"] != "unknown" and "scripts/chip_panel.py" in panel["command"]
    cases = panel["cases"]
    assert 40 <= len(cases) <= 120
    assert {(c["rows"], c["cols"]) for c in cases} == {(4, 16), (16, 32), (32, 32), (64, 64), (128, 128),
                                                       (128, 256), (256, 256), (8, 8), (8, 16), (16, 16),
                                                       (32, 256), (128, 64)}
    assert {8, 16, 32, 64, 512, 4096} <= {c["glb_bytes_per_cycle"] for c in cases}
    # issue 34: ragged K beside whole K, the same block on several cores, accumulator-bound cases
    assert any(c["k"] % c["rows"] and c["k"] > c["rows"] for c in cases)
    assert {c.get("cores", 1) for c in cases} == {1, 4, 16}
    assert sum("accumulator_bytes_per_cycle" in c for c in cases) == 33
    assert any(c["k"] < c["rows"] for c in cases)
    for c in cases:
        zz = c["zigzag"]
        assert "error" not in zz, c["name"]
        macs = c["m"] * c["k"] * c["n"] / (c["rows"] * c["cols"])
        assert zz["cycles"] >= zz["ideal_cycles"] >= macs * (1 - 1e-9), c["name"]
        assert zz["cycles"] == min(v for v in zz["orientations"].values() if v)
        # configuration 4: the fastest of the static splits run (a one-bank GLB has only the one port), so
        # never slower than configuration 3's row rule, which is one of them; configuration 6: the fastest
        # of those at LOMA lpf_limit 6 and of the lpf-8 runs (every case; lpf-6 best kept)
        splits = zz["splits"]
        lpf6 = c["zigzag_lpf6"]
        assert "lpf8" in zz and set(zz["lpf8"]) == set(splits), c["name"]
        assert lpf6["cycles"] == min(v for o in splits.values() for v in o.values() if v), c["name"]
        deep = [v for o in zz.get("lpf8", {}).values() for v in o.values() if isinstance(v, float)]
        assert zz["cycles"] == min([lpf6["cycles"], *deep]), c["name"]
        assert zz.get("lpf_limit", 6) == (8 if zz["cycles"] < lpf6["cycles"] else 6), c["name"]
        assert "row" in splits and (len(splits) == 1 or c["glb_bytes_per_cycle"] >= 512), c["name"]
        # a banked GLB runs the set (an accumulator-bound case the row rule and one port, which may coincide)
        assert len(splits) >= 1 + (c["glb_bytes_per_cycle"] >= 512 and "accumulator_bytes_per_cycle" not in c)
        assert zz["cycles"] <= c["zigzag_v3"]["cycles"] == min(splits["row"].values()), c["name"]
    # more GLB bandwidth never makes ZigZag's latency worse for the same core and GEMM
    by_shape = {}
    for c in cases:
        by_shape.setdefault((c["rows"], c["cols"], c["m"], c["k"], c["n"]), []).append(
            (c["glb_bytes_per_cycle"], c["zigzag"]["cycles"]))
    for series in by_shape.values():
        cyc = [cy for _, cy in sorted(series)]
        assert all(b <= a * 1.001 for a, b in zip(cyc, cyc[1:])), series


def test_report_covers_every_case(report):
    assert len(report.cases) == len(load_panel()["cases"]) == report.zigzag_cases
    z = np.array([abs(c.zigzag_error_pct) for c in report.cases])
    assert report.zigzag_mean_abs_pct == pytest.approx(z.mean())
    assert report.zigzag_max_abs_pct == pytest.approx(z.max())
    assert report.zigzag_within_goal == int((z <= GOAL_MAX_PCT).sum())
    # configuration 3's reference (the row rule alone), reported beside: never below the current one
    z3 = np.array([abs(c.zigzag_v3_error_pct) for c in report.cases])
    assert report.zigzag_v3["mean_abs_pct"] == pytest.approx(z3.mean())
    assert report.zigzag_v3["max_abs_pct"] == pytest.approx(z3.max())
    assert report.zigzag_v3["within_goal"] == int((z3 <= GOAL_MAX_PCT).sum())
    assert all(c.zigzag_cycles <= c.zigzag_v3_cycles for c in report.cases)
    json.dumps(report.to_dict())


LATENCY_GOAL = goal("chip_gemm_latency")  # src/phaze/validation/data/goals.json


def _goal_reason() -> str:
    r = validate_chip()
    worst = max(r.cases, key=lambda c: abs(c.zigzag_error_pct))
    return (f"{LATENCY_GOAL.source} goal vs ZigZag ({LATENCY_GOAL.text()}) not met: mean |error| "
            f"{r.zigzag_mean_abs_pct:.1f}%, max {r.zigzag_max_abs_pct:.1f}% over {r.zigzag_cases} cases, "
            f"{r.zigzag_within_goal} within; worst {worst.name}: phaze {worst.phaze_cycles:,.0f} vs ZigZag "
            f"{worst.zigzag_cycles:,.0f} cycles (docs/chip-validation.md, the goal paragraph and "
            f"'128x64 by hand'). Remove this marker when the test passes")


def test_the_figures_the_readme_reports(report):
    """README's trust table and docs/chip-validation.md: 2.0% mean, 16.7% max over 96 cases, 94 within 15%
    (session 24: the template chooses its accumulator pass size, ``gemm_chip.PASS_SPLITS``; 2.5% / 22.0% / 94
    before). The two misses are the 128x64 slice at both bandwidths, 12,798 cycles against ZigZag's 15,366:
    ZigZag's mapping keeps four column blocks in the accumulator and copies a partial-sum read into every
    cycle of its read port (docs/chip-validation.md, "128x64 by hand"). The reference is configuration 6
    (session 21): the fastest of ZigZag's runs at LOMA lpf_limit 6 and 8 for every case; the K <= R scores
    cases against configuration 5 (ZigZag's accumulator holding the fp32 sums phaze's does).
    A change of any of these (better or worse) must update the docs; the goal itself is the strict xfail below."""
    assert (report.zigzag_cases, report.zigzag_within_goal) == (96, 94)
    assert round(report.zigzag_mean_abs_pct, 1) == 2.0 and round(report.zigzag_max_abs_pct, 1) == 16.7
    worst = max(report.cases, key=lambda c: abs(c.zigzag_error_pct))
    assert worst.name == "128x64 gpt2-xl.fc1 mb1 M/4/K/6.25/N/12.5 @512B/c"
    assert round(worst.zigzag_error_pct, 1) == -16.7
    misses = sorted(c.name for c in report.cases if abs(c.zigzag_error_pct) > GOAL_MAX_PCT)
    assert misses == ["128x64 gpt2-xl.fc1 mb1 M/4/K/6.25/N/12.5 @4096B/c",
                      "128x64 gpt2-xl.fc1 mb1 M/4/K/6.25/N/12.5 @512B/c"]
    assert not report.goal_met


# Not met today (two cases), so an unconditional strict xfail: the day the goal is met this test passes, the
# strict marker turns that into a failure, and the marker must be removed (and the README's trust table updated).
@pytest.mark.xfail(strict=True, reason=_goal_reason())
def test_goal_every_case_within_15pct_of_zigzag_mean_within_5pct(report):
    assert report.goal_met
    assert LATENCY_GOAL.met(report.zigzag_mean_abs_pct, report.zigzag_max_abs_pct)


def test_cli_table_and_json(cli):
    code, out, _ = cli("validate", "--chip")
    assert code == 0 and "ZigZag" in out and "SCALE-Sim" in out and "mean |error|" in out
    code, out, _ = cli("validate", "--chip", "--json")
    d = json.loads(out)
    assert code == 0 and len(d["cases"]) == len(load_panel()["cases"])
    assert d["goal"] == {"max_abs_pct": GOAL_MAX_PCT, "mean_abs_pct": GOAL_MEAN_PCT, "met": d["goal"]["met"]}
    code, _, err = cli("validate", "--chip", "--cases", "x.json")
    assert code == 2 and "--cases" in err and len(err.strip().splitlines()) == 1


def test_panel_script_glb_organisation_is_phazes():
    # scripts/chip_panel.py configures ZigZag's GLB ports from the organisation phaze builds; keep the two equal
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "scripts" / "chip_panel.py"
    spec = importlib.util.spec_from_file_location("chip_panel", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for bw, org in mod.GLB_ORGANISATION.items():
        assert glb_organisation(mod.GLB_BYTES, bw) == org
    assert {c["glb_bytes_per_cycle"] for c in mod.cases()} <= set(mod.GLB_ORGANISATION)
    # the input stream gets the banks its row needs, the rest share the others; one bank or a row as wide
    # as the GLB: one shared port
    case = next(c for c in mod.cases() if c["rows"] == 128 and c["k"] == 64 and c["glb_bytes_per_cycle"] == 512)
    assert mod.glb_ports(case) == (128, 384)  # 64 x 2 B rows = 4 of 16 x 32 B banks
    wide = next(c for c in mod.cases() if c["rows"] == 256 and c["k"] >= 256 and c["glb_bytes_per_cycle"] == 512)
    assert mod.glb_ports(wide) == (0, 512)
    # configuration 4: one shared port, a quarter, half, three quarters of the banks for the input stream, for
    # every banked case
    assert mod.SPLITS == ("row", "one", "1/4", "1/2", "3/4")
    assert [mod.glb_ports(wide, s) for s in mod.SPLITS[2:]] == [(128, 384), (256, 256), (384, 128)]
    big = next(c for c in mod.cases() if c["glb_bytes_per_cycle"] == 4096)
    assert [mod.glb_ports(big, s) for s in mod.SPLITS[2:]] == [(1024, 3072), (2048, 2048), (3072, 1024)]
    one = next(c for c in mod.cases() if c["glb_bytes_per_cycle"] == 64)
    assert mod.case_splits(one) == ("row",) and mod.glb_ports(one, "1/2") == (0, 64)
    # splits that give the row rule's ports are not run twice
    assert mod._distinct_splits(case) == ["row", "one", "1/2", "3/4"]  # 64 x 2 B rows: the row rule is 1/4
    row8 = next(c for c in mod.cases() if c["rows"] == 128 and c["k"] >= 128 and c["glb_bytes_per_cycle"] == 512)
    assert mod._distinct_splits(row8) == ["row", "one", "1/4", "3/4"]
    # an accumulator-bound case runs the row rule and the one shared port only (ACC_LIMITED_SPLITS); its
    # row rule is the one shared port here
    assert "accumulator_bytes_per_cycle" in wide and mod._distinct_splits(wide) == ["row"]
    assert mod.case_splits(wide) == mod.ACC_LIMITED_SPLITS == ("row", "one")


def _miss_case():
    return next(c for c in load_panel()["cases"] if c["name"] == "256x256 gpt3.scores mb1 @512B/c")


# ZigZag's cycles of the miss case under configuration 4, with an accumulator at a row per cycle (the panel
# at 8e9a39e; the case now runs with its accumulator macro's rate, issue 34): 1/4 of the banks for
# inputs, and one shared port (the fastest)
ZZ_V4_QUARTER, ZZ_V4_ONE = 34_986, 34_302


def test_shared_banks_by_hand_on_the_miss_case(monkeypatch):
    """docs/chip-validation.md, "The one miss" (before issue 34's accumulator rate): 2048 x 128 x 2048 on a
    256x256 array, GLB 16 x 32 B banks, the accumulator keeping up with one row per cycle. phaze's cycles by
    hand, the traffic floor no schedule of any bank assignment beats, and the best static split of the banks
    under the same schedule (phaze must be between the floor and the split)."""
    import numpy as np

    import phaze.cost.gemm_chip as gc
    c = _miss_case()
    monkeypatch.setattr(gc, "PASS_SPLITS", (1,))  # the derivation is of one pass per accumulator-full of rows
    # its 2 MiB accumulator (1 KiB rows, two 512 B accesses of 3.68 ns) moves a row per 8 cycles: 8 x the
    # array's 16,384 streamed rows bound it (issue 34); the GLB derivation below is of a macro that keeps up
    assert phaze_cycles(c) > 8 * 16384
    monkeypatch.setattr(gc, "acc_row_rate", lambda a: np.ones(len(a)))
    import phaze.hardware.accelerator as hw
    monkeypatch.setattr(hw, "_ONE_ROW", {})  # the chip's memoized port rates were derived before the patch
    assert (c["m"], c["k"], c["n"], c["rows"], c["cols"]) == (2048, 128, 2048, 256, 256)
    # the GEMM runs alone, so it has all 512 B/cycle (issue 34 item 1e; until then the idle one-lane vector
    # core's fixed slice kept 4/1028 of it)
    b = 512
    w_tile, out_pass, in_pass = 128 * 256 * 2, 2048 * 256 * 2, 2048 * 128 * 2  # bytes per pass (column block)
    # 8 passes (column blocks of 256) of 2048 rows; K = 128 fills one weight tile; the accumulator (2048 rows)
    # holds one pass, so pass j's outputs leave during pass j + 1; each block's 64 KiB tile fits the
    # operand buffer, but the 8 blocks have different weights: each pass loads a whole tile (the next one)
    first = 2048                                      # pass 1: max(2048 rows, (inputs + a tile) / b = 1152)
    middle = (in_pass + w_tile + out_pass) / b       # passes 2-8 also carry the previous pass's outputs: 3200
    fixed = 128 + (128 + 256 - 2)                     # the first weight tile's rows and one fill/drain
    ends = (w_tile / b - 128) + out_pass / b          # the first tile's bytes beyond its 128 cycles, the last drain
    hand = first + 7 * middle + fixed + ends
    assert phaze_cycles(c) == pytest.approx(hand, rel=1e-9)
    assert round(hand) == 27006
    floor = (8 * in_pass + 8 * w_tile + 8 * out_pass) / b  # all GLB bytes at the full rate
    assert floor == pytest.approx(25600, abs=1) and phaze_cycles(c) > floor

    def static(x, whole_port_cycles):
        """The same schedule with x of the 16 banks serving only the input stream, 16 - x weights and outputs
        (at the full 512 B/cycle, as ZigZag's ports: more than phaze's share, so the comparison is generous)."""
        bi, bo = 32 * x, 32 * (16 - x)
        inp = 2048 * -(-256 // (32 * x)) if whole_port_cycles else in_pass / bi
        p1, pm, plast = (max(2048, inp, v / bo) for v in (w_tile, w_tile + out_pass, out_pass))
        return w_tile / bo + p1 + 6 * pm + plast + out_pass / bo + (128 + 256 - 2)

    best = min(range(1, 16), key=lambda x: static(x, False))
    assert best == 5 and round(static(5, False)) == 29761
    assert phaze_cycles(c) < 0.92 * static(5, False)  # the best static split is 10.2% slower than shared banks
    # a transfer in whole port cycles (ZigZag's ports): a 256 B row takes 2 cycles of any port under 8 banks
    assert min(range(1, 16), key=lambda x: static(x, True)) == 4
    # ZigZag's run with 4 of 16 banks for inputs agrees with this count within 5% (34,986 vs 36,051)
    assert ZZ_V4_QUARTER == pytest.approx(static(4, True), rel=0.05)
    # one port of all 16 banks for every stream, in whole port cycles: a 256 B input row takes a 512 B port
    # cycle, so a pass takes 2048 cycles of inputs plus its W/O bytes / 512 B: 34,174 by hand; ZigZag's run
    # of it is the fastest of the set (34,302); in bytes (no word wasted) one port is the shared banks
    def one_port(whole_port_cycles):
        inp = 2048 if whole_port_cycles else in_pass / 512
        p1, pm, plast = (max(2048, inp + v / 512) for v in (w_tile, w_tile + out_pass, out_pass))
        return w_tile / 512 + p1 + 6 * pm + plast + out_pass / 512 + (128 + 256 - 2)
    assert round(one_port(True)) == 34174 and round(one_port(False)) == 26878
    assert ZZ_V4_ONE == pytest.approx(one_port(True), rel=0.01)


def test_last_pass_drains_through_the_accumulator_port_by_hand():
    """docs/chip-validation.md, "128x64 by hand": 256 x 256 x 512 on a 128x64 array whose 256 KiB accumulator
    macro (256 B ports, 2.57 ns) moves a 256 B fp32 row in 3 cycles at 1 GHz. 8 column blocks x 2 weight
    tiles of 256 streamed rows at 3 cycles a row, the first tile's load and one fill/drain, and the last
    pass's 256 rows read out through the accumulator's read port after its last tile (the first tile's bytes
    and the last pass's 32 KiB at 512 or 4096 B/cycle are less): the same count at both bandwidths. With the
    pass split (session 24) the 256 rows run as 4 passes of 64: the same array cycles (a 64-row tile takes
    192 cycles, the next 128-row weight tile loads under it; the panel of 2 tiles of 16 KiB fits the 32 KiB operand
    buffer, so no weight is loaded twice), and only 64 rows are read out at the end."""
    import phaze.cost.gemm_chip as gc
    for bw in (512, 4096):
        c = next(x for x in load_panel()["cases"] if x["name"] == f"128x64 gpt2-xl.fc1 mb1 M/4/K/6.25/N/12.5 @{bw}B/c")
        assert (c["m"], c["k"], c["n"], c["accumulator_bytes_per_cycle"]) == (256, 256, 512, 99.64)
        cpr, fixed = 3, 128 + (128 + 64 - 2)
        for splits, passes, rows, cycles in (((1,), 1, 256, 13374), (gc.PASS_SPLITS, 4, 64, 12798)):
            drain = max(rows * 64 * 2 / bw, rows * cpr)   # the accumulator's port binds: rows x 3 cycles
            hand = 8 * 2 * passes * rows * cpr + fixed + drain
            acc = panel_accelerator(c)
            got = gc.gemm_chip_terms(panel_gemm(c), acc.as_arrays(), np.ones(1), np.zeros(1), splits)
            assert got["latency_s"][0] * acc.freq_hz == pytest.approx(hand, rel=1e-9) and round(hand) == cycles
        assert phaze_cycles(c) == pytest.approx(12798, rel=1e-9)
        # streaming M, passes of 32 rows would be weight-load-bound (128 cycles a tile for 32 x 3 = 96)
        o = gc._orient(panel_gemm(c), 256, 512, gc._chip_consts(panel_accelerator(c).as_arrays()), np.ones(1), 8)
        assert (float(o["cycles"][0]), float(o["last_acc"][0])) == (8 * 2 * 8 * 128 + fixed, 32 * cpr)
    # one weight tile per pass (K <= R): no partial sum is read, each row leaves as it is written, so only
    # the last row's read (8 cycles on the 256x256 array's 1 KiB rows) can be exposed
    s = next(x for x in load_panel()["cases"] if x["name"] == "256x256 gpt2-xl.scores mb1 @4096B/c")
    import phaze.cost.gemm_chip as gc
    o = gc._orient(Gemm("g", 1, s["m"], s["n"], s["k"], 2), s["m"], s["n"],
                   gc._chip_consts(panel_accelerator(s).as_arrays()), np.ones(1))
    assert float(o["last_acc"][0]) == 8.0
