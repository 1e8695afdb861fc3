"""What Adam keeps per parameter (``optimizer_state``, ``--optimizer-state``): Megatron's fp32 master copy + m + v
(12 B), Apex's store_param_remainders (10 B), or NeMo's ``optim.dtype: bf16`` with / without a bf16 master copy
(6 / 4 B). Checked by hand on memory (sharded by ZeRO-1) and the optimizer-step traffic; the default left as it
was; the plan field, the CLI flag and the validation runs that carry it, each with its configuration's evidence."""
import json
from importlib import resources

import pytest

from phaze import api
from phaze.errors import ConfigError
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.placement import Plan, evaluate
from phaze.placement.evaluation import DeviceSpec
from phaze.validation.runs import runs_from_mapping
from phaze.workload.config import OPTIMIZER_STATES
from phaze.workload.runtime import PAPER_RUNTIME, TrainSetting
from phaze.workload.memory import layer_memory
from phaze.workload.zoo import get_model
from clirunner import EVALUATE_GPT2_XL, evaluate_json_pair, run_phaze

# what an old Plan(...) without runtime keywords ran: standard attention, fp16, no DP overlap, no reserve
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)
GPT2 = get_model("gpt2-xl")  # h 1600, 48 blocks
A100 = get_accelerator("a100-80g")
H = GPT2.hidden
BLOCK_PARAMS = 12 * H * H + 13 * H
# bytes per parameter, worked from what each keeps: master copy + m + v
BY_HAND = {"fp32": 4 + 4 + 4, "fp32-remainders": 2 + 4 + 4, "bf16-master": 2 + 2 + 2, "bf16": 0 + 2 + 2}


def _eval(state, *, pp=2, dp=4, zero=True):
    plan = Plan.balanced(GPT2.num_layers, pp, 1, dp, 1, 8, zero=zero,
                         runtime=PLAN_RUNTIME.with_(attention="flash", precision="bf16", optimizer_state=state))
    return evaluate(plan, GPT2, A100, get_cluster("dgx-a100", pp * dp), 8 * dp)


@pytest.mark.parametrize("state", OPTIMIZER_STATES)
def test_state_bytes_of_one_layer_by_hand(state):
    m = layer_memory(GPT2, TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(optimizer_state=state)), "block")
    assert m.params == BLOCK_PARAMS and m.optimizer_bytes == BY_HAND[state] * BLOCK_PARAMS
    ref = layer_memory(GPT2, TrainSetting(1, 1024), "block")
    assert (m.weight_bytes, m.grad_bytes, m.activation_bytes) == (ref.weight_bytes, ref.grad_bytes,
                                                                  ref.activation_bytes)
    # the Phaze reference's SGD keeps no state whatever optimizer_state says
    assert layer_memory(GPT2, TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(optimizer_state=state)), "block", "sgd").optimizer_bytes == 0


def test_the_default_is_fp32_and_leaves_plans_unchanged():
    assert TrainSetting(1, 1024) == TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(optimizer_state="fp32"))
    plan = Plan.balanced(GPT2.num_layers, 1, 1, 1, 1, 8, runtime=PLAN_RUNTIME)
    assert plan.optimizer_state == "fp32" and "adam=" not in plan.describe()
    assert plan.to_dict()["optimizer_state"] == "fp32"
    assert Plan.from_dict(Plan.balanced(48, 2, 1, 1, 1, 8, runtime=PLAN_RUNTIME.with_(optimizer_state="bf16")).to_dict()).optimizer_state == "bf16"


@pytest.mark.parametrize("zero", [True, False])
def test_stage_memory_and_optimizer_step_by_hand(zero):
    """Against fp32: each stage holds (12 - x) B per parameter less state (/d with ZeRO-1), and its optimizer
    step moves 2 x (12 - x) B less per parameter (Adam reads and writes the state; /d with ZeRO-1)."""
    base = _eval("fp32", zero=zero)
    hbm = DeviceSpec.of(A100).hbm_Bps
    shard = 4 if zero else 1
    for state in OPTIMIZER_STATES[1:]:
        ev = _eval(state, zero=zero)
        for a, b in zip(base.stages, ev.stages):
            saved = (12 - BY_HAND[state]) * a.params
            assert a.params == b.params
            assert a.memory_bytes - b.memory_bytes == pytest.approx(saved / shard, rel=1e-12)
            assert a.optimizer_step_s - b.optimizer_step_s == pytest.approx(2.0 * saved / shard / hbm, rel=1e-9)
        assert ev.iteration_time_s <= base.iteration_time_s


@pytest.mark.parametrize("field, msg", [
    ("grad_dtype", "--grad-dtype: unknown value 'fp16'; use one of fp32, bf16"),
    ("optimizer_state", "--optimizer-state: unknown value 'fp16'; use one of fp32, fp32-remainders, bf16-master, bf16"),
])
def test_bad_values_are_one_line_errors(field, msg):
    """The two optimizer-format fields (this one and ``grad_dtype``) refuse an unknown value at every layer
    (each layer now takes them in its ``Runtime``, which refuses them)."""
    with pytest.raises(ConfigError, match=msg):
        TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(**{field: "fp16"}))
    with pytest.raises(ConfigError, match=msg):
        Plan.balanced(48, 1, 1, 1, 1, 8, runtime=PLAN_RUNTIME.with_(**{field: "fp16"}))
    with pytest.raises(ConfigError, match=msg):
        api.evaluate_plan("gpt2-xl", "a100-80g", 8, 64, api.PlanShape(1, 1, 8, 1), runtime=api.Runtime(**{field: "fp16"}))


