"""Issue 34 item 3: the co-search runs at the reference chip's power by default (--tdp-w reference), so its winner
draws no more peak power than the TPUv4-like chip it is compared with; --tdp-w none lifts the cap; the paper's
space (no power model) has none."""
import pytest

from phaze import api
from phaze.hardware.power import peak_power_w
from phaze.hardware.space import resolve_space


def test_default_cap_is_the_references_peak_power():
    ds = resolve_space("default", None)
    from phaze.hardware.chip_network import TPUV4_ICI, network_power_w
    # the TPUv4-like chip's modelled peak (240 W) with its ICI's PHY: 270e9 B/s x 8 x 1.9 pJ/b = 4.104 W
    ref = float(peak_power_w(ds.reference)) + 4.104
    assert float(network_power_w(TPUV4_ICI)) == pytest.approx(4.104, rel=1e-12)
    assert 200 < ref < 300
    assert api.search_spec(["gpt2-xl"]).tdp_w == pytest.approx(ref)
    assert api.search_spec(["gpt2-xl"], tdp_w=None).tdp_w is None
    assert api.search_spec(["gpt2-xl"], tdp_w=300.0).tdp_w == 300.0
    assert api.search_spec(["gpt2-xl"], space="paper").tdp_w is None


def test_cli_values(cli):
    from phaze.cli import build_parser
    from phaze.cli.commands import _search_kw
    p = build_parser()
    base = ["search", "--model", "gpt2-xl"]
    assert _search_kw(p.parse_args(base))["tdp_w"] == "reference"
    assert _search_kw(p.parse_args(base + ["--tdp-w", "none"]))["tdp_w"] is None
    assert _search_kw(p.parse_args(base + ["--tdp-w", "250"]))["tdp_w"] == 250.0
    for bad in ("inf", "nan", "0", "-3", "lots"):
        code, out, err = cli(*base, f"--tdp-w={bad}", "--store", "/nonexistent/x.db")
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--tdp-w" in err


def test_setting_says_the_cap():
    rows = dict(api.search_setting(api.search_spec(["gpt2-xl"])))
    assert "peak power exceeds" in rows["power cap"]
    assert rows["power cap"].startswith("chips")
    assert dict(api.search_setting(api.search_spec(["gpt2-xl"], tdp_w=None)))["power cap"].startswith("none")


def test_perf_per_watt_beside_throughput(tmp_path):
    from phaze.report.search import per_watt_text
    from phaze.search import SearchSpec, run_search
    from tinysearch import SPACE, TINY

    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1,),
                      recompute_modes=("none",), devices=16, global_batch=32)
    res = run_search(spec, str(tmp_path / "s.db"), workers=1, quiet=True)
    o, r = res.best.outcomes[0], res.references[0]
    assert o.power_w > 0 and r.power_w > 0
    assert per_watt_text(res.best, res) == (f"; seq/s per W of average power: tiny "
                                            f"{o.throughput_seq_per_s / o.power_w:.1f} vs TPUv4-like "
                                            f"{r.best_seq_per_s / r.power_w:.1f}")
