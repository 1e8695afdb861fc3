"""ZeRO stages 0-3: each stage's memory and its extra data-parallel transfers, by hand on plain numbers, and
Llama 3 405B's published plans (Dubey et al. 2024, "The Llama 3 Herd of Models", Table 4) fitting with ZeRO-3."""
from __future__ import annotations

import pytest

from helpers import PLAN_RUNTIME, lc, two_tier_cluster

from phaze import api
from phaze.cost import all_gather_latency_s, reduce_scatter_latency_s
from phaze.errors import ConfigError
from phaze.placement import stage as st
from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.layer_costs import LayerCosts
from phaze.placement.plan import Plan

CLUSTER = two_tier_cluster(n=64, fast=4)
DEV = DeviceSpec(1e15, 1e12, 1.0)  # HBM time of the optimizer step: traffic / 1e12
D, M = 8, 4  # data-parallel ranks, microbatches
P_BLOCK = 50_000_000  # parameters of a block: above Megatron's 40M-parameter bucket


def costs() -> LayerCosts:
    # embedding and head hold no parameters, so the one stage's static bytes are the 2 blocks' (2/4/12 B each)
    return LayerCosts(lc(0.0, 0.0), lc(1.0, 2.0, params=P_BLOCK, act=1000.0), lc(0.0, 0.0))


def one_stage(zero: int, overlap: bool = False):
    plan = Plan(((0, 4),), tp=1, dp=D, microbatch_size=1, num_microbatches=M, zero=zero,
                runtime=PLAN_RUNTIME.with_(dp_overlap=overlap))
    return evaluate_costs(plan, costs(), CLUSTER, D * M, DEV, num_blocks=2)


def test_each_stage_shards_what_it_says_by_hand():
    W, G, O = 2 * 2 * P_BLOCK, 2 * 4 * P_BLOCK, 2 * 12 * P_BLOCK  # the stage's weights, gradients, Adam state
    act = 1 * 2 * 1000.0  # 1F1B stashes min(p - i, m) = 1 microbatch of the 2 blocks' activations
    bucket = 40_000_000 * 4  # Megatron's bucket (max(40M, 1M x 8) parameters) of 4-byte gradients
    layer = 2 * P_BLOCK  # one block's weight bytes: ZeRO-3 holds two gathered
    want = {0: W + G + O, 1: W + G + O / D, 2: W + G / D + bucket + O / D,
            3: W / D + 2 * layer + G / D + bucket + O / D}
    for z, static in want.items():
        s = one_stage(z).stages[0]
        assert s.memory_bytes == pytest.approx(static + act), z
        assert s.optimizer_bytes == pytest.approx(O if z == 0 else O / D)
    mems = [one_stage(z).memory_bytes_per_device for z in range(4)]
    assert mems[0] > mems[1] > mems[2]
    # ZeRO-3 holds two gathered layers: with only two blocks on the stage that is more than it shards away
    assert mems[3] > mems[2]


def test_the_transfers_each_stage_adds_by_hand():
    """No overlap, p = 1: iteration = m T + R. ZeRO-1: R = opt/d + reduce-scatter(G) + all-gather(W). ZeRO-2
    reduce-scatters every microbatch (T + rs) and gathers the weights once (R = opt/d + ag). ZeRO-3 gathers the
    weights before each forward and each backward and reduce-scatters (T + 2 ag + rs; R = opt/d)."""
    tier = CLUSTER.ring_tier(D, 1, "dp")
    W, G = 2 * 2 * P_BLOCK, 2 * 4 * P_BLOCK
    rs, ag = reduce_scatter_latency_s(G, D, tier), all_gather_latency_s(W, D, tier)
    e1, e2, e3 = one_stage(1), one_stage(2), one_stage(3)
    opt = e1.optimizer_step_s
    assert e2.optimizer_step_s == pytest.approx(opt) and e3.optimizer_step_s == pytest.approx(opt)
    T = 2 * 3.0  # two blocks of 1 s forward + 2 s backward
    assert e1.iteration_time_s == pytest.approx(M * T + opt + rs + ag, rel=1e-12)
    assert e2.iteration_time_s == pytest.approx(M * (T + rs) + opt + ag, rel=1e-12)
    assert e3.iteration_time_s == pytest.approx(M * (T + 2 * ag + rs) + opt, rel=1e-12)
    assert e2.stages[0].zero_comm_s == pytest.approx(rs) and e3.stages[0].zero_comm_s == pytest.approx(2 * ag + rs)


