"""The gradients' number format (``grad_dtype``, ``--grad-dtype``): Adam's 4-byte fp32 main grad or a 2-byte
bf16 buffer (NeMo ``optim.grad_sync_dtype: bf16``). Checked by hand on every consumer of the gradient bytes:
memory, the DP reduce-scatter / all-reduce, the wgrad accumulation pass, the optimizer step and the plan bounds;
the default left as it was; the plan field, the CLI flag and the held-out-2 run that carries it."""
import importlib.util
import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from phaze import api
from phaze.cost.network import all_gather_latency_s, allreduce_latency_s, reduce_scatter_latency_s
from phaze.errors import ConfigError
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, evaluate
from phaze.placement.bounds import least_traffic_bytes
from phaze.placement.evaluation import DeviceSpec
from phaze.placement.layer_costs import compute_layer_costs, setting_for
from phaze.validation.runs import runs_from_mapping
from phaze.workload.runtime import PAPER_RUNTIME, TrainSetting
from phaze.workload.memory import layer_memory
from phaze.workload.zoo import get_model
from clirunner import EVALUATE_GPT2_XL, evaluate_json_pair, run_phaze

# what an old Plan(...) without runtime keywords ran: standard attention, fp16, no DP overlap, no reserve
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)

GPT2 = get_model("gpt2-xl")  # h 1600, 48 blocks, seq 1024, vocab 50257, biases, layernorm, GELU, ffn 4h, tied
A100 = get_accelerator("a100-80g")
H = GPT2.hidden
BLOCK_PARAMS = 12 * H * H + 13 * H  # qkv 3h^2+3h, out h^2+h, fc1 4h^2+4h, fc2 4h^2+h, two layernorms 4h
EMBED_PARAMS = 50257 * H + 1024 * H  # the HF vocabulary (not padded at t = 1) + learned positions


def _eval(grad_dtype, *, pp=1, tp=1, dp=1, zero=False, mbs=1, batch=None, cluster="dgx-a100"):
    batch = batch or 8 * dp
    plan = Plan.balanced(GPT2.num_layers, pp, tp, dp, mbs, batch // (mbs * dp), zero=zero,
                         runtime=PLAN_RUNTIME.with_(attention="flash", precision="bf16", grad_dtype=grad_dtype))
    return evaluate(plan, GPT2, A100, get_cluster(cluster, pp * tp * dp), batch)


def test_gradient_bytes_of_one_layer_by_hand():
    assert layer_memory(GPT2, TrainSetting(1, 1024), "block").params == BLOCK_PARAMS
    fp32 = layer_memory(GPT2, TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(grad_dtype="fp32")), "block")
    bf16 = layer_memory(GPT2, TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(grad_dtype="bf16")), "block")
    assert fp32.grad_bytes == 4 * BLOCK_PARAMS and bf16.grad_bytes == 2 * BLOCK_PARAMS
    assert bf16.grad_bytes * 2 == fp32.grad_bytes
    # weights and optimizer state (fp32 master + m + v = 12 B) do not move, nor do the activations
    assert (bf16.weight_bytes, bf16.optimizer_bytes, bf16.activation_bytes) == \
           (fp32.weight_bytes, 12 * BLOCK_PARAMS, fp32.activation_bytes) and fp32.weight_bytes == 2 * BLOCK_PARAMS
    # the Phaze reference's 16-bit SGD keeps its 2-byte gradient whatever grad_dtype says
    for g in ("fp32", "bf16"):
        assert layer_memory(GPT2, TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(grad_dtype=g)), "block", "sgd").grad_bytes == 2 * BLOCK_PARAMS


def test_the_default_is_fp32_and_leaves_costs_unchanged():
    assert TrainSetting(1, 1024) == TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(grad_dtype="fp32"))
    assert setting_for(GPT2, 1, 1, False, "none") == setting_for(GPT2, 1, 1, False, "none", runtime=PAPER_RUNTIME.with_(grad_dtype="fp32"))
    plan = Plan.balanced(GPT2.num_layers, 1, 1, 1, 1, 8, runtime=PLAN_RUNTIME)
    assert plan.grad_dtype == "fp32" and "grads" not in plan.describe() and plan.to_dict()["grad_dtype"] == "fp32"


def test_stage_memory_differs_by_two_bytes_per_parameter():
    a, b = _eval("fp32", pp=2), _eval("bf16", pp=2)
    assert a.stages[0].params == EMBED_PARAMS + 24 * BLOCK_PARAMS  # embedding + 24 of the 48 blocks
    for sa, sb in zip(a.stages, b.stages):
        assert sa.params == sb.params
        assert sa.memory_bytes - sb.memory_bytes == pytest.approx(2.0 * sa.params, rel=1e-12)
        assert sb.grad_bytes == 2.0 * sb.params and sa.grad_bytes == 4.0 * sa.params
    assert a.memory_bytes_per_device - b.memory_bytes_per_device == pytest.approx(2.0 * a.stages[0].params)