def test_cli_flag(capsys):
    args = EVALUATE_GPT2_XL
    b, a = evaluate_json_pair(capsys, "--optimizer-state", "bf16")
    assert b["optimizer_state"] == "bf16" and a["optimizer_state"] == "fp32"
    sa, sb = a["stage_breakdown"][0], b["stage_breakdown"][0]
    assert sa["optimizer_bytes"] - sb["optimizer_bytes"] == pytest.approx(8.0 * sa["params"] / 8, rel=1e-12)
    # one stage holds the tied head copy once: its (12 - 4) B of sharded state are not held twice either
    tied = 50257 * H  # the HF vocabulary (not padded at t = 1)
    assert a["memory_bytes_per_device"] - b["memory_bytes_per_device"] == pytest.approx(
        8.0 * (sa["params"] - tied) / 8, rel=1e-9)
    code, out, _ = run_phaze(capsys, *args, "--optimizer-state", "fp32-remainders")
    assert code == 0 and "adam=fp32-remainders" in out
    code, out, err = run_phaze(capsys, *args, "--optimizer-state", "fp16")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "fp16" in err
    code, out, _ = run_phaze(capsys, "plan", "--help")
    assert code == 0 and "--optimizer-state" in out


def test_validation_runs_carry_the_state_their_configuration_sets():
    """The NeMo 1.x runs on Apex's DistributedFusedAdam: BF16 models without FP8 parameters keep the fp32
    remainders (Nemotron-4 15B, Llama 3.1 BF16), FP8 parameters keep the fp32 copy (GPT-3 175B's yaml sets
    fp8_params, Llama 3.1 FP8), and NeMo 24.07's Nemotron-340B, whose config sets optim.dtype: bf16, the bf16 copy.
    Every other run (Megatron-LM, SC21, MT-NLG, the rest of NeMo 24.07) keeps the default. Each non-default value
    cites its configuration."""
    got = {}
    for f in ("published_runs.json", "held_out_runs.json", "held_out2_runs.json", "held_out3_runs.json"):
        d = json.loads(resources.files("phaze.validation").joinpath("data", f).read_text())
        cases = {c.name: c for c in runs_from_mapping(d, f).time}
        for r in d["runs"]:
            state = r.get("optimizer_state", "fp32")
            assert cases[r["case"]].optimizer_state == state
            if state != "fp32":
                assert any(f"optimizer_state {state}" in a or f"optimizer state {state}" in a
                           for a in r["assumptions"]), r["case"]
            got[r["case"]] = state
    assert sum(v == "fp32-remainders" for v in got.values()) == 8 + 17
    assert [k for k, v in got.items() if v == "bf16-master"] == ["NeMo 24.07 Nemotron-340B FP8 (128 GPUs)"]
    assert all(v == "fp32-remainders" for k, v in got.items() if "Nemotron-4 15B" in k or "BF16" in k and "dgxc" in k)
    assert all(v == "fp32" for k, v in got.items() if k.startswith(("SC21", "Megatron-LM", "MT-NLG", "NeMo GPT-3")))


def test_nemotron_340b_fits_with_its_configured_state():
    """The held-out-2 Nemotron-340B run trained on 80 GB H100s; with the fp32 state it was charged 73.1 GiB (over
    the 71.5 usable), with its configuration's bf16 state and copy it fits."""
    d = json.loads(resources.files("phaze.validation").joinpath("data", "held_out2_runs.json").read_text())
    from phaze.validation.validate import validate
    from phaze.validation.cases import Cases
    case = next(c for c in runs_from_mapping(d, "held_out2_runs.json").time if "340B" in c.name)
    rep = validate(Cases("340B", (case,), ()))
    assert rep.time[0].fits


def test_the_tied_copy_on_one_stage_is_subtracted_at_the_sharded_state():
    """p = 1 with tied embeddings: the stage stores the embedding once, so its memory is the sum of its
    layers' static bytes less the head's copy -- weights, gradients and, with ZeRO-1, the 1/d of the state
    the stage holds (it once subtracted the whole 12 B per parameter, under-counting p = 1 ZeRO-1 plans)."""
    from phaze.workload.memory import layer_memory as lm
    s = TrainSetting(1, 1024, runtime=PAPER_RUNTIME.with_(attention="flash", precision="bf16"))
    E, B, Hd = lm(GPT2, s, "embedding"), lm(GPT2, s, "block"), lm(GPT2, s, "head")
    assert Hd.tied_params == 50257 * H and E.params == 50257 * H + 1024 * H
    for zero, d in ((True, 8), (False, 8), (True, 1)):
        ev = _eval("fp32", pp=1, dp=d, zero=zero)
        st = ev.stages[0]
        shard = d if zero else 1
        static = sum(n * (x.weight_bytes + x.grad_bytes + x.optimizer_bytes / shard)
                     for n, x in ((1, E), (48, B), (1, Hd)))
        copy = Hd.tied_params * (2 + 4 + 12 / shard)
        assert st.weight_bytes + st.grad_bytes + st.optimizer_bytes == pytest.approx(static, rel=1e-12)
        assert st.memory_bytes - st.activation_bytes * st.in_flight_microbatches - st.working_bytes == \
            pytest.approx(static - copy, rel=1e-12)
