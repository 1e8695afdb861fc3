"""Gradient-accumulation fusion (``grad_accum_fusion``, ``--no-grad-accum-fusion``): Megatron-LM's wgrad GEMMs add
into the gradient buffer in their epilogue; without the fusion each writes a fresh 16-bit gradient that DDP's hook
adds in (phaze.cost.gpu_layer.grad_accumulate_s). Hand-computed bytes and launches; the layer's backward grows by
exactly that; the plan field, the CLI flag and the held-out-3 runs that carry it."""
import json
from importlib import resources

import pytest

from phaze.cost.gpu_layer import grad_accumulate_s
from phaze.errors import ConfigError
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, evaluate
from phaze.placement.layer_costs import compute_layer_costs, setting_for
from phaze.validation.runs import runs_from_mapping
from phaze.workload.config import ModelConfig
from clirunner import EVALUATE_GPT2_XL, evaluate_json_pair, run_phaze
from phaze.workload.runtime import PAPER_RUNTIME

# what an old Plan(...) without runtime keywords ran: standard attention, fp16, no DP overlap, no reserve
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)

H100 = get_accelerator("h100-80g")
GPT = ModelConfig("tiny-gpt", num_layers=2, hidden=256, heads=4, ffn=1024, vocab=1000, seq_len=128)


def test_grad_accumulate_hand_computed():
    bw = H100.hbm_bandwidth_Bps * H100.memory_efficiency
    ov = H100.op_overhead_s
    params, grad_bytes = 1e6, 4e6  # fp32 main grads
    fused = grad_accumulate_s(grad_bytes, H100, params=params, tensors=4)
    assert fused == pytest.approx(8e6 / bw)  # main_grad read + write in the GEMM epilogue
    # unfused: + the GEMM's 2 B write and the add's 2 B read per parameter, one add launch per weight
    unfused = grad_accumulate_s(grad_bytes, H100, params=params, fused=False, tensors=4)
    assert unfused == pytest.approx((8e6 + 4e6) / bw + 4 * ov)
    # deterministic: the fresh gradient is filled too (2 B) and each fill is a launch
    det = grad_accumulate_s(grad_bytes, H100, params=params, fused=False, deterministic=True, tensors=4)
    assert det == pytest.approx((8e6 + 6e6) / bw + 8 * ov)
    # fused, deterministic mode changes nothing (nothing fresh is allocated)
    assert grad_accumulate_s(grad_bytes, H100, params=params, deterministic=True, tensors=4) == fused
    assert grad_accumulate_s(0.0, H100, params=0, fused=False) == 0.0


@pytest.mark.parametrize("deterministic", [False, True])
def test_block_backward_grows_by_exactly_the_unfused_traffic(deterministic):
    tier = get_cluster("dgx-h100", 8).tier_for_group(1, 1, "tp")
    rt = PAPER_RUNTIME.with_(attention="flash", precision="bf16", deterministic=deterministic)
    fused = compute_layer_costs(GPT, H100, setting_for(GPT, 2, 1, False, "none", runtime=rt), tier)
    unfused = compute_layer_costs(GPT, H100, setting_for(GPT, 2, 1, False, "none",
                                                         runtime=rt.with_(grad_accum_fusion=False)), tier)
    bw = H100.hbm_bandwidth_Bps * H100.memory_efficiency
    per_param, launches = (6, 8) if deterministic else (4, 4)  # the block's 4 weights: qkv, out_proj, fc1, fc2
    b = fused["block"]
    assert unfused["block"].bwd_s - b.bwd_s == pytest.approx(per_param * b.params / bw
                                                             + launches * H100.op_overhead_s)
    assert unfused["block"].fwd_s == b.fwd_s
    # memory does not move (the transient gradient is not modelled)
    assert unfused["block"].activation_bytes == b.activation_bytes and unfused["block"].grad_bytes == b.grad_bytes


def test_plan_field_and_description():
    p = Plan.balanced(GPT.num_layers, 1, 1, 2, 1, 4, runtime=PLAN_RUNTIME.with_(grad_accum_fusion=False))
    assert p.describe().endswith(" no-grad-accum-fusion")
    assert "no-grad-accum-fusion" not in Plan.balanced(GPT.num_layers, 1, 1, 2, 1, 4, runtime=PLAN_RUNTIME).describe()
    assert Plan.from_dict(p.to_dict()) == p and p.to_dict()["grad_accum_fusion"] is False
    with pytest.raises(ConfigError, match="grad_accum_fusion"):
        Plan.balanced(GPT.num_layers, 1, 1, 2, 1, 4, runtime=PLAN_RUNTIME.with_(grad_accum_fusion="no"))
    cl = get_cluster("dgx-h100", 2)
    slow = evaluate(p, GPT, H100, cl, 8)
    fast = evaluate(Plan.balanced(GPT.num_layers, 1, 1, 2, 1, 4, runtime=PLAN_RUNTIME), GPT, H100, cl, 8)
    assert slow.iteration_time_s > fast.iteration_time_s
    assert slow.memory_bytes_per_device == fast.memory_bytes_per_device


def test_cli_flag(capsys):
    off, on = evaluate_json_pair(capsys, "--no-grad-accum-fusion")
    assert off["grad_accum_fusion"] is False and on["grad_accum_fusion"] is True
    assert off["iteration_time_s"] > on["iteration_time_s"]
    assert off["memory_bytes_per_device"] == on["memory_bytes_per_device"]
    code, out, _ = run_phaze(capsys, *EVALUATE_GPT2_XL, "--no-grad-accum-fusion")
    assert code == 0 and "no-grad-accum-fusion" in out
    code, out, _ = run_phaze(capsys, "plan", "--help")
    assert code == 0 and "--no-grad-accum-fusion" in out


def test_held_out3_runs_carry_it():
    """Every Megatron-LM CI run of the third held-out set sets --no-gradient-accumulation-fusion in its
    model_config.yaml; no run of another set does."""
    for f, expect in (("held_out3_runs.json", False), ("published_runs.json", True), ("held_out_runs.json", True),
                      ("held_out2_runs.json", True), ("held_out4_runs.json", True)):
        d = json.loads(resources.files("phaze.validation").joinpath("data", f).read_text())
        cases = runs_from_mapping(d, f).time
        assert cases and all(c.grad_accum_fusion is expect for c in cases), f
