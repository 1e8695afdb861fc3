"""The co-search in the full plan space (`--plan-space full`): its winner is exhaustive evaluation's (every chip
and HBM size through ``phaze.placement.optimize`` in the same plan space and runtime), its per-chip bounds stay
above every exact throughput, it never loses to the paper's plan space on the same chips, and the paper's space
is what `--space paper` and the stores written before the option get."""
from dataclasses import replace

import numpy as np
import pytest

from phaze.hardware.presets import get_cluster
from phaze.hardware.space import DesignSpace, enumerate_space
from phaze.placement import optimize
from phaze.schedule import ScheduleCache
from phaze.search import SearchSpec, Store, run_search
from phaze.placement.best_first import plan_units
from phaze.search.bounds import bottleneck_s, min_bottleneck_s, model_bounds
from phaze.search.spec import CHIP_RUNTIME
from phaze.units import GiB, MiB
from phaze.workload.runtime import PAPER_RUNTIME
from tinysearch import TINY

# a few chips of the tiny space (1 or 16 tensor cores of 16 or 64 columns, 4 vector cores): small enough to
# evaluate every chip and HBM size with optimize() (~1 s each). Without the network axis (every chip on the
# search's cluster): this file checks the plan space; the exact search over (chip, network) pairs is checked
# against brute force in tests/search/test_search.py and tests/search/test_why.py
SMALL = DesignSpace(num_tc=(1, 16), num_vc=(4,), tc_widths=(16, 64), tc_depths=(16,), glb_bytes=(2 * MiB,)
                    ).without_network()


def spec(**kw):
    base = dict(models=(TINY,), space=SMALL, space_name="small", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                devices=16, global_batch=32, plan_space_name="full")
    base.update(kw)
    return SearchSpec(**base)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    pruned = run_search(spec(), str(d / "a.db"), workers=1, quiet=True, why=False)
    paper = run_search(spec(plan_space_name="paper"), str(d / "p.db"), workers=1, quiet=True, why=False)
    return pruned, paper


@pytest.fixture(scope="module")
def exhaustive():
    """{(chip, HBM GiB): throughput} of every candidate by optimize() in the search's plan space and runtime."""
    s = spec()
    cands = enumerate_space(SMALL)
    cluster, cache = get_cluster(s.cluster, s.devices), ScheduleCache()
    out = {}
    for i in range(len(cands)):
        for g in s.hbm_gib:
            acc = replace(cands.arch.accelerator(i), hbm_bytes=g * GiB)
            res = optimize(TINY, acc, cluster, s.global_batch, s.runtime, s.plan_space, devices=s.devices, top_k=0,
                           baselines=False, schedule_cache=cache)
            out[(i, g)] = (res.best.throughput_seq_per_s, res.best.plan)
    return out


def test_full_space_winner_is_exhaustive_optimize(runs, exhaustive):
    pruned, _ = runs
    assert len(exhaustive) >= 8
    assert pruned.counts["pruned"] + pruned.counts["bounded"] > 0, "the bounds ruled nothing out here"
    ref = pruned.references[0].best_seq_per_s
    best = max(t for t, _ in exhaustive.values())
    assert pruned.best.score == pytest.approx(best / ref, rel=1e-9)
    want = min((k for k, (t, _) in exhaustive.items() if t >= best * (1 - 1e-9)),
               key=lambda k: (float(enumerate_space(SMALL).area_mm2[k[0]]), k[1], k[0]))
    assert (pruned.best.chip, pruned.best.hbm_gib) == want
    for r in Store.open_existing(pruned.store).rows():  # every chip the search evaluated exactly agrees
        t = r["outcomes"][0]["throughput_seq_per_s"]
        assert t == pytest.approx(exhaustive[(r["chip"], r["hbm_gib"])][0], rel=1e-9)
    # the full space is used: some chip's best plan leaves the paper's (ZeRO, interleaving, SP, mixed modes)
    plans = [p for _, p in exhaustive.values()]
    assert any(p.zero or p.interleave > 1 or p.sequence_parallel or not p.recompute.is_uniform for p in plans)


