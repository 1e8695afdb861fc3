"""The op-cost memo shared by the settings of one (microbatch, t) changes no bound: group_bounds equals
setting_bounds of each setting alone, bit for bit, on chips of the default space (with and without GLB
residency of the vector ops: the small model's backward block keeps its vector operands in the GLB on 46%
of these chips without recompute and on 34% with it, so the same op must not share a cost across the two)."""
import numpy as np
import pytest

from phaze.hardware.presets import get_cluster
from phaze.hardware.space import DesignSpace, enumerate_space
from phaze.search.bounds import group_bounds, model_bounds, setting_bounds
from phaze.search.reproduce import paper_spec
from phaze.workload.config import ModelConfig
from phaze.workload.zoo import get_model

SMALL = ModelConfig(name="small", num_layers=4, hidden=512, heads=8, ffn=2048, vocab=8000, seq_len=256, max_tp=2)


@pytest.mark.parametrize("model", [get_model("bert-large"), SMALL], ids=lambda m: m.name)
def test_shared_op_memo_gives_the_same_bounds(model):
    spec = paper_spec(model)
    cands = enumerate_space(DesignSpace())
    arch = cands.arch.select(np.arange(0, len(cands), 199))  # ~300 chips across the space
    cluster = get_cluster(spec.cluster, spec.devices)
    group = tuple(s for s in spec.settings(model) if s.microbatch_size == 1 and s.tp == 1)
    assert {s.recompute for s in group} == {"none", "full"}
    shared = group_bounds(model, spec, group, arch, cluster)
    for s, got in zip(group, shared):
        alone = setting_bounds(model, spec, s, arch, cluster)
        for a, b in ((got[0], alone[0]), (got[1], alone[1]), (got[3], alone[3])):
            assert np.array_equal(a, b)
        assert got[2] == alone[2]
    # model_bounds keeps the settings' order whatever the grouping
    mb = model_bounds(model, spec, arch, cluster)
    assert mb.settings == spec.settings(model)
    k = spec.settings(model).index(group[1])
    assert np.array_equal(mb.lower_s[k], shared[1][0]) and np.array_equal(mb.setting_ub[k], shared[1][3])


def test_hbm_sizes_share_rows_with_the_same_bound():
    """setting_bounds takes each HBM size's throughput bound as a running minimum over rows sorted by the
    memory they need; it equals iteration_lower_bound_s over that size's own rows, bit for bit."""
    from phaze.search.bounds import SLOTS, _bound_rows, iteration_lower_bound_s, min_bottleneck_s
    from phaze.units import GiB

    model = get_model("gpt2-xl")
    spec = paper_spec(model, hbm_gib=(8, 16, 32, 80))
    cands = enumerate_space(DesignSpace())
    arch = cands.arch.select(np.arange(0, len(cands), 211))
    cluster = get_cluster(spec.cluster, spec.devices)
    hbm_Bps = float(arch.hbm_bandwidth_Bps[0] * arch.memory_efficiency[0])
    for s in spec.settings(model)[:4]:
        lower, _, c, tput = setting_bounds(model, spec, s, arch, cluster)
        assert len(SLOTS) == lower.shape[0]
        e, b, h = lower[0] + lower[1], lower[2] + lower[3], lower[4] + lower[5]
        S = e + model.num_layers * b + h
        sizes = []
        for hh, gib in enumerate(spec.hbm_gib):
            rows = _bound_rows(c, model, spec, cluster, gib * GiB, hbm_Bps)
            sizes.append(len(rows))
            if not rows:
                assert not tput[hh].any()
                continue
            U = {r.p: min_bottleneck_s(e, b, h, model.num_layers, r.p) for r in rows}
            assert np.array_equal(tput[hh], spec.global_batch / iteration_lower_bound_s(rows, S, U))
        assert sizes == sorted(sizes) and sizes[0] < sizes[-1]  # nested, and the sizes differ
