"""Co-search: pruning gives the brute-force answer; the store resumes, refuses other runs, survives SIGKILL."""
import os
import signal
import subprocess
import sys
import time

import pytest

from phaze.errors import StoreError
from phaze.hardware.chip_network import TPUV4_ICI, network_cluster
from phaze.hardware.presets import get_cluster
from phaze.hardware.space import DesignSpace
from phaze.search import SearchSpec, Store, run_search
from phaze.search.bounds import model_bounds
from phaze.workload.config import ModelConfig
from tinysearch import SPACE, TINY


def spec(**kw):
    base = dict(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                recompute_modes=("none", "full"), devices=16, global_batch=32)
    base.update(kw)
    return SearchSpec(**base)


@pytest.fixture(scope="module")
def pruned_and_brute(tmp_path_factory):
    d = tmp_path_factory.mktemp("search")
    a = run_search(spec(), str(d / "a.db"), workers=1, quiet=True)
    b = run_search(spec(), str(d / "b.db"), workers=1, quiet=True, prune=False)
    return a, b, d


def test_pruned_search_equals_brute_force(pruned_and_brute):
    a, b, _ = pruned_and_brute
    assert b.counts["pruned"] == 0 and b.counts["bounded"] == 0
    assert a.counts["pruned"] + a.counts["bounded"] > 0, "the bounds pruned nothing on this space"
    assert (a.best.chip, a.best.hbm_gib) == (b.best.chip, b.best.hbm_gib)
    assert a.best.score == pytest.approx(b.best.score, rel=1e-12)
    exact_b = {(r["chip"], r["hbm_gib"]): r["score"] for r in Store.open_existing(b.store).rows()}
    for r in Store.open_existing(a.store).rows():  # every candidate the pruned run evaluated agrees
        assert r["score"] == pytest.approx(exact_b[(r["chip"], r["hbm_gib"])], rel=1e-12)
    assert a.best.score == max(exact_b.values())


def test_vectorized_bound_never_below_exact(pruned_and_brute):
    _, b, _ = pruned_and_brute
    s = spec()
    from phaze.hardware.chip_network import fastest, network_cluster
    from phaze.search.candidate_columns import NetworkCandidates
    from phaze.search.objective import search_candidates
    from phaze.search.run import candidate_clusters

    cands = search_candidates(s.space, s.tdp_w, s.objective)  # (chip, network) pairs, as the search numbers them
    net = NetworkCandidates(cands.base, cands.chip_index, cands.network_index, candidate_clusters(s, cands),
                            network_cluster(fastest(cands.networks), s.devices))
    mb = model_bounds(TINY, s, None, None, net=net)
    ref = b.references[0].best_seq_per_s
    for r in Store.open_existing(b.store).rows():
        h = s.hbm_gib.index(r["hbm_gib"])
        tput = r["outcomes"][0]["throughput_seq_per_s"]
        assert mb.throughput_ub[h, r["chip"]] >= tput * (1 - 1e-9)
        assert r["score"] == pytest.approx(tput / ref)


def test_pareto_front_is_monotone(pruned_and_brute):
    a, _, _ = pruned_and_brute
    areas = [r.area_mm2 for r in a.pareto]
    scores = [r.score for r in a.pareto]
    assert areas == sorted(areas) and scores == sorted(scores) and len(set(scores)) == len(scores)
    assert a.pareto[-1].score == a.best.score


def test_pareto_mode_front_equals_brute_force(pruned_and_brute, tmp_path):
    """--pareto prunes only what a no-larger chip beats: its front is the brute-force front, and it still
    prunes something on this space."""
    _, b, _ = pruned_and_brute
    c = run_search(spec(pareto=True), str(tmp_path / "c.db"), workers=1, quiet=True)
    assert c.counts["pruned"] + c.counts["bounded"] > 0, "Pareto mode pruned nothing on this space"
    key = [(r.chip, r.hbm_gib) for r in b.pareto]
    assert [(r.chip, r.hbm_gib) for r in c.pareto] == key
    assert [r.score for r in c.pareto] == pytest.approx([r.score for r in b.pareto], rel=1e-12)
    assert (c.best.chip, c.best.hbm_gib) == (b.best.chip, b.best.hbm_gib)
    with pytest.raises(StoreError, match="pareto"):  # a Pareto store is another run
        run_search(spec(), c.store, workers=1, quiet=True, resume=True)


def test_store_refuses_other_parameters_and_overwrite(pruned_and_brute):
    a, _, d = pruned_and_brute
    with pytest.raises(StoreError, match="global_batch"):
        run_search(spec(global_batch=64), a.store, workers=1, quiet=True, resume=True)
    with pytest.raises(StoreError, match="already exists"):
        run_search(spec(), a.store, workers=1, quiet=True)
    bad = d / "junk.db"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not a phaze search store"):
        run_search(spec(), str(bad), workers=1, quiet=True, resume=True)


