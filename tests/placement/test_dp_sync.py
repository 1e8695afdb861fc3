"""The data-parallel synchronisation: the ring tier of a DP group spanning nodes (one NIC per group member in
each node) and ZeRO-1's parameter all-gather overlapped with the next step's first forward."""
import pytest

from phaze.cost import all_gather_latency_s, reduce_scatter_latency_s
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, evaluate
from phaze.placement import stage as st
from phaze.workload.zoo import get_model
from phaze.workload.runtime import PAPER_RUNTIME

# what an old Plan(...) without runtime keywords ran: standard attention, fp16, no DP overlap, no reserve
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)

H100_NIC_Bps = 50e9 * 0.90  # one 400 Gb/s NDR HCA per GPU at the preset's InfiniBand efficiency
NVLINK4_Bps = 360e9  # the preset's achievable NVLink4 bandwidth


@pytest.mark.parametrize("size, stride, expect_Bps", [
    (64, 1, min(8 * H100_NIC_Bps, NVLINK4_Bps)),  # 8 members per node: 8 NICs, capped by NVLink
    (32, 2, 4 * H100_NIC_Bps),  # t = 2: 4 members per node
    (16, 4, 2 * H100_NIC_Bps),  # t = 4: 2 members per node
    (4, 8, H100_NIC_Bps),  # t = 8: one member per node, one NIC
])
def test_ring_tier_counts_the_nics_of_the_group_members_in_a_node(size, stride, expect_Bps):
    c = get_cluster("dgx-h100", 1024)
    tier = c.ring_tier(size, stride, "dp")
    assert tier.name == "infiniband"
    assert tier.effective_bandwidth_Bps == pytest.approx(expect_Bps)
    assert tier.latency_s == c.tier_for_group(size, stride, "dp").latency_s


def test_ring_tier_inside_a_node_and_point_to_point_are_unchanged():
    c = get_cluster("dgx-h100", 1024)
    assert c.ring_tier(8, 1) == c.tier_for_group(8, 1)  # NVLink: the fastest tier, nothing below it
    assert c.ring_tier(1, 8) == c.tier_for_group(1, 8)
    topo = st.Topology.of(c, 4, 16, 2)
    assert topo.pp_tier == c.tier_for_group(2, 64, "pp")  # a send uses one device's NIC
    assert topo.dp_tier.effective_bandwidth_Bps == pytest.approx(2 * H100_NIC_Bps)


def test_param_gather_hides_behind_the_next_forward_hand_case():
    # reduce 0.6 s behind a 0.3 s backward, gather 0.4 s behind a 0.1 s forward, buckets negligible
    assert st.exposed_sync_s(1.0, 0.3, True, 1e12, 8, 0.4, 0.1) == pytest.approx(0.3 + 0.3)
    # the last bucket stays exposed on each side: 10% of each
    assert st.exposed_sync_s(1.0, 5.0, True, 4e8, 8, 0.4, 5.0) == pytest.approx(0.1 * 0.6 + 0.1 * 0.4)
    # without the gather the old rule: max(share x sync, sync - bwd)
    assert st.exposed_sync_s(1.0, 0.3, True, 1e12, 8) == pytest.approx(0.7)
    assert st.exposed_sync_s(1.0, 0.3, False, 1e12, 8, 0.4, 0.1) == 1.0
    # arrays agree with scalars
    import numpy as np
    arr = st.exposed_sync_s(np.array([1.0, 1.0]), np.array([0.3, 5.0]), True, np.array([1e12, 4e8]), 8,
                            np.array([0.4, 0.4]), np.array([0.1, 5.0]))
    assert arr == pytest.approx([0.6, 0.1])


