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


def test_the_exported_file_carries_its_network_and_evaluate_and_plan_run_on_it(tmp_path):
    """Issue 34 items 5 and 8: the winner of a space with a network axis is written with its own network; with no
    --cluster, evaluate (its stored plan, by shape) and plan (the search's plan space and runtime) run on that
    network and give the throughput the search reported; the flat 4 GiB/s cluster of a preset chip gives less."""
    from phaze.api import PlanShape
    from phaze.hardware.chip_network import network_cluster
    from phaze.hardware.presets import load_accelerator_network

    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                      recompute_modes=("none", "full"), devices=16, global_batch=32)
    res = run_search(spec, str(tmp_path / "s.db"), workers=1, quiet=True)
    assert res.network is not None  # the tiny space has the default network axis
    path = api.export_chip(res, str(tmp_path / "winner.yaml"))
    net = load_accelerator_network(path)
    assert net.to_dict() == res.network
    o = res.best.outcomes[0]
    plan = Plan.from_dict(o.plan_json)
    L = TINY.num_layers
    blocks = tuple(sum(1 for layer in range(a, b) if 1 <= layer <= L) for a, b in plan.stages)
    shape = PlanShape(tp=plan.tp, pp=plan.pp, dp=plan.dp, mbs=plan.microbatch_size, interleave=plan.interleave,
                      recompute=plan.recompute, sequence_parallel=plan.sequence_parallel, zero=plan.zero,
                      stage_layers=blocks)
    ev = api.evaluate_plan(TINY, path, spec.devices, spec.global_batch, shape, runtime=plan.runtime)
    assert ev.throughput_seq_per_s == pytest.approx(o.throughput_seq_per_s, rel=1e-9)
    best = api.plan(TINY, path, spec.devices, spec.global_batch, runtime=spec.runtime, space=spec.plan_space,
                    top_k=1).best
    assert best.throughput_seq_per_s == pytest.approx(o.throughput_seq_per_s, rel=1e-9)
    # the same chip given the flat 4 GiB/s network explicitly: slower, so the network really is the file's
    flat = api.evaluate_plan(TINY, path, spec.devices, spec.global_batch, shape, cluster="flat-4gib",
                             runtime=plan.runtime)
    assert flat.throughput_seq_per_s < o.throughput_seq_per_s
    on_net = evaluate(plan, TINY, get_accelerator(path), network_cluster(net, spec.devices), spec.global_batch)
    assert on_net.throughput_seq_per_s == pytest.approx(ev.throughput_seq_per_s, rel=1e-12)


def test_a_bad_network_in_a_chip_file_is_one_line(tmp_path):
    import yaml

    from phaze.hardware.presets import ACCELERATORS
    from dataclasses import asdict

    fields = asdict(ACCELERATORS["tpuv4-like"])
    fields["network"] = {"scale_up_chips": 64, "scale_up_Bps": 100e9, "topology": "ring", "scale_out_Bps": 0.0}
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(fields))
    with pytest.raises(ConfigError, match="network.*topology") as e:
        get_accelerator(str(p))
    assert "\n" not in str(e.value)


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