def test_resume_recomputes_nothing(pruned_and_brute):
    a, _, _ = pruned_and_brute
    again = run_search(spec(), a.store, workers=1, quiet=True, resume=True)
    assert again.counts["chips_evaluated_this_run"] == 0
    assert again.best == a.best


@pytest.mark.slow
def test_sigkill_then_resume_gives_the_same_answer(pruned_and_brute, tmp_path):
    a, b, _ = pruned_and_brute
    store = tmp_path / "killed.db"
    script = (
        "import sys; sys.path[:0] = [%r, %r]\n"  # test_search and the tinysearch it imports
        "from test_search import spec\n"
        "from phaze.search import run_search\n"
        "if __name__ == '__main__':\n"
        "    run_search(spec(), %r, workers=1, quiet=True, prune=False)\n"
    ) % (os.path.dirname(__file__), os.path.dirname(os.path.dirname(__file__)), str(store))
    proc = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.time() + 120
    stored = 0
    while time.time() < deadline and proc.poll() is None:  # kill once a few chips are committed
        time.sleep(0.2)
        if store.exists():
            try:
                s = Store.open_existing(store)
                stored = len(s.rows(status=None))
                s.close()
            except StoreError:
                stored = 0
            if stored >= 4:
                break
    assert proc.poll() is None, "the run finished before it could be killed; make the space larger"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kept = Store.open_existing(store)
    before = {(r["chip"], r["hbm_gib"]): r["score"] for r in kept.rows(status=None)}
    kept.close()
    assert len(before) >= 4
    res = run_search(spec(), str(store), workers=1, quiet=True, prune=False, resume=True)
    chips_before = {c for c, _ in before}
    assert res.counts["chips_evaluated_this_run"] == res.counts["chips"] - len(chips_before)
    after = {(r["chip"], r["hbm_gib"]): r["score"] for r in Store.open_existing(store).rows(status=None)}
    assert all(after[k] == v for k, v in before.items())  # nothing stored was lost or overwritten
    assert (res.best.chip, res.best.hbm_gib, res.best.score) == (b.best.chip, b.best.hbm_gib, b.best.score)


SMALL = ModelConfig(name="small", num_layers=2, hidden=128, heads=2, ffn=512, vocab=1000, seq_len=256, max_tp=2)


def test_two_models_store_per_model_results_and_the_joint_winner(tmp_path):
    """The inner-loop check of a two-model search (the brute-force comparison is the slow test below): on
    a few chips, the joint winner is the best joint score stored, each model's own best is among its
    stored rows, and ``results --model`` reads them."""
    from phaze import api
    from phaze.errors import ConfigError

    few = DesignSpace(num_tc=(1, 4), num_vc=(1,), tc_widths=(16, 64), tc_depths=(16,), glb_bytes=(32 * 2**20,))
    both = run_search(spec(models=(TINY, SMALL), space=few, hbm_gib=(2,), microbatch_sizes=(1,),
                           recompute_modes=("none",)), str(tmp_path / "j.db"), workers=1, quiet=True, prune=False)
    assert [r.model for r in both.per_model] == ["tiny", "small"]
    assert api.results(both.store, top=1)[0].chip == both.best.chip
    for k, m in enumerate(("tiny", "small")):
        top = api.results(both.store, top=1, model=m)[0]
        assert (top.chip, top.hbm_gib) == (both.per_model[k].chip, both.per_model[k].hbm_gib)
    with pytest.raises(ConfigError, match="not in this store"):
        api.results(both.store, model="gpt3-175b")


@pytest.mark.slow
def test_two_models_report_each_models_own_best_chip(tmp_path):
    """With two models, each model's own best chip equals a brute-force search of that model alone, and the
    joint winner equals the joint brute force."""
    both = run_search(spec(models=(TINY, SMALL)), str(tmp_path / "j.db"), workers=1, quiet=True)
    brute = run_search(spec(models=(TINY, SMALL)), str(tmp_path / "jb.db"), workers=1, quiet=True, prune=False)
    assert (both.best.chip, both.best.hbm_gib) == (brute.best.chip, brute.best.hbm_gib)
    assert [r.model for r in both.per_model] == ["tiny", "small"]
    for k, m in enumerate((TINY, SMALL)):
        alone = run_search(spec(models=(m,)), str(tmp_path / f"a{k}.db"), workers=1, quiet=True, prune=False)
        got = both.per_model[k]
        assert got.score == pytest.approx(alone.best.score, rel=1e-12)
        assert (got.chip, got.hbm_gib) == (alone.best.chip, alone.best.hbm_gib)
    assert both.counts["per_model"]["tiny"]["exact"] >= 1
    from phaze import api
    from phaze.errors import ConfigError
    top = api.results(both.store, top=1, model="small")[0]
    assert (top.chip, top.hbm_gib) == (both.per_model[1].chip, both.per_model[1].hbm_gib)
    assert api.results(both.store, top=1)[0].chip == both.best.chip
    with pytest.raises(ConfigError, match="not in this store"):
        api.results(both.store, model="gpt3-175b")


