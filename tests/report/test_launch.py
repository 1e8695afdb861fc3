"""--emit: every Megatron flag, NeMo recipe attribute and TorchTitan key phaze emits is one the framework's own
source defines (tests/fixtures/*.txt, written by scripts/launch_fixtures.py from Megatron-LM core_v0.15.3,
NeMo v2.4.0 and TorchTitan v0.2.2), for the best plans of the validation set's models and for plans that use
every branch (uneven stages, FP8, MoE, per-stage recompute)."""
from __future__ import annotations

import ast
import json
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from phaze import api
from phaze.placement import Plan, Recompute
from phaze.report.launch import launch_settings, launch_text
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import Runtime

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _names(name: str) -> set[str]:
    return {ln.strip() for ln in (FIX / name).read_text().splitlines() if ln.strip() and not ln.startswith("#")}


MEGATRON, NEMO, TITAN = (_names("megatron_core_0_15_arguments.txt"), _names("nemo2_recipe_attributes.txt"),
                         _names("torchtitan_job_config_keys.txt"))


def test_fixtures_hold_the_names_they_should():
    # a fixture of the wrong file would miss these (and hold names that file never had)
    assert {"--tensor-model-parallel-size", "--pipeline-model-parallel-layout", "--recompute-modules",
            "--fp8-recipe", "--attention-backend"} <= MEGATRON
    assert "--virtual-pipeline-model-parallel-size" not in MEGATRON  # not a 0.15 flag
    assert {"trainer.strategy.tensor_model_parallel_size", "data.global_batch_size",
            "model.config.recompute_granularity"} <= NEMO
    assert {"parallelism.tensor_parallel_degree", "training.local_batch_size",
            "activation_checkpoint.mode"} <= TITAN


def check_megatron(s: dict) -> None:
    flags = [a for a in s["args"] if a.startswith("--")]
    assert flags and set(flags) <= MEGATRON, set(flags) - MEGATRON
    assert len(flags) == len(set(flags))


def check_nemo(s: dict) -> None:
    for line in s["args"]:
        node = ast.parse(line).body[0]
        assert isinstance(node, ast.Assign), line
        target, parts = node.targets[0], []
        while isinstance(target, ast.Attribute):
            parts.append(target.attr)
            target = target.value
        assert isinstance(target, ast.Name) and target.id == "recipe", line
        assert ".".join(reversed(parts)) in NEMO, line


def check_torchtitan(s: dict) -> dict:
    doc = tomllib.loads(s["toml"])
    keys = set()

    def walk(d, prefix):
        for k, v in d.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                keys.add(prefix + k)
    walk(doc, "")
    assert keys <= TITAN, keys - TITAN
    return doc


CHECK = {"megatron": check_megatron, "nemo": check_nemo, "torchtitan": check_torchtitan}


def _runs():
    data = json.loads(resources.files("phaze.validation.data").joinpath("published_runs.json").read_text())
    seen, out = set(), []
    for r in data["runs"]:
        if r["model"]["name"] not in seen:
            seen.add(r["model"]["name"])
            out.append(r)
    return out


def _best(r):
    rt = Runtime(attention=r["attention"], precision=r["precision"], dp_overlap=r["overlap_grad_reduce"],
                 tp_overlap=bool(r.get("tp_comm_overlap")))
    m = ModelConfig(**r["model"])
    return m, api.plan(m, r["accelerator"], r["devices"], r["global_batch"], r["cluster"], runtime=rt, top_k=1).best


def _check_all(m, best):
    for fw, check in CHECK.items():
        s = api.launch_settings(best, fw, m)
        check(s)
        assert launch_text(s, fw)


@pytest.mark.slow
@pytest.mark.parametrize("run", _runs(), ids=lambda r: r["model"]["name"])
def test_validation_models_best_plans_emit_framework_names(run):
    _check_all(*_best(run))


def test_one_validation_model_best_plan_emits_framework_names():
    run = next(r for r in _runs() if r["precision"] == "bf16")
    m, best = _best(run)
    _check_all(m, best)
    s = api.launch_settings(best, "megatron", m)
    a = s["args"]
    p = best.plan
    assert a[a.index("--tensor-model-parallel-size") + 1] == str(p.tp)
    assert a[a.index("--global-batch-size") + 1] == str(run["global_batch"])
    assert a[a.index("--seq-length") + 1] == str(m.seq_len)


RT = Runtime(tp_overlap=False, dp_overlap=False)  # the overlaps off: each test turns on what it checks


def _plan(**kw):
    base = dict(stages=((0, 9), (9, 17), (17, 25), (25, 34)), tp=2, dp=2, microbatch_size=1, num_microbatches=8,
                runtime=RT)
    base.update(kw)
    return Plan(**base)


