"""The compute an overlapped NCCL collective costs (phaze.cost.overlap.nccl_interference): its kernels hold SMs
for as long as it lasts, and its transfer shares the memory system in proportion to the link's rate."""
import pytest

from phaze.cost import op_latency_s
from phaze.cost.gpu import gpu_gemm_latency_s
from phaze.cost.overlap import (MEASURED_HBM_Bps, MEASURED_TRANSFER_Bps, NCCL_KERNEL_INTERFERENCE,
                                TRANSFER_INTERFERENCE, interfered_s, nccl_interference, transfer_interference)

H100_HBM_Bps = 3.35e12 * 0.90  # the preset's achievable HBM bandwidth
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.workload.ops import Collective, Gemm


def _pieces_scaled_to_the_measured_sequence():
    arch = get_accelerator("h100-80g").as_arrays()
    gemm_s = float(gpu_gemm_latency_s(Gemm("mm", 1, 8192, 8192, 8192), arch)[0])
    tier = get_cluster("dgx-h100", 8).tier_for_group(8)
    gather_s = float(op_latency_s(Collective("ag", "all_gather", 8 * 64 * 2**20, 8), arch, 1, tier)[0])
    scale = 2.96e-3 / (gemm_s + gather_s)
    return gemm_s * scale, gather_s * scale


def test_nccl_kernels_reproduce_the_h100_measurement_with_kernels_on_the_sms():
    """pytorch/pytorch PR #172714 (8 x H100): the same matmul beside the same all-gather took 2.02 ms with NCCL's
    default kernels (1.77 ms on copy engines, 2.96 ms in sequence). With both interference terms the overlap
    formula returns 2.02 ms; by hand 0.25 / 1.2913 = 0.194 s per second of collective."""
    g, c = _pieces_scaled_to_the_measured_sequence()
    per_s = nccl_interference(MEASURED_TRANSFER_Bps, H100_HBM_Bps)
    assert interfered_s(g, c, per_s) == pytest.approx(2.02e-3, rel=1e-3)
    assert MEASURED_HBM_Bps == pytest.approx(get_accelerator("h100-80g").hbm_bandwidth_Bps * 0.90)
    assert NCCL_KERNEL_INTERFERENCE == pytest.approx(0.25 / 1.2913, rel=1e-3)
    # the measured rate: 7 shards of 64 MiB sent in the all-gather's 1.291 ms
    assert MEASURED_TRANSFER_Bps == pytest.approx(7 * 64 * 2**20 / c, rel=1e-4)  # the constant uses 1.326 ms
    assert MEASURED_TRANSFER_Bps == pytest.approx(364e9, rel=0.01)


def test_a_slower_link_keeps_the_kernel_part_and_scales_the_transfer_part():
    ib_Bps = 45e9  # one NDR NIC at the preset's efficiency
    assert nccl_interference(ib_Bps, H100_HBM_Bps) == pytest.approx(0.1936 + 0.0785 * 45 / 363.8, rel=2e-3)
    assert nccl_interference(0.0, H100_HBM_Bps) == NCCL_KERNEL_INTERFERENCE


def test_transfer_part_scales_with_the_share_of_memory_bandwidth_the_link_takes():
    # the measured share gives the measured figure
    assert transfer_interference(MEASURED_TRANSFER_Bps, MEASURED_HBM_Bps) == pytest.approx(TRANSFER_INTERFERENCE)
    # the same link beside half the HBM bandwidth takes twice the share: twice the loss
    one = transfer_interference(45e9, H100_HBM_Bps)
    assert transfer_interference(45e9, H100_HBM_Bps / 2) == pytest.approx(2 * one)
    # A100 (2039 GB/s at 0.90) over one HDR NIC (25 GB/s at 0.90): 0.0785 x (22.5 / 1835) / (363.8 / 3015), by hand
    by_hand = 0.0785 * (22.5 / 1835.1) / (363.8 / 3015)
    assert transfer_interference(22.5e9, 2.039e12 * 0.9) == pytest.approx(by_hand, rel=3e-3)
    assert transfer_interference(1e15, 1e9) == 1.0  # never more than the whole compute


def test_context_parallel_ring_is_charged_as_an_nccl_transfer(monkeypatch):
    """The K/V ring of context parallelism runs as NCCL send/receive kernels beside the attention: a cp=2 block
    costs more than the same block charged only the copy-engine interference."""
    import phaze.cost.overlap as ov
    from phaze.placement import layer_costs
    from phaze.workload.runtime import PAPER_RUNTIME, TrainSetting
    from phaze.workload.zoo import get_model
    model, acc = get_model("llama3-70b"), get_accelerator("h100-80g")
    tier = get_cluster("dgx-h100", 64).tier_for_group(2)
    s = TrainSetting(1, 8192, 4, True, "none", cp=2, runtime=PAPER_RUNTIME.with_(attention="flash"))
    monkeypatch.setattr(layer_costs, "_CACHE", {})
    nccl = layer_costs.compute_layer_costs(model, acc, s, tier, "sequential", cp_tier=tier).block
    monkeypatch.setattr(layer_costs, "_CACHE", {})
    monkeypatch.setattr(ov, "nccl_interference", lambda link_Bps, hbm_Bps: TRANSFER_INTERFERENCE)
    copy_engine = layer_costs.compute_layer_costs(model, acc, s, tier, "sequential", cp_tier=tier).block
    assert nccl.fwd_s > copy_engine.fwd_s and nccl.bwd_s > copy_engine.bwd_s
