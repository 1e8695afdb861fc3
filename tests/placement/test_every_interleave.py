"""Issue 35 item 2: the plan search takes every virtual-pipeline size Megatron can split the blocks into, not only
1/2/4 (Llama-3-70B's published recipes use 5 on 80 blocks), so no hand plan with such a v beats `plan`."""
from phaze import api
from phaze.workload.runtime import PlanSpace


def test_every_size_dividing_the_blocks():
    assert PlanSpace().interleaves(80) == (1, 2, 4, 5, 8, 10, 16, 20, 40, 80)
    assert PlanSpace(interleave_values=(1, 2)).interleaves(80) == (1, 2)


def test_no_hand_plan_with_v5_beats_plan():
    rt = api.Runtime(tp_overlap=True, dp_overlap=True)
    best = api.plan("llama3-70b", "h100-80g", 64, 128, runtime=rt,
                    space=PlanSpace(microbatch_sizes=(1,), recompute_modes=("none", "full")), top_k=1).best
    for tp, pp, dp in ((4, 8, 2), (8, 8, 1), (4, 4, 4), (8, 4, 2)):
        for v in (5, 10):
            if 80 % (pp * v):
                continue
            for rc in ("none", "full"):
                hand = api.evaluate_plan("llama3-70b", "h100-80g", 64, 128,
                                         api.PlanShape(tp, pp, dp, 1, interleave=v, recompute=rc,
                                                       sequence_parallel=True, zero=True), runtime=rt)
                if hand.fits:
                    assert best.iteration_time_s <= hand.iteration_time_s * (1 + 1e-9), (hand.plan.describe(),
                                                                                         best.plan.describe())


def test_no_fit_names_the_sequence_and_the_largest_consumer_and_suggests_only_what_was_not_searched():
    """Issue 35 item 6: the refusal names the sequence length and what takes the memory, and does not suggest
    recompute or ZeRO-1 when the search already tried them."""
    import pytest

    from phaze.errors import InfeasibleError

    with pytest.raises(InfeasibleError) as exc:
        api.plan("gpt3-175b", "a100-80g", 8, 8)
    msg = str(exc.value)
    assert "sequence 2048" in msg and "weights, gradients and optimizer state" in msg
    assert "recompute" not in msg.split("; use")[1] and "--zero" not in msg.split("; use")[1]
    with pytest.raises(InfeasibleError) as exc:
        api.plan("gpt3-175b", "a100-80g", 8, 8, space=PlanSpace(recompute_modes=("none",), zero=(False,)))
    tips = str(exc.value).split("; use")[1]
    assert "--recompute full" in tips and "--zero 3" in tips