@pytest.mark.parametrize("zero", [True, False])
def test_dp_sync_moves_half_the_bytes(zero):
    """d = 16 on two DGX A100 nodes: the DP ring crosses InfiniBand. The bf16 plan's sync is the network
    function's reduce-scatter (ZeRO-1, plus the unchanged weight all-gather) or all-reduce of half the fp32
    gradient bytes."""
    a, b = _eval("fp32", dp=16, zero=zero), _eval("bf16", dp=16, zero=zero)
    tier = get_cluster("dgx-a100", 16).ring_tier(16, 1, "dp")
    assert tier.name == "infiniband"
    sa, sb = a.stages[0], b.stages[0]
    assert sb.grad_bytes == sa.grad_bytes / 2
    if zero:
        gather = all_gather_latency_s(sa.weight_bytes, 16, tier)
        assert sa.dp_allreduce_s == pytest.approx(reduce_scatter_latency_s(sa.grad_bytes, 16, tier) + gather, rel=1e-12)
        assert sb.dp_allreduce_s == pytest.approx(reduce_scatter_latency_s(sa.grad_bytes / 2, 16, tier) + gather,
                                                  rel=1e-12)
    else:
        assert sa.dp_allreduce_s == pytest.approx(allreduce_latency_s(sa.grad_bytes, 16, tier), rel=1e-12)
        assert sb.dp_allreduce_s == pytest.approx(allreduce_latency_s(sa.grad_bytes / 2, 16, tier), rel=1e-12)
    assert sb.dp_allreduce_s < sa.dp_allreduce_s


def test_grad_accumulation_pass_halves():
    """GPU model: each microbatch's wgrad reads and writes the gradient buffer once (2 x grad bytes at the
    achievable HBM bandwidth); with bf16 gradients that pass costs half, the forward nothing more."""
    rt = PAPER_RUNTIME.with_(attention="flash", precision="bf16")
    ca = compute_layer_costs(GPT2, A100, setting_for(GPT2, 2, 1, False, "full", runtime=rt), None, "sequential")
    cb = compute_layer_costs(GPT2, A100, setting_for(GPT2, 2, 1, False, "full", runtime=rt.with_(grad_dtype="bf16")),
                             None, "sequential")
    bw = A100.hbm_bandwidth_Bps * A100.memory_efficiency
    for kind in ("embedding", "block", "head"):
        x, y = ca[kind], cb[kind]
        assert y.fwd_s == x.fwd_s
        assert x.bwd_s - y.bwd_s == pytest.approx(2.0 * (4 - 2) * x.params / bw, rel=1e-9)
    assert ca.block.params == BLOCK_PARAMS and ca.block.bwd_s - cb.block.bwd_s == pytest.approx(
        4.0 * BLOCK_PARAMS / (2.039e12 * 0.90), rel=1e-9)  # the preset: 2,039 GB/s HBM2e at 90 % achievable


def test_optimizer_step_and_bound_traffic_lose_ten_bytes_per_parameter():
    """Optimizer-step traffic reads/writes the gradient 5 times (zero, unscale r+w, norm, Adam read): 5 x 2 B
    fewer per parameter with bf16 gradients, in the evaluation (/d with ZeRO-1) and in the bound the
    placement optimizer prunes with (it reads the same LayerCosts)."""
    a, b = _eval("fp32", pp=2, dp=4, zero=True, cluster="dgx-a100"), _eval("bf16", pp=2, dp=4, zero=True)
    hbm = DeviceSpec.of(A100).hbm_Bps
    for sa, sb in zip(a.stages, b.stages):
        assert sa.optimizer_step_s - sb.optimizer_step_s == pytest.approx(10.0 * sa.params / 4 / hbm, rel=1e-9)
    s32 = setting_for(GPT2, 1, 1, False, "none")
    costs = {g: {"none": compute_layer_costs(GPT2, A100, replace(s32, runtime=s32.runtime.with_(grad_dtype=g)), None, "sequential")}
             for g in ("fp32", "bf16")}
    total = EMBED_PARAMS + 48 * BLOCK_PARAMS + costs["fp32"]["none"].head.params
    assert least_traffic_bytes(costs["fp32"], 48) - least_traffic_bytes(costs["bf16"], 48) == \
           pytest.approx(10.0 * total, rel=1e-12)


