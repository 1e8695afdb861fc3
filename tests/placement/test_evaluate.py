"""evaluate(): hand-computed pipeline time and memory, OOM reporting, interleaving, Korthikanti Fig. 1."""
from __future__ import annotations

import dataclasses
import json
import math
from importlib import resources

import pytest
from helpers import PLAN_RUNTIME, lc

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.cluster import Cluster, NetworkTier
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, Recompute, evaluate
from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.layer_costs import LayerCosts, default_time_model
from phaze.workload.zoo import get_model

GiB = 2**30
FLAT = Cluster("flat", 64, (NetworkTier("flat", 64, 1e9, 0.0),))
# Korthikanti et al. 2022 (Table 5, Figure 1), shipped with the package for `phaze validate`
MEASURED = resources.files("phaze.validation").joinpath("data", "published_measurements.json")


def two_stage_costs():
    E = lc(1.0, 2.0, params=100, act=10, bf=1e9)
    Bk = lc(3.0, 6.0, params=1000, act=1000, bf=1e9, bb=1e9)
    H = lc(2.0, 4.0, params=200, act=500, bb=1e9)
    return LayerCosts(E, Bk, H)


def test_two_stage_1f1b_by_hand():
    plan = Plan(((0, 2), (2, 4)), tp=1, dp=1, microbatch_size=1, num_microbatches=4, runtime=PLAN_RUNTIME)
    ev = evaluate_costs(plan, two_stage_costs(), FLAT, 4, DeviceSpec(1e12, 1e30, 1.0), num_blocks=2)
    # T0 = emb 1+2 + block 3+6 + send activation 1e9 B / 1e9 B/s = 13; T1 = block 9 + head 6 + send grad 1 = 16
    assert [s.time_per_microbatch_s for s in ev.stages] == pytest.approx([13.0, 16.0])
    # 1F1B: sum T_i + (m - 1) max T_i = 29 + 3 * 16 = 77 (d = 1: no gradient sync; optimizer step ~0)
    assert ev.pipeline_s == pytest.approx(77.0)
    assert ev.iteration_time_s == pytest.approx(77.0)
    assert ev.bubble_s == pytest.approx(77.0 - 4 * 16.0)
    assert ev.bottleneck_stage == 1


def test_memory_per_stage_by_hand_and_oom_report():
    plan = Plan(((0, 2), (2, 4)), tp=1, dp=1, microbatch_size=1, num_microbatches=4, runtime=PLAN_RUNTIME)
    ev = evaluate_costs(plan, two_stage_costs(), FLAT, 4, DeviceSpec(22000, 1e12, 1.0), num_blocks=2)
    # Adam 18 B/param. Stage 0: (100 + 1000) * 18 + min(p - 0, m) = 2 microbatches x (10 + 1000)
    assert ev.stages[0].memory_bytes == pytest.approx(1100 * 18 + 2 * 1010)
    # stage 1: (1000 + 200) * 18 + 1 microbatch x (1000 + 500)
    assert ev.stages[1].memory_bytes == pytest.approx(1200 * 18 + 1500)
    assert not ev.fits and ev.oom_stage == 1
    assert ev.memory_excess_bytes == pytest.approx(1200 * 18 + 1500 - 22000)
    ok = evaluate_costs(plan, two_stage_costs(), FLAT, 4, DeviceSpec(30000, 1e12, 1.0), num_blocks=2)
    assert ok.fits and ok.oom_stage is None and ok.memory_excess_bytes == 0


def test_zero1_shards_optimizer_state():
    plan = Plan(((0, 2), (2, 4)), tp=1, dp=2, microbatch_size=1, num_microbatches=2, zero=True, runtime=PLAN_RUNTIME)
    ev = evaluate_costs(plan, two_stage_costs(), FLAT, 4, DeviceSpec(1e12, 1e12, 1.0), num_blocks=2)
    assert ev.stages[1].memory_bytes == pytest.approx(1200 * (2 + 4 + 12 / 2) + 1500)


def test_interleaving_divides_bubble_by_v():
    c = LayerCosts(lc(0.0, 0.0), lc(1.0, 2.0), lc(0.0, 0.0))  # no boundary bytes: free p2p
    dev = DeviceSpec(1e30, 1e30, 1.0)
    bubbles = {}
    for v in (1, 2, 4):
        plan = Plan.balanced(16, 4, 1, 1, 1, 8, interleave=v, runtime=PLAN_RUNTIME)
        ev = evaluate_costs(plan, c, FLAT, 8, dev, num_blocks=16)
        assert ev.steady_s == pytest.approx(8 * 12.0)  # m x T, T = 4 blocks x 3 s
        bubbles[v] = ev.bubble_s
    assert bubbles[1] == pytest.approx(3 * 12.0)  # (p - 1) x T
    assert bubbles[2] == pytest.approx(bubbles[1] / 2)
    assert bubbles[4] == pytest.approx(bubbles[1] / 4)


def test_interleaving_multiplies_p2p_transfers():
    c = LayerCosts(lc(0.0, 0.0, bf=1e9), lc(1.0, 2.0, bf=1e9, bb=1e9), lc(0.0, 0.0, bb=1e9))
    dev = DeviceSpec(1e30, 1e30, 1.0)
    for v in (1, 2):
        ev = evaluate_costs(Plan.balanced(8, 4, 1, 1, 1, 8, interleave=v, runtime=PLAN_RUNTIME), c, FLAT, 8, dev, num_blocks=8)
        assert ev.p2p_s == pytest.approx(2 * (4 * v - 1) * 1.0)  # one activation + one gradient per boundary