def test_even_split_interleaved_megatron_and_titan():
    # 32 blocks over 4 virtual stages on p=2 (v=2): 8 each
    p = _plan(interleave=2, sequence_parallel=True, zero=True, runtime=RT.with_(dp_overlap=True))
    s = launch_settings(p, "megatron", 8192)
    a = s["args"]
    assert a[a.index("--num-layers-per-virtual-pipeline-stage") + 1] == "8"
    assert a[a.index("--global-batch-size") + 1] == "16"  # 1 x 8 x 2
    assert {"--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce",
            "--overlap-param-gather", "--bf16"} <= set(a)
    assert "--pipeline-model-parallel-layout" not in a and not s["warnings"]
    check_megatron(s)
    t = check_torchtitan(launch_settings(p, "torchtitan", 8192))
    par = t["parallelism"]
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"], par["data_parallel_shard_degree"]) == (2, 2, 2)
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    fq = par["module_fqns_per_model_part"]
    assert fq[0][:2] == ["tok_embeddings", "layers.0"] and fq[-1][-2:] == ["norm", "output"]
    assert sum(len([x for x in f if x.startswith("layers.")]) for f in fq) == 32
    assert t["training"] == {"local_batch_size": 8, "global_batch_size": 16, "seq_len": 8192,
                             "mixed_precision_param": "bfloat16"}


def test_uneven_first_last_and_layout():
    # v=1, blocks 7/8/8/9: middle equal -> first/last flags
    p = _plan(stages=((0, 8), (8, 16), (16, 24), (24, 34)))
    a = launch_settings(p, "megatron", 4096)["args"]
    assert a[a.index("--decoder-first-pipeline-num-layers") + 1] == "7"
    assert a[a.index("--decoder-last-pipeline-num-layers") + 1] == "9"
    # 7/9/8/8: middle uneven -> an exact layout
    p = _plan(stages=((0, 8), (8, 17), (17, 25), (25, 34)))
    s = launch_settings(p, "megatron", 4096)
    a = s["args"]
    assert a[a.index("--pipeline-model-parallel-layout") + 1] == "E" + "t" * 7 + "|" + "t" * 9 + "|" + "t" * 8 + "|" + "t" * 8 + "L"
    check_megatron(s)
    n = launch_settings(p, "nemo", 4096)
    check_nemo(n)
    assert "recipe.trainer.strategy.pipeline_model_parallel_layout = 'Ettttttt|ttttttttt|tttttttt|ttttttttL'" in n["args"]


def test_per_stage_recompute_is_a_warning_and_the_strongest_mode():
    p = _plan(stages=((0, 18), (18, 34)), tp=2, dp=4, num_microbatches=4, recompute=Recompute.parse("full,none", stages=2))
    for fw in CHECK:
        s = launch_settings(p, fw, 4096)
        assert any("full/none" in w for w in s["warnings"]), fw
        CHECK[fw](s)
    a = launch_settings(p, "megatron", 4096)["args"]
    assert a[a.index("--recompute-granularity") + 1] == "full" and a[a.index("--recompute-method") + 1] == "uniform"
    assert "# WARNING: per-stage recompute" in launch_text(launch_settings(p, "megatron", 4096), "megatron")
    t = tomllib.loads(launch_settings(p, "torchtitan", 4096)["toml"])
    assert t["activation_checkpoint"]["mode"] == "full"


def test_fp8_and_moe():
    rt = RT.with_(precision="fp8", moe_routing="balanced", moe_dispatcher="deepep", moe_a2a_overlap=True)
    p = _plan(runtime=rt, ep=2, etp=1, cp=2, sequence_parallel=True)
    s = launch_settings(p, "megatron", 4096, moe=True)
    a = s["args"]
    check_megatron(s)
    assert a[a.index("--fp8-format") + 1] == "hybrid" and "--bf16" in a
    assert a[a.index("--expert-model-parallel-size") + 1] == "2"
    assert a[a.index("--expert-tensor-parallel-size") + 1] == "1"
    assert a[a.index("--context-parallel-size") + 1] == "2"
    assert a[a.index("--moe-token-dispatcher-type") + 1] == "flex" and "--moe-enable-deepep" in a
    assert "--moe-router-force-load-balancing" in a and "--overlap-moe-expert-parallel-comm" in a
    check_nemo(launch_settings(p, "nemo", 4096, moe=True))
    t = launch_settings(p, "torchtitan", 4096, moe=True)
    doc = check_torchtitan(t)
    assert doc["debug"]["moe_force_load_balance"] is True and doc["model"]["converters"] == ["quantize.linear.float8"]
    assert any("torchao" in w for w in t["warnings"]) and any("all-to-alls" in w for w in t["warnings"])
    # a dense plan emits no expert flags
    assert "--expert-model-parallel-size" not in launch_settings(_plan(), "megatron", 4096)["args"]


def test_selective_recompute_modules():
    p = _plan(recompute=Recompute.uniform("selective"), runtime=RT.with_(recompute_modules=("core_attn", "mlp")))
    a = launch_settings(p, "megatron", 4096)["args"]
    i = a.index("--recompute-modules")
    assert a[i + 1:i + 3] == ["core_attn", "mlp"]