def test_unit_bounds_never_below_exact(exhaustive):
    s = spec()
    cands = enumerate_space(SMALL)
    mb = model_bounds(TINY, s, cands.arch, get_cluster(s.cluster, s.devices))
    assert mb.units and all(len(u) == len(s.recompute_modes) for u in mb.units)  # a unit per (mbs, t, sp)
    assert mb.setting_ub.shape[0] == len(mb.units) < len(mb.settings)
    for (chip, g), (t, _) in exhaustive.items():
        assert mb.throughput_ub[s.hbm_gib.index(g), chip] >= t * (1 - 1e-9)


def test_full_space_never_loses_to_the_papers(runs, exhaustive):
    """A superset of plans on the same chips: every chip's throughput, and so the winner's, is at least the paper
    space's (the scores are not compared: the reference gains too)."""
    pruned, paper = runs
    full_best = pruned.best.outcomes[0].throughput_seq_per_s
    assert full_best >= paper.best.outcomes[0].throughput_seq_per_s * (1 - 1e-12)
    for r in Store.open_existing(paper.store).rows():
        assert exhaustive[(r["chip"], r["hbm_gib"])][0] >= r["outcomes"][0]["throughput_seq_per_s"] * (1 - 1e-9)
    assert pruned.references[0].best_seq_per_s >= paper.references[0].best_seq_per_s * (1 - 1e-12)
    # the paper's fixed plan is scored under the paper's runtime in both
    assert pruned.references[0].paper_seq_per_s == pytest.approx(paper.references[0].paper_seq_per_s, rel=1e-12)


def test_specs_of_the_two_plan_spaces():
    full, paper = spec(), spec(plan_space_name="paper")
    assert paper.runtime == PAPER_RUNTIME and paper.recompute_modes == ("none", "full")
    assert full.runtime == CHIP_RUNTIME and full.recompute_modes == ("none", "selective", "full")
    assert full.paper_plan_runtime == paper.paper_plan_runtime == PAPER_RUNTIME.with_(dp_overlap=False)
    ps = full.plan_space
    assert (ps.zero, ps.interleave_values, ps.per_stage_recompute, ps.sequence_parallel) == \
        ((0, 1, 2, 3), None, True, (False, True))
    # t = 2 settings come with and without sequence parallelism in the full space only
    assert {s.sequence_parallel for s in full.settings(TINY) if s.tp == 2} == {False, True}
    assert {s.sequence_parallel for s in paper.settings(TINY)} == {False}
    assert len(full.settings(TINY)) == 2 * 3 * 3 and len(paper.settings(TINY)) == 2 * 2 * 2
    # stores written before the option searched the paper's space: its fingerprint is unchanged
    assert "plan_space" not in paper.fingerprint() and full.fingerprint()["plan_space"] == "full"
    assert full.key() != paper.key()
    with pytest.raises(Exception, match="--plan-space"):
        spec(plan_space_name="huge")


def test_api_defaults_full_except_on_the_papers_template():
    from phaze import api
    assert api.search_spec(["gpt2-xl"]).plan_space_name == "full"
    assert api.search_spec(["gpt2-xl"], space="paper").plan_space_name == "paper"
    assert api.search_spec(["gpt2-xl"], space="paper", plan_space="full").plan_space_name == "full"
    assert api.search_spec(["gpt2-xl"], plan_space="paper").recompute_modes == ("none", "full")


def test_plan_units_group_settings_that_differ_in_recompute_only():
    s = spec()
    settings = s.settings(TINY)
    units = plan_units(settings, True)
    assert sorted(i for u in units for i in u) == list(range(len(settings)))
    for u in units:
        assert len({replace(settings[i], recompute="none") for i in u}) == 1
        assert [settings[i].recompute for i in u] == list(s.recompute_modes)
    assert plan_units(settings, False) == tuple((i,) for i in range(len(settings)))


def test_interleaved_bottleneck_by_hand():
    """With v > 1 Megatron's partition is fixed: the first device holds the embedding and L/p blocks, the last
    the head and L/p blocks. L = 8, p = 2, v = 2, e = 5, b = 1, h = 0.5: max T >= 5 + 4 = 9, above the best
    contiguous split's (stage 0 = e + k blocks, stage 1 = 8 - k blocks + h; k = 2: max(7, 6.5) = 7)."""
    e, b, h = np.array([5.0]), np.array([1.0]), np.array([0.5])
    assert float(bottleneck_s(e, b, h, 8, 2, 2)[0]) == 9.0
    assert float(min_bottleneck_s(e, b, h, 8, 2)[0]) == 7.0
    assert float(bottleneck_s(e, b, h, 8, 2, 1)[0]) == 7.0