def test_overlap_hides_the_per_microbatch_transfers_behind_compute():
    """Overlapped, a microbatch's transfers hide behind its forward / backward except one bucket (and the
    compute they take): exposed strictly between 0 and all of it."""
    for z in (2, 3):
        hidden, shown = one_stage(z, overlap=True).stages[0], one_stage(z).stages[0]
        assert 0 < hidden.zero_comm_s < shown.zero_comm_s
    assert one_stage(1, overlap=True).stages[0].zero_comm_s == 0.0


def test_plan_dict_round_trips_and_reads_old_files():
    plan = one_stage(3).plan
    assert Plan.from_dict(plan.to_dict()).zero == 3
    old = {k: v for k, v in plan.to_dict().items() if k != "zero"}
    old["zero1"] = True
    assert Plan.from_dict(old).zero == 1  # a file written before ZeRO-2/3: zero1 alone
    with pytest.raises(ConfigError, match="ZeRO stage"):
        Plan(((0, 4),), tp=1, dp=2, microbatch_size=1, num_microbatches=2, zero=4, runtime=PLAN_RUNTIME)


def test_moe_models_refuse_zero2_and_3():
    with pytest.raises(ConfigError, match="MoE"):
        api.evaluate_plan(_moe(), "h100-80g", 64, 64,
                          api.PlanShape(tp=1, pp=1, dp=64, mbs=1, zero=2))


def _moe():
    from phaze.workload.config import ModelConfig
    return ModelConfig(name="tiny-moe", num_layers=2, hidden=256, heads=4, ffn=512, vocab=1000, seq_len=128,
                       max_tp=8, num_experts=8, experts_per_token=2, moe_ffn=256)


# Llama 3 405B on 8,192 and 16,384 H100s (Dubey et al. 2024, Table 4): TP 8, CP 1, PP 16, DP 64 / 128, sequence
# 8,192, 16M tokens per batch (2,048 sequences), FSDP-style sharding ("shards the model, optimizer, and gradients").
LLAMA3_405B_RUNS = ((8192, 64), (16384, 128))


@pytest.mark.parametrize("devices, dp", LLAMA3_405B_RUNS)
def test_llama3_405b_published_plans_fit_with_zero3_not_zero1(devices, dp):
    def run(zero):
        return api.evaluate_plan("llama3-405b", "h100-80g", devices, 2048,
                                 api.PlanShape(tp=8, pp=16, dp=dp, mbs=1, sequence_parallel=True, zero=zero),
                                 runtime=api.Runtime(tp_overlap=True, dp_overlap=True), seq_len=8192)
    one, three = run(1), run(3)
    assert not one.fits  # the optimizer state alone sharded: the fp32 gradients do not fit beside 16 microbatches
    assert three.fits and three.memory_bytes_per_device < one.memory_bytes_per_device
    assert three.iteration_time_s > one.iteration_time_s  # the gathers and reduce-scatters of every microbatch


def test_plan_searches_every_zero_stage_and_moe_plans_keep_to_0_and_1():
    assert api.PlanSpace().zero == st.ZERO_STAGES == (0, 1, 2, 3)
    with pytest.raises(ConfigError, match="--zero 0,1"):
        api.plan(_moe(), "h100-80g", 8, 8, space=api.PlanSpace(zero=(2, 3)))
    res = api.plan(_moe(), "h100-80g", 8, 8, top_k=3)
    assert res.space.zero == (0, 1)
