"""Why the winner wins (issue 34 item 7): the steps multiply to the total, each step equals an independent
evaluation of the two chips it compares, one differing resource gives one non-1 step, an unevaluable chip is
merged with the next step. And the Pareto fronts (item 6): non-dominated and complete against brute force."""
import math
import random
from dataclasses import replace

import pytest

from phaze.errors import InfeasibleError
from phaze.hardware.presets import TPUV4_LIKE, get_cluster
from phaze.placement import optimize
from phaze.search import SearchSpec, run_search
from phaze.search.fronts import front_2d
from phaze.search.spec import SCHEDULE_TIME_LIMIT_S
from phaze.search.why import decompose, wins_because
from tinysearch import SPACE, TINY


def spec(**kw):
    base = dict(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                recompute_modes=("none", "full"), devices=16, global_batch=32)
    base.update(kw)
    return SearchSpec(**base)


def independent_tput(s, chip, cluster=None) -> float:
    """The chip's best-plan throughput straight from the plan optimizer (not through the decomposition), on
    ``cluster`` (default: the search's), at the search's schedule budget (with shared bandwidth a layer's time
    can depend on it: the schedules the branch and bound passes are re-timed)."""
    res = optimize(TINY, chip, cluster or get_cluster(s.cluster, s.devices), s.global_batch, s.runtime,
                   s.plan_space, devices=s.devices, top_k=0, baselines=False,
                   schedule_time_limit_s=SCHEDULE_TIME_LIMIT_S)
    return res.best.throughput_seq_per_s


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    s = spec()
    return s, run_search(s, str(tmp_path_factory.mktemp("why") / "s.db"), workers=1, quiet=True)


def test_steps_multiply_to_the_total_and_each_is_a_real_evaluation(searched):
    s, res = searched
    assert set(res.wins_because) <= {s.space.reference.name, s.space.real_reference.name}
    assert s.space.reference.name in res.wins_because
    steps = res.wins_because[s.space.reference.name]
    total = res.best.outcomes[0].throughput_seq_per_s / res.references[0].best_seq_per_s
    assert math.prod(st["speedup"] for st in steps) == pytest.approx(total, rel=1e-12)
    assert steps[-1]["cumulative"] == pytest.approx(total, rel=1e-12) == pytest.approx(res.best.score, rel=1e-12)
    # rebuild every intermediate chip from the fields each step changed and evaluate it on its own: the chip steps
    # on the reference's network (TPU v4's ICI, the space has a network axis), the network step moves the winner's
    # chip onto the winner's network (issue 34 item 5)
    from phaze.hardware.chip_network import ChipNetwork, network_cluster

    assert res.reference_network["name"] == s.space.reference_network.name
    cluster = network_cluster(s.space.reference_network, s.devices)
    chip = s.space.reference
    before = independent_tput(s, chip, cluster)
    assert before == pytest.approx(res.references[0].best_seq_per_s, rel=1e-12)
    changed_any = False
    for st in steps:
        if not st["changed"]:
            assert st["speedup"] == 1.0
            continue
        changed_any = True
        if st["resource"] == "network (cluster)":
            n = res.network
            assert st["changed"] == {"network": [res.reference_network["name"], n["name"]]}
            cluster = network_cluster(ChipNetwork(n["scale_up_chips"], n["scale_up_Bps"], n["topology"],
                                                  n["scale_out_Bps"]), s.devices)
        else:
            chip = replace(chip, **{k: v[1] for k, v in st["changed"].items()})
        after = independent_tput(s, chip, cluster)
        assert st["seq_per_s"][0] == pytest.approx(after, rel=1e-12)
        assert st["speedup"] == pytest.approx(after / before, rel=1e-12)
        before = after
    assert changed_any
    assert before == pytest.approx(res.best.outcomes[0].throughput_seq_per_s, rel=1e-12)  # it ends at the winner
    assert [st["resource"] for st in steps][-2:] == ["network (cluster)", "plan space"]


