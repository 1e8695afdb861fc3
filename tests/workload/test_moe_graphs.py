"""Graph invariants of an MoE block: the forward GEMM FLOPs by hand, the all-to-alls in the backward, expert
FLOPs per device independent of ep and etp under balanced routing, and dropless routing never cheaper."""
import pytest

from phaze.workload.config import ModelConfig
from phaze.workload.graphs import layer_graph
from phaze.workload.memory import layer_memory
from phaze.workload.ops import Collective, Gemm
from phaze.workload.runtime import Runtime, TrainSetting

M = ModelConfig(name="small-moe", num_layers=4, hidden=256, heads=8, kv_heads=4, ffn=1024, vocab=1000, seq_len=512,
                norm="rmsnorm", mlp="swiglu", position="rotary", bias=False, dropout=False, tied_embeddings=False,
                num_experts=16, experts_per_token=2, moe_ffn=256, shared_experts=1, first_dense_layers=1)
BALANCED = Runtime(attention="standard", moe_routing="balanced")
DROPLESS = Runtime(attention="standard", moe_routing="dropless")


def _setting(rt=BALANCED, **kw) -> TrainSetting:
    return TrainSetting(microbatch_size=2, seq_len=512, runtime=rt, **kw)


def _gemm_flops(graph, prefix: str = "") -> int:
    return sum(o.flops for o in graph.ops if isinstance(o, Gemm) and o.name.startswith(prefix))


def _collectives(graph, kind: str) -> list:
    return [o for o in graph.ops if isinstance(o, Collective) and o.kind == kind]


def test_forward_gemm_flops_of_an_moe_block_by_hand():
    b, s, h, a, g, d = 2, 512, 256, 8, 4, 32
    E, k, fm, fs = 16, 2, 256, 256
    attention = 2 * b * s * h * (a + 2 * g) * d + 4 * b * s * s * a * d + 2 * b * s * a * d * h
    router = 2 * b * s * h * E
    experts = k * 2 * b * s * (h * 2 * fm + fm * h)  # each token through top-k gated experts
    shared = 2 * b * s * (h * 2 * fs + fs * h)
    fwd = layer_graph(M, _setting(), "block", "fwd")
    assert fwd.gemm_flops == attention + router + experts + shared
    assert _gemm_flops(fwd, "expert_") == experts and _gemm_flops(fwd, "router") == router
    dense = layer_graph(M, _setting(), "dense_block", "fwd")
    assert dense.gemm_flops == attention + 2 * b * s * (h * 2 * 1024 + 1024 * h)


@pytest.mark.parametrize("ep", [1, 2, 4, 16])
def test_backward_has_the_all_to_all_twice_when_ep_above_1(ep):
    s = _setting(ep=ep)
    fwd, bwd = layer_graph(M, s, "block", "fwd"), layer_graph(M, s, "block", "bwd")
    want = 2 if ep > 1 else 0  # dispatch and combine, each once per pass
    assert len(_collectives(fwd, "all_to_all")) == want
    assert len(_collectives(bwd, "all_to_all")) == want
    assert all(c.group_size == ep for c in _collectives(bwd, "all_to_all"))


def test_full_recompute_replays_the_forward_all_to_alls():
    s = _setting(ep=4, recompute="full")
    assert len(_collectives(layer_graph(M, s, "block", "bwd"), "all_to_all")) == 4


@pytest.mark.parametrize("tp", [1, 2])
def test_expert_flops_per_device_do_not_change_with_ep_and_etp(tp):
    base = None
    for ep in (1, 2, 4, 8, 16):
        for etp in (1, 2, 4):
            s = _setting(tp=tp, sequence_parallel=tp > 1, ep=ep, etp=etp)
            for direction in ("fwd", "bwd"):
                flops = _gemm_flops(layer_graph(M, s, "block", direction), "expert_")
                base = base or {}
                assert flops == base.setdefault(direction, flops), (ep, etp, direction)


def test_etp_adds_the_gather_and_scatter():
    s = _setting(ep=2, etp=2)
    fwd = layer_graph(M, s, "block", "fwd")
    assert [c.name for c in _collectives(fwd, "all_gather")] == ["moe_dispatch.all_gather"]
    assert [c.name for c in _collectives(fwd, "reduce_scatter")] == ["moe_combine.reduce_scatter"]


@pytest.mark.parametrize("ep", [2, 4, 16])
def test_dropless_at_ep_above_1_costs_at_least_balanced(ep):
    bal, drop = _setting(BALANCED, ep=ep), _setting(DROPLESS, ep=ep)
    for direction in ("fwd", "bwd"):
        gb, gd = layer_graph(M, bal, "block", direction), layer_graph(M, drop, "block", direction)
        assert _gemm_flops(gd, "expert_") >= _gemm_flops(gb, "expert_")
        assert sum(c.bytes for c in _collectives(gd, "all_to_all")) >= sum(c.bytes for c in _collectives(gb, "all_to_all"))
    assert layer_memory(M, drop, "block").activation_bytes >= layer_memory(M, bal, "block").activation_bytes


def test_dropless_at_ep_1_is_balanced_and_capacity_caps_dropless():
    """One EP rank holds every expert: no rank is busier than the mean. A capacity factor caps the busiest
    rank's load (never above dropless, never below balanced)."""
    flops = lambda rt, ep: _gemm_flops(layer_graph(M, _setting(rt, ep=ep), "block", "fwd"), "expert_")  # noqa: E731
    assert flops(DROPLESS, 1) == flops(BALANCED, 1)
    cap = Runtime(attention="standard", moe_routing="capacity:1.0")
    assert flops(BALANCED, 16) <= flops(cap, 16) <= flops(DROPLESS, 16)
