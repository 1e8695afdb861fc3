"""The co-search of an MoE model (issue 33): chips score its MoE blocks by their schedules, without expert
parallelism (costed on GPUs only so far), and its TP widths with sequence parallelism."""
import dataclasses

import pytest

from phaze.errors import ConfigError
from phaze.search import SearchSpec, run_search
from tinysearch import SPACE, TINY

TINY_MOE = dataclasses.replace(TINY, name="tiny-moe", num_experts=4, experts_per_token=2, moe_ffn=256,
                               mlp="swiglu")


def test_an_moe_model_is_co_searched(tmp_path):
    spec = SearchSpec(models=(TINY_MOE,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1,),
                      recompute_modes=("none",), devices=16, global_batch=32)
    assert all(s.ep == 1 and s.sequence_parallel == (s.tp > 1) for s in spec.settings(TINY_MOE))
    res = run_search(spec, str(tmp_path / "moe.db"), workers=1, quiet=True)
    o = res.best.outcomes[0]
    assert o.throughput_seq_per_s > 0 and o.plan_json["ep"] == 1
    # the MoE model's plan on the winner re-evaluates to the stored throughput
    from phaze.search.details import search_details
    (d,) = search_details(res.spec, res.best)
    assert d.evaluation["throughput_seq_per_s"] == pytest.approx(o.throughput_seq_per_s, rel=1e-9)


def test_expert_parallelism_on_a_designed_chip_is_refused():
    from phaze.hardware.presets import get_accelerator
    from phaze.placement.layer_costs import compute_layer_costs, setting_for

    s = setting_for(TINY_MOE, 1, 1, False, "none", ep=2)
    with pytest.raises(ConfigError, match="expert parallelism is costed on GPUs only"):
        compute_layer_costs(TINY_MOE, get_accelerator("tpuv4-like"), s, None)