def test_front_table_keeps_ends_and_caps_rows():
    from phaze.report.search import thin
    rows = list(range(212))
    shown = thin(rows, 25)
    assert len(shown) == 25 and shown[0] == 0 and shown[-1] == 211 and shown == sorted(set(shown))
    assert thin([5, 6], 25) == [5, 6]


def test_model_threshold_of_a_mean_score():
    """Two models, incumbent mean 1.5: with the other model at most 2.0, this one needs 1.0 (less the tie
    tolerance); with the other already at 3.0 it needs nothing."""
    from phaze.search.exact import TIE_RTOL, _model_threshold
    assert _model_threshold(1.5, [0.7, 2.0], 0) == pytest.approx(3.0 * (1 - TIE_RTOL) - 2.0, rel=1e-15)
    assert _model_threshold(1.5, [0.7, 2.0], 1) == pytest.approx(3.0 * (1 - TIE_RTOL) - 0.7, rel=1e-15)
    assert _model_threshold(1.5, [3.0, 2.0], 1) == 0.0


def test_objective_and_tdp_pruned_equal_brute_force(pruned_and_brute, tmp_path):
    """perf-per-watt under a TDP: the pruned search equals brute force, the TDP leaves out exactly the chips
    above it, and each score is the throughput ratio over the peak-power ratio (phaze.search.objective)."""
    from phaze.hardware.chip_network import network_power_w
    from phaze.hardware.power import peak_power_w
    from phaze.search.objective import search_candidates
    _, b, _ = pruned_and_brute
    # the (chip, network) candidates of perf-per-watt before the cap; a peak power includes the network's PHY
    # (issue 34 item 5), the reference's its TPU v4 ICI's
    cands = search_candidates(SPACE, None, "perf-per-watt")
    peak = cands.peak_power_w()
    assert peak == pytest.approx(peak_power_w(cands.arch) + network_power_w([cands.network(i) for i in
                                                                             range(len(cands))]), rel=1e-12)
    tdp = float(sorted(peak)[len(peak) // 2])  # about half the chips stay
    s = spec(objective="perf-per-watt", tdp_w=tdp)
    a = run_search(s, str(tmp_path / "a.db"), workers=1, quiet=True)
    c = run_search(s, str(tmp_path / "c.db"), workers=1, quiet=True, prune=False)
    assert a.counts["chips"] == int((peak <= tdp).sum()) < len(cands)
    assert (a.best.chip, a.best.hbm_gib) == (c.best.chip, c.best.hbm_gib)
    assert a.best.peak_power_w <= tdp
    ref_peak = peak_power_w(SPACE.reference) + network_power_w(SPACE.reference_network)
    tput = a.best.outcomes[0].throughput_seq_per_s
    ref = a.references[0].best_seq_per_s
    assert a.best.score == pytest.approx(tput / ref / (a.best.peak_power_w / ref_peak), rel=1e-9)
    # the brute-force throughput run (no TDP) has a best chip at least as fast
    assert b.best.outcomes[0].throughput_seq_per_s >= tput * (1 - 1e-12)


def test_reference_at_the_winners_hbm(pruned_and_brute):
    """A winner with another HBM size than the TPUv4-like reference is also compared with the reference given the
    same HBM (HBM is outside the area budget: the co-search sweeps it for free)."""
    from dataclasses import replace

    from phaze.errors import InfeasibleError
    from phaze.placement import optimize
    from phaze.units import GiB
    from phaze.workload.runtime import PAPER_RUNTIME, PlanSpace

    a, _, _ = pruned_and_brute
    s = spec()
    own = s.space.reference.hbm_bytes / GiB
    assert a.best.hbm_gib != own  # the tiny sweep (1, 2 GiB) never contains the reference's own size
    at = a.references[0].at_best_hbm
    assert at.hbm_gib == a.best.hbm_gib
    # the same plan space by another path: optimize on the reference chip with that HBM, on its own network (TPU
    # v4's ICI: the space has a network axis, issue 34 item 5)
    cluster = network_cluster(TPUV4_ICI, s.devices)
    chip = replace(s.space.reference, hbm_bytes=int(at.hbm_gib * GiB))
    try:
        space = PlanSpace(microbatch_sizes=s.microbatch_sizes, recompute_modes=s.recompute_modes,
                          interleave_values=(1,), sequence_parallel=(False,), per_stage_recompute=False, zero=False)
        want = optimize(s.models[0], chip, cluster, s.global_batch, PAPER_RUNTIME, space, devices=s.devices,
                        top_k=0, baselines=False).best.throughput_seq_per_s
    except InfeasibleError:  # nothing fits at that size
        want = 0.0
    assert at.best_seq_per_s == pytest.approx(want, rel=1e-12)


def test_the_real_tpuv4_is_the_second_reference(pruned_and_brute):
    """Issue 34 item 2: the winner is also compared with the real TPU v4 (``tpuv4``), at its own 32 GiB and at the
    winner's HBM; ``gains`` are the winner's throughput over each, computed here from the rows by hand."""
    from dataclasses import replace

    from phaze.hardware.presets import TPUV4
    from phaze.search.run import fixed_chip_plan
    from phaze.units import GiB

    a, _, _ = pruned_and_brute
    s = spec()
    assert s.space.real_reference == TPUV4
    (real,) = a.real_references
    assert real.chip_name == "tpuv4" and real.hbm_gib == 32
    cluster = network_cluster(TPUV4_ICI, s.devices)  # its own network, TPU v4's ICI (issue 34 item 5)
    want = fixed_chip_plan(s.models[0], TPUV4, s, cluster).best.throughput_seq_per_s
    assert real.best_seq_per_s == pytest.approx(want, rel=1e-12)
    at = real.at_best_hbm
    assert at.hbm_gib == a.best.hbm_gib
    bigger = replace(TPUV4, hbm_bytes=int(at.hbm_gib * GiB))
    assert at.best_seq_per_s == pytest.approx(
        fixed_chip_plan(s.models[0], bigger, s, cluster).best.throughput_seq_per_s, rel=1e-12)
    (g,) = a.gains()
    tput = a.best.outcomes[0].throughput_seq_per_s
    ref = a.references[0]
    assert g["vs"] == {"tpuv4-like": pytest.approx(tput / ref.best_seq_per_s),
                       "tpuv4": pytest.approx(tput / real.best_seq_per_s)}
    assert g["vs_equal_hbm"] == {"tpuv4-like": pytest.approx(tput / ref.at_best_hbm.best_seq_per_s),
                                 "tpuv4": pytest.approx(tput / at.best_seq_per_s)}
    assert a.to_dict()["gains"] == a.gains() and a.to_dict()["real_references"] == [real.to_dict()]


def test_the_paper_space_has_no_second_reference():
    from phaze.hardware.space import PAPER_SPACE
    assert PAPER_SPACE.real_reference is None


def test_no_reference_at_another_hbm_when_the_winner_has_the_references_own():
    from phaze.search.run import reference_at_hbm, references
    from phaze.units import GiB

    s = spec()
    cluster = get_cluster(s.cluster, s.devices)
    refs = references(s, cluster)
    assert reference_at_hbm(s, cluster, refs, s.space.reference.hbm_bytes / GiB) is refs
    assert all(r.at_best_hbm is None for r in refs)


def test_references_at_other_sizes_come_from_the_reference_task(pruned_and_brute):
    """The references' best plans at the search's other HBM sizes are found in the references' own task (their
    layer schedules are in that worker's cache) and kept in the store; the winner's size is read from there. A
    store without them (from before) makes ``_at_sizes`` answer None, and the search then runs
    ``reference_at_hbm`` on a worker as before."""
    from dataclasses import replace

    from phaze.search.run import _at_sizes, reference_at_hbm, reference_cluster

    a, _, _ = pruned_and_brute
    s = spec()
    store = Store.open_existing(a.store)
    try:
        kept = store.get_meta("references_at_sizes")
    finally:
        store.close()
    assert set(kept) == {str(float(g)) for g in s.hbm_gib} - {str(s.space.reference.hbm_bytes / 2**30)}
    bare = [replace(r, at_best_hbm=None) for r in a.references]
    read = _at_sizes(bare, kept, a.best.hbm_gib)
    assert [r.at_best_hbm for r in read] == [r.at_best_hbm for r in a.references]
    again = reference_at_hbm(s, reference_cluster(s, None), bare, a.best.hbm_gib)
    assert [r.at_best_hbm for r in again] == [r.at_best_hbm for r in a.references]
    assert _at_sizes(bare, {}, a.best.hbm_gib) is None and _at_sizes(bare, None, a.best.hbm_gib) is None