def test_evaluate_charges_the_zero1_sync_as_reduce_scatter_behind_bwd_and_gather_behind_fwd():
    model = get_model("gpt3-175b")
    cluster = get_cluster("dgx-h100", 1024)
    plan = Plan.balanced(model.num_layers, 8, 4, 32, 1, 64, interleave=12, sequence_parallel=True, zero=True,
                         runtime=PLAN_RUNTIME.with_(attention="flash", precision="bf16", tp_overlap=True,
                                                    dp_overlap=True))
    ev = evaluate(plan, model, get_accelerator("h100-80g"), cluster, 1 * 64 * 32)
    s = ev.stages[1]  # a middle stage: no tied-embedding all-reduce
    tier = cluster.ring_tier(32, 4, "dp")
    rs = reduce_scatter_latency_s(s.grad_bytes, 32, tier)
    ag = all_gather_latency_s(s.weight_bytes, 32, tier)
    assert s.dp_allreduce_s == pytest.approx(rs + ag)
    share = min(1.0, max(st.DDP_BUCKET_PARAMS, st.DDP_BUCKET_PARAMS_PER_DP_RANK * 32) / s.params)
    exposed = max(share * rs, rs - s.bwd_s) + max(share * ag, ag - s.fwd_s)
    # the hidden rest slows the compute beside it: NCCL's kernels on the SMs plus the InfiniBand transfer's
    # share of the memory system (the NVLink measurement scaled by 45 / 364 GB/s)
    k = 0.1936 + 0.0785 * tier.effective_bandwidth_Bps / 363.8e9
    hbm_Bps = get_accelerator("h100-80g").hbm_bandwidth_Bps * 0.90
    assert st.sync_interference(ev_costs(plan, model, cluster), st.Topology.of(cluster, 4, 32, 8), hbm_Bps) == \
        pytest.approx(k, rel=2e-3)
    assert s.dp_exposed_s == pytest.approx(exposed + k * (rs + ag - exposed), rel=1e-3)
    assert exposed < s.dp_exposed_s < max(share * (rs + ag), rs + ag - s.bwd_s)  # less than hiding both behind bwd


def ev_costs(plan, model, cluster):
    from phaze.placement.evaluation import plan_costs
    return plan_costs(plan, model, get_accelerator("h100-80g"), cluster)[plan.recompute_of(0)]


def test_overlapped_sync_costs_the_compute_beside_it_hand_case():
    # reduce 0.6 s behind a 0.3 s backward (0.3 exposed, 0.3 hidden), gather 0.4 s behind a 0.1 s forward
    # (0.3 exposed, 0.1 hidden): 0.4 s hidden at 0.25 s per second -> 0.1 s more
    assert st.exposed_sync_s(1.0, 0.3, True, 1e12, 8, 0.4, 0.1, 0.25) == pytest.approx(0.6 + 0.1)
    assert st.exposed_sync_s(1.0, 0.3, False, 1e12, 8, 0.4, 0.1, 0.25) == 1.0  # nothing overlapped
    import numpy as np
    arr = st.exposed_sync_s(np.array([1.0, 1.0]), np.array([0.3, 5.0]), True, np.array([1e12, 4e8]), 8,
                            np.array([0.4, 0.4]), np.array([0.1, 5.0]), 0.25)
    assert arr == pytest.approx([0.7, 0.1 + 0.25 * 0.9])


def test_designed_chips_pay_the_memory_share_and_single_replicas_nothing():
    """A designed chip's DMA holds no compute, but the bytes it moves go through HBM: the transfer part only,
    scaled to that chip's memory bandwidth. No data parallelism, no sync, nothing lost."""
    from phaze.cost.overlap import transfer_interference
    model = get_model("gpt3-175b")
    cluster = get_cluster("dgx-h100", 1024)
    plan = Plan.balanced(model.num_layers, 8, 4, 32, 1, 64, sequence_parallel=True, zero=True, runtime=PLAN_RUNTIME)
    from phaze.placement.evaluation import plan_costs
    acc = get_accelerator("tpuv4-like")
    chip = plan_costs(plan, model, acc, cluster)[plan.recompute_of(0)]
    assert chip.time_model == "scheduled"
    topo = st.Topology.of(cluster, 4, 32, 8)
    hbm_Bps = acc.hbm_bandwidth_Bps * acc.memory_efficiency
    k = st.sync_interference(chip, topo, hbm_Bps)
    assert k == transfer_interference(topo.dp_tier.effective_bandwidth_Bps, hbm_Bps)
    # by hand: two NDR NICs (90 GB/s) beside 1.2 TB/s take 7.5% of it, against 364 / 3015 = 12.1% measured
    assert k == pytest.approx(0.0785 * (90 / 1200) / (363.8 / 3015), rel=3e-3)
    gpu = ev_costs(plan, model, cluster)
    assert st.sync_interference(gpu, topo, hbm_Bps) == pytest.approx(0.1936 + k, rel=2e-3)
    assert st.sync_interference(gpu, st.Topology.of(cluster, 4, 1, 8), hbm_Bps) == 0.0
