"""The MoE edges of the CLI and API (issue 33): --ep/--etp into PlanShape / PlanSpace and the plan, the
--moe-* runtime flags into Runtime at its defaults, --seq on every command that takes a model, and show-model's
total and active parameters."""
import json

import pytest

from phaze import api
from phaze.cli import build_parser

MOE_YAML = """name: cli-moe
num_layers: 3
hidden: 256
heads: 8
kv_heads: 4
ffn: 1024
vocab: 1000
seq_len: 512
norm: rmsnorm
mlp: swiglu
position: rotary
bias: false
dropout: false
tied_embeddings: false
num_experts: 8
experts_per_token: 2
moe_ffn: 256
shared_experts: 1
first_dense_layers: 1
"""


@pytest.fixture
def moe_file(tmp_path):
    p = tmp_path / "moe.yaml"
    p.write_text(MOE_YAML)
    return str(p)


def _json(cli, *argv):
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_evaluate_takes_ep_etp_and_the_moe_runtime(cli, moe_file):
    d = _json(cli, "evaluate", "--model", moe_file, "--accelerator", "h100-80g", "--devices", "8", "--global-batch",
              "16", "--tp", "2", "--sequence-parallel", "--pp", "1", "--dp", "4", "--mbs", "1", "--ep", "4", "--etp",
              "2", "--moe-routing", "capacity:1.5", "--moe-dispatcher", "deepep", "--moe-a2a-overlap")
    assert (d["ep"], d["etp"], d["tp"], d["dp"]) == (4, 2, 2, 4)
    assert (d["moe_routing"], d["moe_dispatcher"], d["moe_a2a_overlap"]) == ("capacity:1.5", "deepep", True)


def test_evaluate_ep_changes_the_time(cli, moe_file):
    base = ("evaluate", "--model", moe_file, "--accelerator", "h100-80g", "--devices", "8", "--global-batch", "16",
            "--tp", "1", "--pp", "1", "--dp", "8", "--mbs", "1")
    one, four = _json(cli, *base), _json(cli, *base, "--ep", "4")
    assert (one["ep"], four["ep"]) == (1, 4)
    assert one["iteration_time_s"] != four["iteration_time_s"]
    assert four["memory_bytes_per_device"] < one["memory_bytes_per_device"]  # a quarter of the experts


def test_plan_searches_the_ep_and_etp_given(cli, moe_file):
    d = _json(cli, "plan", "--model", moe_file, "--accelerator", "h100-80g", "--devices", "8", "--global-batch", "16",
              "--ep", "2", "--etp", "2", "--mbs", "1,2", "--recompute", "none", "--top", "3")
    plans = [d["best"]] + d["alternatives"]
    assert {(p["ep"], p["etp"]) for p in plans} == {(2, 2)}


def test_the_flags_defaults_are_the_runtimes_and_the_plan_spaces():
    rt, space = api.Runtime(), api.PlanSpace()
    parser = build_parser()
    common = ["--model", "x", "--accelerator", "h100-80g", "--devices", "8", "--global-batch", "8"]
    for argv in (["plan", *common], ["evaluate", *common, "--tp", "1", "--pp", "1", "--dp", "1", "--mbs", "1"]):
        a = parser.parse_args(argv)
        assert (a.moe_dispatcher, a.moe_routing, a.moe_a2a_overlap) == (rt.moe_dispatcher, rt.moe_routing,
                                                                        rt.moe_a2a_overlap)
    a = parser.parse_args(["plan", *common])
    assert (a.ep, a.etp) == (None, None) and (space.ep_values, space.etp_values) == (None, None)
    from phaze.cli.commands import _plan_space
    assert _plan_space(a) == space
    a = parser.parse_args(["evaluate", *common, "--tp", "1", "--pp", "1", "--dp", "1", "--mbs", "1"])
    assert (a.ep, a.etp) == (api.PlanShape(1, 1, 1, 1).ep, api.PlanShape(1, 1, 1, 1).etp) == (1, 1)


def test_every_command_that_takes_a_model_takes_seq():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    for name, p in sub.items():
        dests = {a.dest for a in p._actions}
        if dests & {"model", "models"} and name != "results":  # results --model names a stored model
            assert "seq" in dests, name
    for name in ("search", "reproduce"):
        assert "replaces each" in " ".join(sub[name].format_help().split()), name


def test_search_seq_replaces_the_models_seq_len():
    spec = api.search_spec(["llama2-7b"], seq_len=1024)
    assert spec.models[0].seq_len == 1024
    assert api.search_spec(["llama2-7b"]).models[0].seq_len == api.resolve_model("llama2-7b").seq_len


def test_reproduce_seq_reaches_the_run(monkeypatch):
    import phaze.search.reproduce as rep

    seen = {}

    class Stop(Exception):
        pass

    def fake(models, *a, **kw):
        seen["seq"] = [m.seq_len for m in models]
        raise Stop

    monkeypatch.setattr(rep, "run_reproduce", fake)
    with pytest.raises(Stop):
        api.reproduce(["gpt2-xl", "llama2-7b"], seq_len=512)
    assert seen["seq"] == [512, 512]


def test_show_model_prints_total_and_active_parameters(cli, moe_file):
    code, out, err = cli("show-model", moe_file)
    assert code == 0, err
    for piece in ("parameters (active per token)", "experts", "top-k", "expert FFN", "shared experts",
                  "dense blocks", "dense_block"):
        assert piece in out, piece
    d = _json(cli, "show-model", moe_file)
    m = api.resolve_model(moe_file)
    from phaze.workload.memory import active_param_count, param_count
    assert (d["params"], d["active_params"]) == (param_count(m), active_param_count(m))
    assert d["active_params"] < d["params"]
    assert [layer["layer"] for layer in d["layers"]] == ["embedding", "dense_block", "block", "head"]
    assert [layer["count"] for layer in d["layers"]] == [1, 1, 2, 1]


def test_show_model_of_a_dense_model_has_no_moe_table(cli):
    code, out, err = cli("show-model", "gpt2-xl")
    assert code == 0 and "active per token" not in out
    d = _json(cli, "show-model", "gpt2-xl")
    assert d["active_params"] == d["params"] and d["moe"] == []


def test_show_model_prints_the_mla_ranks(cli, tmp_path):
    from importlib import resources
    runs = json.loads(resources.files("phaze.validation.data").joinpath("moe_runs.json").read_text())["runs"]
    cfg = next(r["hf_config"] for r in runs if r["hf_config"]["model_type"] == "deepseek_v3")
    p = tmp_path / "dsv3.json"
    p.write_text(json.dumps(cfg))
    code, out, err = cli("show-model", f"hf:{p}", "--seq", "1024")
    assert code == 0, err
    assert "671,026,404,352" in out and "MLA kv LoRA rank" in out and "512" in out


def test_check_torch_refuses_an_moe_model_in_one_line(cli, moe_file):
    pytest.importorskip("transformers")
    code, out, err = cli("show-model", moe_file, "--check-torch")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Mixture-of-Experts" in err
