"""Deterministic mode (``deterministic``, ``--deterministic``): PyTorch fills every allocation under
``torch.use_deterministic_algorithms(True)`` (phaze.cost.gpu_determinism). The filled bytes hand-counted on a
made-up graph and on a GPT block; the layer times grow by exactly the fills; the refusals (TP overlap, a
designed chip); the plan field, the CLI flag and the held-out-3 runs that carry it."""
import json
from importlib import resources

import pytest

from phaze import api
from phaze.cost.gpu_determinism import deterministic_fill_s, fill_bytes
from phaze.errors import ConfigError
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, evaluate
from phaze.placement.layer_costs import compute_layer_costs, setting_for
from phaze.validation.runs import runs_from_mapping
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PAPER_RUNTIME, TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.ops import Collective, Gemm, LayerGraph, VectorOp
from clirunner import EVALUATE_GPT2_XL, evaluate_json_pair, run_phaze

# what an old Plan(...) without runtime keywords ran: standard attention, fp16, no DP overlap, no reserve
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)

H100 = get_accelerator("h100-80g")
GPT = ModelConfig("tiny-gpt", num_layers=2, hidden=256, heads=4, ffn=1024, vocab=1000, seq_len=128)


def test_fill_bytes_hand_counted():
    ops = (
        Gemm("fc1", 1, 4, 8, 16),  # 4 x 8 outputs x 2 B = 64
        Gemm("fc1.wgrad", 1, 16, 8, 4),  # accumulated into the gradient buffer: 0
        Gemm("flash_scores", 2, 4, 4, 8),  # on chip: 0
        Gemm("recompute.flash_scores", 2, 4, 4, 8),  # on chip: 0
        Gemm("flash_pv.dprobs", 2, 4, 4, 8),  # on chip: 0
        Gemm("flash_pv", 2, 4, 8, 4),  # O: 2 x 4 x 8 x 2 B = 128
        Gemm("fc2", 1, 4, 8, 16, bytes_per_element=1),  # FP8 inputs, 16-bit output: 64
        VectorOp("res", "dropout_add", 10, 1.0, 70),  # output 20 + mask 10 = 30
        VectorOp("res.bwd", "dropout_add_bwd", 10, 1.0, 70),  # 20, no mask
        VectorOp("gelu", "gelu", 10, 1.0, 40),  # 20
        VectorOp("ce_max", "cross_entropy_max", 100, 1.0, 200),  # the fp32 copy of the logits: 400
        VectorOp("ce", "cross_entropy", 100, 1.0, 600),  # in place: 0
        VectorOp("ce.bwd", "cross_entropy_bwd", 100, 1.0, 600),  # the 16-bit gradient: 200
        Collective("ag", "all_gather", 1000, 4),  # the gathered output: 1000
        Collective("rs", "reduce_scatter", 1000, 4),  # a quarter: 250
        Collective("ar", "all_reduce", 1000, 4),  # in place: 0
        Collective("ag1", "all_gather", 1000, 1),  # a group of one moves nothing: 0
    )
    g = LayerGraph("block", "fwd", ops, ())
    nbytes, allocations = fill_bytes(g)
    assert nbytes == 64 + 128 + 64 + 30 + 20 + 20 + 400 + 200 + 1000 + 250
    assert allocations == 10
    assert deterministic_fill_s(g, 1e9, 3e-6) == pytest.approx(nbytes / 1e9 + 10 * 3e-6)


