"""Chips sent to the workers in batches: batches of several chips (4 or more) do occur on a 422-chip space, and
the answer is brute force's (every candidate evaluated exactly, no pruning)."""
import pytest

import phaze.search.run as run_mod
from phaze.hardware.space import DesignSpace
from phaze.search import Store, run_search
from tinysearch import NETWORKS, MiB, TINY

pytestmark = pytest.mark.slow  # two searches of a 422-chip space

SPACE = DesignSpace(num_tc=(1, 2, 4, 8, 16), num_vc=(1, 2, 4, 8), tc_widths=(16, 32, 64), tc_depths=(16, 64),
                    glb_bytes=(2 * MiB, 32 * MiB), **NETWORKS)


def test_batched_search_equals_brute_force(tmp_path, monkeypatch):
    from phaze.search import SearchSpec

    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="mid", hbm_gib=(2,), microbatch_sizes=(1, 2),
                      recompute_modes=("none", "full"), devices=16, global_batch=32)
    sizes = []
    evaluate = run_mod.evaluate_chips

    def spy(tasks):
        sizes.append(len(tasks))
        return evaluate(tasks)

    monkeypatch.setattr(run_mod, "evaluate_chips", spy)
    a = run_search(spec, str(tmp_path / "a.db"), workers=1, quiet=True)
    assert max(sizes) >= 4, f"batches stayed small: {sorted(set(sizes))}"
    assert a.counts["bounded"] > 0 and a.counts["pruned"] > 0
    b = run_search(spec, str(tmp_path / "b.db"), workers=1, quiet=True, prune=False)
    assert b.counts["exact"] + b.counts["infeasible"] == b.counts["candidates"]
    assert (a.best.chip, a.best.hbm_gib) == (b.best.chip, b.best.hbm_gib)
    assert a.best.score == pytest.approx(b.best.score, rel=1e-12)
    brute = {(r["chip"], r["hbm_gib"]): r["score"] for r in Store.open_existing(b.store).rows()}
    assert a.best.score == max(brute.values())
    for r in Store.open_existing(a.store).rows():
        assert r["score"] == pytest.approx(brute[(r["chip"], r["hbm_gib"])], rel=1e-12)