def test_one_differing_resource_gives_one_non_1_step():
    s = spec()
    more_lanes = replace(TPUV4_LIKE, num_vc=8, name="more-lanes")
    (steps,) = wins_because(s, get_cluster(s.cluster, s.devices), more_lanes, {"tpuv4-like": TPUV4_LIKE}).values()
    moved = [st for st in steps if st["speedup"] != 1.0]
    assert len(moved) == 1 and moved[0]["resource"].startswith("vector lanes")
    assert moved[0]["changed"] == {"num_vc": [2, 8]}
    ratio = independent_tput(s, more_lanes) / independent_tput(s, TPUV4_LIKE)
    assert ratio != pytest.approx(1.0, rel=1e-6)  # the hand case really moves the throughput
    assert moved[0]["speedup"] == pytest.approx(ratio, rel=1e-12)
    assert all(st["note"] for st in steps if st is not moved[0])  # every other step says why it is 1


def test_prefetched_steps_on_an_executor_equal_the_sequential_decomposition():
    """wins_because with the search's pool (every intermediate chip of ``step_chips`` evaluated ahead, through
    ``chip_throughput``) gives the same steps as one chip after another here; the chain ends at the winner."""
    from dataclasses import asdict

    from phaze.search.executor import InlineExecutor
    from phaze.search.why import step_chips

    s = spec()
    winner = replace(TPUV4_LIKE, num_vc=8, glb_bytes=TPUV4_LIKE.glb_bytes // 2, name="winner")
    chain = step_chips(TPUV4_LIKE, winner)
    assert len(chain) == 2  # vector lanes, then GLB size
    assert {k: v for k, v in asdict(chain[-1]).items() if k != "name"} == \
        {k: v for k, v in asdict(winner).items() if k != "name"}
    cluster = get_cluster(s.cluster, s.devices)
    seq = wins_because(s, cluster, winner, {"tpuv4-like": TPUV4_LIKE})
    pooled = wins_because(s, cluster, winner, {"tpuv4-like": TPUV4_LIKE}, executor=InlineExecutor())
    assert pooled == seq
    assert [st["resource"] for st in seq["tpuv4-like"] if st["changed"]] == \
        ["vector lanes (vector cores x lanes)", "GLB size"]


def test_an_unevaluable_step_is_merged_with_the_next():
    """A stub evaluation with no plan on a chip that has the winner's MACs but the reference's lanes: the MAC
    step is merged into the lanes step, which says so, and the product still equals the total."""
    winner = replace(TPUV4_LIKE, num_tc=16, num_vc=8, name="w")
    tput = {TPUV4_LIKE.num_tc + 100 * TPUV4_LIKE.num_vc: 10.0, 16 + 800: 25.0}

    def evaluate(model, chip):
        key = chip.num_tc + 100 * chip.num_vc
        if key not in tput:
            raise InfeasibleError("no plan fits")
        return tput[key]

    steps = decompose(TPUV4_LIKE, winner, (TINY,), evaluate)
    merged = [st for st in steps if "+" in st["resource"]]
    assert len(merged) == 1 and merged[0]["resource"].startswith("MACs") and "vector lanes" in merged[0]["resource"]
    assert "merged" in merged[0]["note"] and merged[0]["speedup"] == 2.5
    assert merged[0]["changed"] == {"num_tc": [8, 16], "num_vc": [2, 8]}
    assert math.prod(st["speedup"] for st in steps) == 2.5


def _brute_front(xs, ys):
    """Points no other point dominates: x no larger and y no smaller, strictly better in one, or equal in both
    and listed earlier."""
    n = len(xs)
    out = []
    for i in range(n):
        dominated = any(xs[j] <= xs[i] and ys[j] >= ys[i] and (xs[j] < xs[i] or ys[j] > ys[i] or j < i)
                        for j in range(n) if j != i)
        if not dominated:
            out.append(i)
    return out


def test_front_2d_equals_brute_force_with_ties():
    rng = random.Random(7)
    for trial in range(200):
        n = rng.randint(0, 12)
        xs = [float(rng.randint(0, 5)) for _ in range(n)]  # few values: many ties
        ys = [float(rng.randint(0, 5)) for _ in range(n)]
        got = front_2d(xs, ys)
        assert sorted(got) == _brute_front(xs, ys), (xs, ys)
        assert [xs[i] for i in got] == sorted(xs[i] for i in got)  # in order of x
    # by hand: (1, 1) and (2, 3) are on it; (2, 2) is beaten by (2, 3); (3, 3) by (2, 3); the second (1, 1) is a tie
    assert front_2d([1, 2, 2, 3, 1], [1, 3, 2, 3, 1]) == [0, 1]


def test_search_fronts_are_non_dominated_among_its_exact_chips(searched):
    from phaze.api import exact_rows
    from phaze.search.fronts import fronts, point_rows

    s, res = searched
    from phaze.search.objective import search_candidates

    # the candidates as the search numbers them: (chip, network) pairs (issue 34 item 5)
    pts = point_rows(exact_rows(res.store), res.references, search_candidates(s.space, s.tdp_w, s.objective))
    assert res.fronts == fronts(pts)
    for key in ("area_mm2", "peak_power_w", "tco_usd"):
        keys = [(p["chip"], p["hbm_gib"]) for p in pts]
        brute = _brute_front([p[key] for p in pts], [p["throughput_x"] for p in pts])
        assert sorted((p["chip"], p["hbm_gib"]) for p in res.fronts[key]) == sorted(keys[i] for i in brute)
        assert max(p["throughput_x"] for p in res.fronts[key]) == pytest.approx(res.best.score, rel=1e-12)


def test_perf_per_dollar_pruned_equals_brute_force(tmp_path):
    """perf-per-dollar weighs each (chip, HBM size) by its TCO at peak power (HBM priced per size): the pruned
    search equals brute force, and each score is the throughput ratio over the TCO ratio."""
    from phaze.hardware.cost import chip_tco
    from phaze.search import Store
    from phaze.units import GiB

    s = spec(objective="perf-per-dollar")
    a = run_search(s, str(tmp_path / "a.db"), workers=1, quiet=True)
    b = run_search(s, str(tmp_path / "b.db"), workers=1, quiet=True, prune=False)
    assert a.counts["pruned"] + a.counts["bounded"] > 0, "the bounds pruned nothing on this space"
    assert (a.best.chip, a.best.hbm_gib) == (b.best.chip, b.best.hbm_gib)
    assert a.best.score == pytest.approx(b.best.score, rel=1e-12)
    from phaze.search.objective import search_candidates

    # (chip, network) candidates as the search numbers them; every TCO with its network (issue 34 item 5), the
    # reference's with TPU v4's ICI
    cands = search_candidates(s.space, s.tdp_w, s.objective)
    ref_tco = chip_tco(s.space.reference, network=s.space.reference_network)["total_usd"]
    ref = b.references[0].best_seq_per_s
    rows = {(r["chip"], r["hbm_gib"]): r for r in Store.open_existing(b.store).rows()}
    for (c, g), r in rows.items():
        acc = replace(cands.arch.accelerator(c), hbm_bytes=g * GiB)
        tput = r["outcomes"][0]["throughput_seq_per_s"]
        tco = chip_tco(acc, network=cands.network(c))["total_usd"]
        assert r["score"] == pytest.approx(tput / ref / (tco / ref_tco), rel=1e-9)
    for r in Store.open_existing(a.store).rows(status="exact"):  # every chip the pruned run evaluated agrees
        assert r["score"] == pytest.approx(rows[(r["chip"], r["hbm_gib"])]["score"], rel=1e-12)
    assert a.best.score == pytest.approx(max(r["score"] for r in rows.values()), rel=1e-12)
    # the same chip at both HBM sizes: the larger costs more, so with equal throughput it scores less
    both = [c for c in {c for c, _ in rows} if all((c, g) in rows for g in s.hbm_gib)]
    assert any(rows[(c, 1)]["score"] > rows[(c, 2)]["score"] for c in both)
