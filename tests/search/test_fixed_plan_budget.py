"""Every chip of a co-search is scored by the same machinery to the same per-layer schedule budget
(``phaze.search.spec.SCHEDULE_TIME_LIMIT_S``): a fixed chip (a reference, a counterfactual step of ``why``) through
``fixed_chip_plan``, a candidate through the exact phase. The search's winner scored again as a fixed chip gets
the throughput the search reported for it."""
import pytest

import phaze.placement.best_first as best_first
from phaze.hardware.chip_network import ChipNetwork, network_cluster
from phaze.search import SearchSpec, run_search
from phaze.search.details import winner_chip
from phaze.search.exact import ChipTask
from phaze.search.fixed_plan import fixed_chip_plan
from phaze.search.spec import SCHEDULE_TIME_LIMIT_S
from tinysearch import SPACE, TINY


def test_the_winner_as_a_fixed_chip_gets_the_searched_throughput_at_the_same_budget(tmp_path, monkeypatch):
    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                      recompute_modes=("none", "full"), devices=16, global_batch=32)
    res = run_search(spec, str(tmp_path / "s.db"), workers=1, quiet=True, why=False)
    acc = winner_chip(res.spec, res.best)
    n = res.network
    cluster = network_cluster(ChipNetwork(n["scale_up_chips"], n["scale_up_Bps"], n["topology"], n["scale_out_Bps"]),
                              spec.devices)
    budgets = []
    real = best_first.compute_layer_costs

    def spy(*a, **k):
        budgets.append(k.get("schedule_time_limit_s"))
        return real(*a, **k)

    monkeypatch.setattr(best_first, "compute_layer_costs", spy)
    best = fixed_chip_plan(TINY, acc, spec, cluster).best
    assert budgets and set(budgets) == {SCHEDULE_TIME_LIMIT_S}
    assert ChipTask.__dataclass_fields__["schedule_time_limit_s"].default == SCHEDULE_TIME_LIMIT_S == 1.0
    assert best.throughput_seq_per_s == pytest.approx(res.best.outcomes[0].throughput_seq_per_s, rel=1e-9)