def test_global_batch_mismatch_is_one_line_config_error():
    plan = Plan(((0, 4),), tp=1, dp=2, microbatch_size=2, num_microbatches=3, runtime=PLAN_RUNTIME)
    with pytest.raises(ConfigError) as e:
        evaluate_costs(plan, two_stage_costs(), FLAT, 13, DeviceSpec(1e12, 1e12, 1.0), num_blocks=2)
    assert "\n" not in str(e.value) and "12" in str(e.value)


def test_more_devices_than_cluster_is_infeasible():
    plan = Plan(((0, 2), (2, 4)), tp=8, dp=8, microbatch_size=1, num_microbatches=1, runtime=PLAN_RUNTIME)
    with pytest.raises(InfeasibleError) as e:
        evaluate_costs(plan, two_stage_costs(), FLAT, 8, DeviceSpec(1e12, 1e12, 1.0), num_blocks=2)
    assert "\n" not in str(e.value) and "128" in str(e.value)


def test_default_time_model():
    assert default_time_model(get_accelerator("a100-80g")) == "sequential"
    assert default_time_model(get_accelerator("h100-80g")) == "sequential"
    assert default_time_model(get_accelerator("tpuv4-like")) == "scheduled"


@pytest.mark.parametrize("case", json.loads(MEASURED.read_text())["memory_gib_per_gpu"],
                         ids=lambda c: c["model"])
@pytest.mark.parametrize("mode", ["none", "seqsel"])
def test_korthikanti_figure1_activation_memory(case, mode):
    spec = json.loads(MEASURED.read_text())["models"][case["model"]]
    model = dataclasses.replace(get_model(case["model"]), vocab=spec["vocab"])
    assert (model.num_layers, model.hidden, model.heads) == (spec["layers"], spec["hidden"], spec["heads"])
    p, t, v, mbs = case["pp"], case["tp"], case["pipeline_interleaving"], case["microbatch"]
    m = max(p, 1) * 8
    plan = Plan.balanced(model.num_layers, p, t, 1, mbs, m, interleave=v,
                         recompute=Recompute.uniform("selective" if mode == "seqsel" else "none"),
                         sequence_parallel=mode == "seqsel", runtime=PLAN_RUNTIME)
    ev = evaluate(plan, model, get_accelerator("a100-80g"), get_cluster("dgx-a100", p * t), mbs * m)
    got = ev.stages[0].activation_bytes / GiB
    want = case["activations"][mode]
    assert got == pytest.approx(want, rel=0.05), (got, want)


def test_evaluate_breakdown_adds_up():
    model = get_model("megatron-gpt2-8.3b")
    plan = Plan.balanced(model.num_layers, 4, 8, 4, 2, 8, recompute=Recompute.uniform("selective"),
                         sequence_parallel=True, runtime=PLAN_RUNTIME)
    ev = evaluate(plan, model, get_accelerator("a100-80g"), get_cluster("dgx-a100", 128), 64)
    assert ev.iteration_time_s == pytest.approx(ev.pipeline_s + ev.dp_allreduce_s + ev.optimizer_step_s)
    assert ev.pipeline_s == pytest.approx(ev.steady_s + ev.bubble_s)
    assert ev.throughput_seq_per_s == pytest.approx(64 / ev.iteration_time_s)
    assert ev.throughput_tokens_per_s == pytest.approx(64 * model.seq_len / ev.iteration_time_s)
    assert 0 < ev.mfu < 1 and ev.fits
    assert math.isfinite(ev.to_dict()["iteration_time_s"])


def test_per_stage_recompute_uses_each_stages_costs():
    none = two_stage_costs()
    full = LayerCosts(none.embedding, dataclasses.replace(none.block, bwd_s=9.0, activation_bytes=100),
                      none.head)
    plan = Plan(((0, 2), (2, 4)), tp=1, dp=1, microbatch_size=1, num_microbatches=4,
                recompute=Recompute(("full", "none")), runtime=PLAN_RUNTIME)
    ev = evaluate_costs(plan, {"none": none, "full": full}, FLAT, 4, DeviceSpec(1e12, 1e30, 1.0), num_blocks=2)
    assert [s.recompute for s in ev.stages] == ["full", "none"]
    assert ev.stages[0].time_per_microbatch_s == pytest.approx(1 + 2 + 3 + 9 + 1)
    assert ev.stages[0].activation_bytes == pytest.approx(2 * (10 + 100))
    assert ev.stages[1].time_per_microbatch_s == pytest.approx(16.0)
    with pytest.raises(ConfigError):
        evaluate_costs(plan, {"none": none}, FLAT, 4, DeviceSpec(1e12, 1e30, 1.0), num_blocks=2)


def test_balanced_plans_are_memoized_by_value_and_type():
    """``Plan.balanced`` returns one frozen object per distinct arguments (a plan search builds the same balanced
    plans for every chip); an argument of another type is another key, so a bad one is refused every time."""
    kw = dict(interleave=2, recompute=Recompute.uniform("full"), zero=1, runtime=PLAN_RUNTIME)
    a = Plan.balanced(8, 2, 1, 4, 1, 8, **kw)
    assert Plan.balanced(8, 2, 1, 4, 1, 8, **kw) is a
    assert a.stages == ((0, 3), (3, 5), (5, 7), (7, 10)) and a.chunks_of(0) == ((0, 3), (5, 7))
    assert Plan.balanced(8, 2, 1, 4, 1, 8, cp=1, **kw) == a
    for _ in range(2):
        with pytest.raises(ConfigError, match="'cp' must be a positive integer"):
            Plan.balanced(8, 2, 1, 4, 1, 8, cp=True, **kw)

