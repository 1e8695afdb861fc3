"""Issue 34 item 8: the winner written as a chip file that evaluate/plan/search take; evaluating its stored plan on
that file gives the throughput the search reported."""
import pytest

from phaze import api
from phaze.errors import ConfigError
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, evaluate
from phaze.search import SearchSpec, run_search
from tinysearch import SPACE, TINY


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_exported_winner_re_evaluates_to_the_reported_throughput(tmp_path, suffix):
    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                      recompute_modes=("none", "full"), devices=16, global_batch=32)
    res = run_search(spec, str(tmp_path / "s.db"), workers=1, quiet=True)
    path = api.export_chip(res, str(tmp_path / f"winner{suffix}"))
    acc = get_accelerator(path)
    assert acc.name == "winner" and acc.num_tc == res.best.num_tc and acc.hbm_bytes == res.best.hbm_gib * 2**30
    o = res.best.outcomes[0]
    # the chip file holds the chip; its network (issue 34 item 5) is the result's ``network``, on which it is scored
    from phaze.hardware.chip_network import ChipNetwork, network_cluster
    n = res.network
    cluster = network_cluster(ChipNetwork(n["scale_up_chips"], n["scale_up_Bps"], n["topology"], n["scale_out_Bps"]),
                              spec.devices) if n else get_cluster(spec.cluster, spec.devices)
    ev = evaluate(Plan.from_dict(o.plan_json), TINY, acc, cluster, spec.global_batch, schedule_time_limit_s=1.0)
    assert ev.throughput_seq_per_s == pytest.approx(o.throughput_seq_per_s, rel=1e-9)
    assert not (tmp_path / f"winner{suffix}.part").exists()


def test_bad_export_paths_are_refused_before_work(tmp_path):
    for bad in (str(tmp_path / "no-such-dir" / "w.json"), str(tmp_path / "w.txt"), str(tmp_path)):
        with pytest.raises(ConfigError, match="--export-chip"):
            api.check_export_path(bad)



def test_cli_exports_the_winner_and_refuses_a_bad_path_first(cli, tmp_path):
    import os

    code, out, err = cli("search", "--model", "gpt2-xl", "--store", str(tmp_path / "s.db"), "--export-chip",
                         str(tmp_path / "none" / "w.json"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--export-chip" in err
    assert not os.path.exists(tmp_path / "s.db")  # refused before any work
