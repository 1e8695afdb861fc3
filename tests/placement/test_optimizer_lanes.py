"""The optimizer step runs on the vector lanes: the slower of its HBM traffic and its lane operations
(``stage.optimizer_step_s``). Before this a designed chip's optimizer step was costed by HBM alone, so a chip
with few vector lanes got its update for free."""
import math

import pytest

from phaze.hardware.presets import get_accelerator
from phaze.placement import stage as st
from phaze.placement.evaluation import DeviceSpec, lane_ops_per_s


def sums(params, adam=True):
    """One stage of ``params`` parameters with Megatron's Adam bytes (2 / 4 / 12) or SGD's (2 / 2 / 0)."""
    w, g, o = (2, 4, 12) if adam else (2, 2, 0)
    return st.StageSums(fwd_s=0.0, bwd_s=0.0, params=params, weight_bytes=w * params, grad_bytes=g * params,
                        optimizer_bytes=o * params, activation_bytes=0.0, working_bytes=0.0)


def test_hand_computed():
    s = sums(1_000_000)
    assert st.optimizer_step_s(s, 1, False, 1e12) == pytest.approx(50e6 / 1e12)  # 50 B per parameter, no lanes
    assert st.optimizer_step_s(s, 1, False, 1e12, 1e9) == pytest.approx(25e6 / 1e9)  # 25 lane ops per parameter
    assert st.optimizer_step_s(s, 4, True, 1e12, 1e9) == pytest.approx(25e6 / 1e9 / 4)  # ZeRO-1: a 1/d shard
    assert st.optimizer_step_s(s, 4, False, 1e12, 1e9) == pytest.approx(25e6 / 1e9)
    sgd = sums(1_000_000, adam=False)
    assert st.optimizer_step_s(sgd, 1, False, 1e15, 1e9) == pytest.approx(7e6 / 1e9)
    # the HBM side wins when the lanes are fast
    assert st.optimizer_step_s(s, 1, False, 1e12, 1e15) == pytest.approx(50e6 / 1e12)


def test_lane_rate_of_a_chip():
    acc = get_accelerator("tpuv4-like")
    assert lane_ops_per_s(acc) == acc.num_vc * acc.vc_width * acc.freq_hz * acc.vector_efficiency
    assert DeviceSpec.of(acc).lane_ops_per_s == lane_ops_per_s(acc)


def test_gpu_optimizer_stays_hbm_bound_and_tpuv4_like_becomes_lane_bound():
    """An H100's lanes (the datasheet's non-tensor rate) outrun its HBM on Adam by far, so GPU figures do not
    move; the TPUv4-like chip's 2 x 128 lanes are slower than its HBM on this step."""
    s = sums(100_000_000)
    for name in ("h100-80g", "a100-80g"):
        dev = DeviceSpec.of(get_accelerator(name))
        hbm_s = 50 * 1e8 / dev.hbm_Bps
        assert 25 * 1e8 / dev.lane_ops_per_s < hbm_s / 20
        assert st.optimizer_step_s(s, 1, False, dev.hbm_Bps, dev.lane_ops_per_s) == hbm_s
    dev = DeviceSpec.of(get_accelerator("tpuv4-like"))
    lane_s = 25 * 1e8 / dev.lane_ops_per_s
    assert lane_s > 50 * 1e8 / dev.hbm_Bps
    assert st.optimizer_step_s(s, 1, False, dev.hbm_Bps, dev.lane_ops_per_s) == pytest.approx(lane_s)
    assert math.isinf(DeviceSpec(1.0, 1.0, 1.0).lane_ops_per_s)  # hand-built specs: HBM alone, as before


def test_optimizer_energy_hand_computed():
    """plan_power adds each device's optimizer step: its bytes priced as a vector op's (HBM, a GLB write and
    read, the network, the vector-core buffer), lane ops at the lane energy, a 1/d shard with ZeRO-1,
    averaged over the stages."""
    from phaze.hardware.power import HBM_J_PER_BYTE, LANE_OP_J, energy_parts
    from phaze.hardware.presets import get_cluster
    from phaze.placement.evaluation import evaluate
    from phaze.placement.plan import Plan
    from phaze.placement.power import optimizer_energy_j
    from phaze.workload.runtime import PAPER_RUNTIME
    from phaze.workload.zoo import get_model

    acc = get_accelerator("tpuv4-like")
    model = get_model("gpt2-xl")
    parts = energy_parts(acc.as_arrays())
    per_byte = HBM_J_PER_BYTE + float(parts["glb_write_J_per_B"][0] + parts["glb_read_J_per_B"][0]
                                      + parts["noc_J_per_B"][0] + parts["vc_J_per_B"][0])
    for zero in (False, True):
        plan = Plan.balanced(model.num_layers, 2, 1, 4, 1, 2, zero=zero,
                             runtime=PAPER_RUNTIME.with_(dp_overlap=False))
        ev = evaluate(plan, model, acc, get_cluster("dgx-a100", 8), 8)
        want_j = want_b = 0.0
        for s in ev.stages:
            d = 4 if zero else 1
            # Adam, Megatron's bytes: 2 B weight, 4 B grad, 12 B state -> 5 x 4 + 2 x 12 + 2 + 4 = 50 B
            assert s.optimizer_bytes * d == 12 * s.params and s.grad_bytes == 4 * s.params
            want_j += (50 * s.params * per_byte + 25 * s.params * LANE_OP_J) / d
            want_b += 2 * 50 * s.params / d
        got_j, got_b = optimizer_energy_j(acc, ev)
        assert got_j == pytest.approx(want_j / 2, rel=1e-12) and got_b == pytest.approx(want_b / 2, rel=1e-12)
