"""`plan` on a small MoE instance returns a plan no hand-written plan of its space beats: every (tp, pp, dp, ep,
etp, mbs) of the space through `evaluate` against `optimize`'s best (balanced stages are in the exact
partition's space)."""
import itertools

import pytest

from phaze import api
from phaze.workload.config import ModelConfig

MOE = ModelConfig(name="bf-moe", num_layers=4, hidden=512, heads=8, kv_heads=4, ffn=2048, vocab=4096, seq_len=1024,
                  norm="rmsnorm", mlp="swiglu", position="rotary", bias=False, dropout=False, tied_embeddings=False,
                  num_experts=8, experts_per_token=2, moe_ffn=512, shared_experts=1, first_dense_layers=1)
DEVICES, BATCH = 16, 32


@pytest.mark.parametrize("routing", ["balanced", "dropless"])
def test_no_hand_plan_of_the_space_beats_plan_on_a_small_moe(routing):
    rt = api.Runtime(attention="flash", moe_routing=routing)
    space = api.PlanSpace(microbatch_sizes=(1, 2, 4), recompute_modes=("none",), interleave_values=(1,),
                          sequence_parallel=(True,), zero=(False,), per_stage_recompute=False,
                          etp_values=(1, 2))
    res = api.plan(MOE, "h100-80g", DEVICES, BATCH, cluster="dgx-h100", runtime=rt, space=space)
    best = res.best.iteration_time_s
    tried = fitting = 0
    for tp, pp, dp, ep, etp, mbs in itertools.product((1, 2, 4), range(1, 7), (1, 2, 4, 8, 16), (1, 2, 4, 8),
                                                      (1, 2), (1, 2, 4)):
        if tp * pp * dp > DEVICES or (tp * dp) % (ep * etp) or BATCH % (mbs * dp) or pp > MOE.num_layers + 2:
            continue
        tried += 1
        e = api.evaluate_plan(MOE, "h100-80g", DEVICES, BATCH,
                              api.PlanShape(tp=tp, pp=pp, dp=dp, mbs=mbs, sequence_parallel=True, ep=ep, etp=etp),
                              cluster="dgx-h100", runtime=rt)
        assert (e.plan.ep, e.plan.etp) == (ep, etp)
        if e.fits:
            fitting += 1
            assert e.iteration_time_s >= best * (1 - 1e-9), (e.plan.describe(), res.best.plan.describe())
    assert tried >= 100 and fitting >= 100  # the check compared against real competitors


def test_plan_searches_only_the_ep_values_given():
    rt = api.Runtime(attention="flash", moe_routing="balanced")
    space = api.PlanSpace(microbatch_sizes=(1,), recompute_modes=("none",), interleave_values=(1,),
                          sequence_parallel=(True,), zero=(False,), per_stage_recompute=False, ep_values=(2,),
                          etp_values=(1,))
    res = api.plan(MOE, "h100-80g", 8, 16, cluster="dgx-h100", runtime=rt, space=space, top_k=10)
    assert {e.plan.ep for e in (res.best,) + tuple(res.alternatives)} == {2}