def test_a_gpt_block_fills_its_activations():
    """Forward of a GPT block at b = 2, s = 128, h = 256, t = 1: norm1, qkv (3h), O (h), out_proj, the residual
    (with its dropout mask), norm2, fc1 (ffn), gelu (ffn), fc2, the second residual."""
    s = setting_for(GPT, 2, 1, False, "none", runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16", deterministic=True))
    tokens, h, f = 2 * 128, 256, 1024
    want = 2 * tokens * (h + 3 * h + h + h + h + h + f + f + h + h) + 2 * tokens * h  # + two 1-byte masks
    assert fill_bytes(layer_graph(GPT, s, "block", "fwd")) == (want, 10)


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("kind", ["embedding", "block", "head"])
def test_layer_times_grow_by_exactly_the_fills(kind, direction):
    det = setting_for(GPT, 2, 2, False, "none", runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16", deterministic=True))
    base = setting_for(GPT, 2, 2, False, "none", runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16"))
    tier = get_cluster("dgx-h100", 8).tier_for_group(2, 1, "tp")
    a = compute_layer_costs(GPT, H100, det, tier)[kind]
    b = compute_layer_costs(GPT, H100, base, tier)[kind]
    fill = deterministic_fill_s(layer_graph(GPT, det, kind, direction), H100.hbm_bandwidth_Bps * H100.memory_efficiency,
                                H100.op_overhead_s)
    assert fill > 0
    got = (a.fwd_s - b.fwd_s) if direction == "fwd" else (a.bwd_s - b.bwd_s)
    assert got == pytest.approx(fill, rel=1e-9)
    assert a.activation_bytes == b.activation_bytes and a.weight_bytes == b.weight_bytes  # time only


def test_refusals_are_one_line():
    with pytest.raises(ConfigError, match="tp-comm-overlap"):
        TrainSetting(2, 128, tp=2, sequence_parallel=True, runtime=PAPER_RUNTIME.with_(tp_overlap=True, deterministic=True))
    with pytest.raises(ConfigError, match="tp-comm-overlap"):
        Plan.balanced(GPT.num_layers, 1, 2, 1, 2, 1, sequence_parallel=True, runtime=PLAN_RUNTIME.with_(tp_overlap=True, deterministic=True))
    with pytest.raises(ConfigError, match="--tp-overlap"):
        api.evaluate_plan(GPT, "h100-80g", 2, 2, api.PlanShape(tp=2, pp=1, dp=1, mbs=2, sequence_parallel=True), runtime=api.Runtime(tp_overlap=True, deterministic=True))
    with pytest.raises(ConfigError, match="sequential"):  # a designed chip has no PyTorch allocator
        api.evaluate_plan(GPT, "tpuv4-like", 1, 2, api.PlanShape(tp=1, pp=1, dp=1, mbs=2), runtime=api.Runtime(deterministic=True))
    # TP overlap with deterministic mode is now refused by the Runtime itself, whatever the width (before the
    # Runtime refactor a t = 1 setting accepted the pair, as its overlap did nothing)
    with pytest.raises(ConfigError, match="tp-comm-overlap"):
        TrainSetting(2, 128, tp=1, runtime=PAPER_RUNTIME.with_(tp_overlap=True, deterministic=True))


def test_plan_round_trip_and_search():
    p = Plan.balanced(GPT.num_layers, 1, 1, 2, 2, 2, runtime=PLAN_RUNTIME.with_(attention="flash", precision="bf16", deterministic=True))
    assert "deterministic" in p.describe() and Plan.from_dict(p.to_dict()) == p
    det = api.plan(GPT, "h100-80g", 4, 16, runtime=api.Runtime(deterministic=True), top_k=2)
    base = api.plan(GPT, "h100-80g", 4, 16, top_k=2)
    assert det.best.plan.deterministic and not base.best.plan.deterministic
    assert all(b.plan is None or b.plan.deterministic for b in det.baselines)
    assert det.best.iteration_time_s > base.best.iteration_time_s
    again = evaluate(det.best.plan, GPT, H100, get_cluster("dgx-h100", 4), 16)
    assert again.iteration_time_s == pytest.approx(det.best.iteration_time_s, rel=1e-12)


def test_cli_flag(capsys):
    d, a = evaluate_json_pair(capsys, "--deterministic")
    assert d["deterministic"] is True and a["deterministic"] is False
    assert d["iteration_time_s"] > a["iteration_time_s"]
    assert d["memory_bytes_per_device"] == a["memory_bytes_per_device"]
    code, out, err = run_phaze(capsys, *EVALUATE_GPT2_XL, "--deterministic", "--tp-overlap")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "--tp-overlap" in err
    code, out, _ = run_phaze(capsys, "plan", "--help")
    assert code == 0 and "--deterministic" in out


def test_held_out3_runs_carry_deterministic_mode():
    """The CI runs whose model_config.yaml sets --deterministic-mode carry it: both 7B runs on both GPUs and every
    small run but the context-parallel one."""
    f = "held_out3_runs.json"
    d = json.loads(resources.files("phaze.validation").joinpath("data", f).read_text())
    cases = {c.name: c for c in runs_from_mapping(d, f).time}
    flags = {r["case"]: r.get("deterministic", False) for r in d["runs"]}
    assert all(cases[k].deterministic == v for k, v in flags.items())
    assert [k for k, v in flags.items() if not v] == ["Megatron-LM CI small GPT tp2_pp2_cp2 H100 (memory)"]
    assert sum(1 for k, v in flags.items() if v and "gpt3_7b" in k) == 4
