"""The host-bound MoE block (phaze.cost.moe_host): its host time by hand, max(GPU, host) per block, the stall
split between the directions, and what it does (and does not do) to whole-plan costs."""
from dataclasses import replace

import pytest

from phaze.cost.moe_host import (HOST_OPS_PER_LOCAL_EXPERT, HOST_TENSOR_OP_S, MOE_BLOCK_HOST_S, host_bound_block_s,
                                 moe_block_host_s)
from phaze.workload.config import ModelConfig

M = ModelConfig(name="small-moe", num_layers=4, hidden=256, heads=8, kv_heads=4, ffn=1024, vocab=1000, seq_len=512,
                norm="rmsnorm", mlp="swiglu", position="rotary", bias=False, dropout=False, tied_embeddings=False,
                num_experts=16, experts_per_token=2, moe_ffn=256)


def test_the_cited_figures():
    # TE PR #865: ~5 us of host time per PyTorch tensor; 2 GroupedLinears x (4 fwd + 4 dgrad + 2 wgrad) per expert
    assert HOST_TENSOR_OP_S == 5e-6 and HOST_OPS_PER_LOCAL_EXPERT == 2 * (4 + 4 + 2)
    # 0.1 ms of host time per local expert and block, forward + backward
    assert HOST_OPS_PER_LOCAL_EXPERT * HOST_TENSOR_OP_S == pytest.approx(1e-4)


def test_block_host_time_by_hand():
    # Qwen3-30B-A3B at EP 8: 128 / 8 = 16 local experts -> 12.7 ms + 16 x 0.1 ms = 14.3 ms
    assert MOE_BLOCK_HOST_S == pytest.approx(12.7e-3)
    assert moe_block_host_s(16) == pytest.approx(12.7e-3 + 1.6e-3)
    assert moe_block_host_s(4) == pytest.approx(13.1e-3)
    assert moe_block_host_s(0) == moe_block_host_s(1)  # at least the one expert's work
    assert all(moe_block_host_s(n) < moe_block_host_s(n + 1) for n in range(1, 64))


def test_host_bound_is_the_longer_of_gpu_and_host():
    # GPU-bound: untouched
    assert host_bound_block_s(0.006, 0.012, 0.010) == (0.006, 0.012, 0.0)
    # host-bound: 2 + 4 ms of GPU under 9 ms of host -> 3 + 6 ms (the 1:2 split kept), 3 ms of stall
    f, b, stall = host_bound_block_s(0.002, 0.004, 0.009)
    assert (f, b, stall) == pytest.approx((0.003, 0.006, 0.003))
    assert f + b == pytest.approx(0.009) and f / b == pytest.approx(0.5)
    # at equality nothing stalls; no GPU work: nothing to scale
    assert host_bound_block_s(0.003, 0.006, 0.009)[2] == 0.0
    assert host_bound_block_s(0.0, 0.0, 0.009) == (0.0, 0.0, 0.0)


def test_only_gpu_moe_blocks_are_host_bound():
    """On an H100 (the sequential model) a small MoE block takes its host time; its dense layers (embedding,
    head) and a dense model do not move; a designed chip (scheduled model) has no host term."""
    from phaze.hardware.presets import get_accelerator
    from phaze.placement.layer_costs import compute_layer_costs
    from phaze.workload.runtime import Runtime, TrainSetting

    acc = get_accelerator("h100-80g")
    s = TrainSetting(microbatch_size=1, seq_len=512, runtime=Runtime(attention="flash", moe_routing="balanced"))
    c = compute_layer_costs(M, acc, s, None, "sequential")
    host = moe_block_host_s(16)  # ep 1: all 16 experts local
    assert c.block.fwd_s + c.block.bwd_s == pytest.approx(host)  # a 256-wide block is far below 12.7 ms of GPU
    assert 0 < c.block.moe_host_s < host
    assert c.embedding.moe_host_s == 0.0 and c.head.moe_host_s == 0.0
    dense = replace(M, num_experts=0, experts_per_token=0, moe_ffn=0)
    assert compute_layer_costs(dense, acc, s, None, "sequential").block.moe_host_s == 0.0


def test_a_gpu_bound_run_does_not_move():
    """DeepSeek-V3 and Mixtral on the dev set spend more GPU time per block than the host needs: no stall."""
    from phaze.validation.moe import validate_moe

    rep = {r.case.split(" H100")[0]: r for r in validate_moe().runs}
    assert rep["Megatron-Core v0.9 Mixtral 8x7B"].parts_s["moe_host_s"] == 0.0
    assert rep["MB 25.09 DeepSeek-V3 671B"].parts_s["moe_host_s"] == 0.0
    # Qwen3-30B-A3B is the most host-bound: most of its steady state is the host stall
    q30 = rep["MB 25.11 Qwen3-30B-A3B"]
    assert q30.parts_s["moe_host_s"] > 0.5 * q30.parts_s["steady_s"]


def test_where_the_time_goes_shows_the_host_stall():
    """A host-bound run's breakdown names the stall and still adds up to the iteration."""
    from phaze.hardware.presets import get_accelerator, get_cluster
    from phaze.placement import evaluate
    from phaze.report.details import iteration_parts
    from phaze.validation.moe import load_runs, run_model, run_plan

    run = {r["case"]: r for r in load_runs()["runs"]}["MB 25.11 GPT-OSS-120B H100 BF16 (64 GPUs)"]
    model = run_model(run)
    ev = evaluate(run_plan(run, model), model, get_accelerator("h100-80g"), get_cluster("dgx-h100", 64),
                  run["global_batch"]).to_dict()
    parts = dict(iteration_parts(ev))
    assert sum(parts.values()) == pytest.approx(ev["iteration_time_s"], rel=1e-9)
    assert parts["MoE host-bound stall (bottleneck stage)"] > 0
    assert all(v >= 0 for v in parts.values())