def test_plan_with_bf16_gradients_is_never_slower():
    """Same plan space, bf16 gradients: every cost is no larger, so the best plan is no slower, and the fp32
    winner re-evaluated with bf16 gradients is no faster than the bf16 winner (which is exact)."""
    # ZeRO 0-1 only: ZeRO-2 shards the fp32 gradients too, which would let the fp32 plan take mbs 2 as well
    kw = dict(space=api.PlanSpace(microbatch_sizes=(1, 2), recompute_modes=("none", "full"), interleave_values=(1, 2, 4),
                                  zero=(0, 1)), top_k=1)
    a = api.plan("llama2-7b", "h100-80g", 8, 64, **kw)
    b = api.plan("llama2-7b", "h100-80g", 8, 64, runtime=api.Runtime(grad_dtype="bf16"), **kw)
    assert b.best.plan.grad_dtype == "bf16" and a.best.plan.grad_dtype == "fp32"
    assert b.best.iteration_time_s <= a.best.iteration_time_s
    # here strictly: p=1 d=8 mbs=2 needs 80.3 GiB with fp32 gradients (no fit in 71.5), 67.8 GiB with bf16, so
    # only bf16 gradients allow the larger micro-batch
    assert b.best.iteration_time_s < a.best.iteration_time_s
    assert (b.best.plan.dp, b.best.plan.microbatch_size) == (8, 2) and a.best.plan.microbatch_size == 1
    # the plan's runtime carries the reserve a.best was evaluated with
    assert a.best.plan.runtime.memory_reserve_bytes == a.best.memory_reserve_bytes
    again = evaluate(replace(a.best.plan, runtime=a.best.plan.runtime.with_(grad_dtype="bf16")), get_model("llama2-7b"),
                     get_accelerator("h100-80g"), get_cluster("dgx-h100", 8), 64)
    assert again.fits and again.iteration_time_s <= a.best.iteration_time_s
    assert b.best.iteration_time_s <= again.iteration_time_s * (1 + 1e-12)
    assert b.best.memory_bytes_per_device <= b.best.memory_capacity_bytes


def test_cli_flag(capsys):
    args = EVALUATE_GPT2_XL
    b, a = evaluate_json_pair(capsys, "--grad-dtype", "bf16")
    assert b["grad_dtype"] == "bf16" and a["grad_dtype"] == "fp32"
    assert b["iteration_time_s"] < a["iteration_time_s"]
    assert b["memory_bytes_per_device"] < a["memory_bytes_per_device"]
    code, out, _ = run_phaze(capsys, *args, "--grad-dtype", "bf16")
    assert code == 0 and "grads=bf16" in out
    code, out, _ = run_phaze(capsys, *args)
    assert code == 0 and "grads=" not in out
    code, out, err = run_phaze(capsys, *args, "--grad-dtype", "fp16")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "fp16" in err and "bf16" in err
    code, out, _ = run_phaze(capsys, "plan", "--help")
    assert code == 0 and "--grad-dtype" in out and "not searched" in " ".join(out.split())


def _held_out2() -> dict:
    return json.loads(resources.files("phaze.validation").joinpath("data", "held_out2_runs.json").read_text())


def test_validation_runs_carry_the_gradient_format():
    """A run carries bf16 gradients exactly when its evidence says its configuration sets grad_sync_dtype bf16
    (dgxc-benchmarking's NeMo yamls, the 24.07 launcher's Nemotron-340B config and H100 FP8 example scripts); the
    Megatron-LM runs (fp32 forced with --bf16), SC21, MT-NLG and NeMo 24.07 Nemotron 8B / 22B stay fp32."""
    bf16 = {}
    for f in ("published_runs.json", "held_out_runs.json", "held_out2_runs.json"):
        d = json.loads(resources.files("phaze.validation").joinpath("data", f).read_text())
        cases = {c.name: c for c in runs_from_mapping(d, f).time}
        for r in d["runs"]:
            says = any("grad_sync_dtype" in a and "bf16" in a and "grad_dtype bf16" in a for a in r["assumptions"])
            assert (r.get("grad_dtype", "fp32") == "bf16") == says, r["case"]
            assert cases[r["case"]].grad_dtype == r.get("grad_dtype", "fp32")
            bf16[r["case"]] = says
    assert sum(bf16.values()) == 13 + 34 + 10
    assert not any(v for k, v in bf16.items() if k.startswith(("SC21", "Megatron-LM", "MT-NLG")))
    assert not bf16["NeMo 24.07 Nemotron-8B FP8 (64 GPUs)"] and bf16["NeMo 24.07 Nemotron-340B FP8 (128 GPUs)"]
    run = dict(_held_out2()["runs"][0], grad_dtype="fp16")
    with pytest.raises(ConfigError, match="grad_dtype"):
        runs_from_mapping({"runs": [run]}, "x.json")


def test_build_script_reproduces_the_held_out2_file():
    path = Path(__file__).resolve().parents[2] / "scripts" / "build_held_out2.py"
    spec = importlib.util.spec_from_file_location("build_held_out2", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    text = resources.files("phaze.validation").joinpath("data", "held_out2_runs.json").read_text()
    assert json.dumps(mod.document(), indent=1) + "\n" == text
