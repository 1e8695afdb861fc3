"""build_problem and the vectorized layer_time_bounds on real layer graphs."""
import numpy as np
import pytest

from phaze.errors import ConfigError
from phaze.hardware.accelerator import ArchArrays
from phaze.hardware.presets import get_accelerator, get_cluster
from phaze.hardware.space import PAPER_SPACE, enumerate_space
from phaze.schedule import build_problem, layer_time_bounds, lower_bound_s, solve, validate
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.zoo import get_model


@pytest.fixture(scope="module")
def chips():
    cands = enumerate_space(PAPER_SPACE)
    idx = np.random.default_rng(1).choice(len(cands), size=6, replace=False)
    chip = enumerate_space()  # the default space: chips with the on-chip hierarchy
    jdx = np.random.default_rng(2).choice(len(chip), size=4, replace=False)
    return ([get_accelerator("tpuv4-like")] + [cands.arch.accelerator(int(i)) for i in idx]
            + [chip.arch.accelerator(int(j)) for j in jdx])


@pytest.mark.parametrize("layer,direction,tp", [("block", "fwd", 1), ("block", "fwd", 8), ("block", "bwd", 1),
                                                ("embedding", "fwd", 1), ("head", "bwd", 8)])
def test_vector_bounds_bracket_the_schedule(chips, layer, direction, tp):
    model = get_model("megatron-bert") if tp > 1 else get_model("bert-large")
    graph = layer_graph(model, TrainSetting(microbatch_size=1, seq_len=512, tp=tp), layer, direction)
    tier = get_cluster("dgx-a100").tier_for_group(tp) if tp > 1 else None
    lower, upper = layer_time_bounds(graph, ArchArrays.from_accelerators(chips), tier)
    assert lower.shape == upper.shape == (len(chips),)
    for i, chip in enumerate(chips):
        problem = build_problem(graph, chip, tier)
        s = solve(problem, time_limit_s=2.0)
        validate(problem, s)
        assert lower[i] <= lower_bound_s(problem) * (1 + 1e-9)
        assert lower[i] <= s.lower_bound_s * (1 + 1e-9)
        assert s.makespan_s <= upper[i] * (1 + 1e-9)
        assert s.ops[0].name == graph.ops[0].name


def test_collectives_need_a_tier():
    graph = layer_graph(get_model("megatron-bert"), TrainSetting(microbatch_size=1, seq_len=512, tp=8), "block", "fwd")
    with pytest.raises(ConfigError, match="tier"):
        build_problem(graph, get_accelerator("tpuv4-like"))


def test_op_costs_are_shared_by_chips_that_differ_only_in_name_and_hbm_capacity(chips):
    """``build_problem``'s op memo keys a chip without its name and HBM capacity (no op cost reads them): such
    chips get the problem a fresh build gives, from the memo; a chip with another HBM bandwidth gets its own."""
    from dataclasses import replace

    import phaze.schedule.build as b

    chip = chips[-1]  # a chip with the on-chip hierarchy (shared bandwidth)
    graph = layer_graph(get_model("gpt2-xl"), TrainSetting(microbatch_size=2, seq_len=1024), "block", "bwd")
    b._OP_MEMO.clear()
    first = build_problem(graph, chip)
    n = len(b._OP_MEMO)
    bigger = replace(chip, name="bigger", hbm_bytes=chip.hbm_bytes * 2)
    assert build_problem(graph, bigger) == first and len(b._OP_MEMO) == n  # read from the memo
    b._OP_MEMO.clear()
    assert build_problem(graph, bigger) == first  # costed afresh: the same problem
    faster = replace(chip, hbm_bandwidth_Bps=chip.hbm_bandwidth_Bps * 2)
    assert build_problem(graph, faster) != first and len(b._OP_MEMO) == 2 * n


def test_op_rates_at_every_core_count_at_once_equal_one_count_at_a_time():
    """``build_problem`` costs an op at every core count at once (``mode_rates``: a few vectorized cost calls):
    each count's (duration, GLB rate, HBM rate) equals ``op_rates`` costing it alone, to the bit, for GEMMs
    (including those whose rates take the capped re-costing) and vector ops."""
    import phaze.schedule.build as b
    from phaze.cost import activations_resident, core_modes
    from phaze.workload.ops import op_resource

    space = enumerate_space()
    idx = np.random.default_rng(3).choice(len(space), size=4, replace=False)
    model = get_model("gpt2-xl")
    checked, kinds = 0, set()
    for i in idx:
        acc = space.accelerator(int(i))
        arch = acc.as_arrays()
        for direction in ("fwd", "bwd"):
            graph = layer_graph(model, TrainSetting(microbatch_size=2, seq_len=1024, recompute="full"), "block",
                                direction)
            resident = bool(np.asarray(activations_resident(graph, arch)).reshape(-1)[0])
            for op in graph.ops:
                kind = op_resource(op)
                if kind not in ("tc", "vc"):
                    continue
                modes = core_modes(acc.num_tc if kind == "tc" else acc.num_vc)
                alone = {k: b.op_rates(op, acc, arch, kind, k, resident) for k in modes}
                assert b.mode_rates(op, acc, arch, kind, modes, resident) == alone
                checked += len(modes)
                kinds.add(kind)
    assert checked > 100 and kinds == {"tc", "vc"}
