"""Issue 34 item 5: a chip's network (phaze.hardware.chip_network): hand-computed PHY area, power and price of one
choice, its cluster, and that a faster network never makes a plan slower."""
import pytest

from phaze.hardware.chip_network import (ChipNetwork, at_least_as_fast, network_cluster, network_power_w,
                                         network_usd, phy_area_mm2, undominated)
from phaze.hardware.presets import get_accelerator
from phaze.placement import Plan, evaluate
from tinysearch import TINY


def test_one_choice_by_hand():
    n = ChipNetwork(64, 200e9, "switch", 25e9)
    # 0.22 mm^2 per 113 Gb/s lane at 5 nm, x (22/5)^2 = 19.36: 4.2592 mm^2 per 14.125e9 B/s; 225e9 B/s in all
    assert phy_area_mm2(n) == pytest.approx(225e9 / 14.125e9 * 0.22 * 19.36, rel=1e-12)
    assert phy_area_mm2(n) == pytest.approx(67.8457, rel=1e-5)
    assert network_power_w(n) == pytest.approx(225e9 * 8 * 1.9e-12, rel=1e-12)  # 3.42 W
    # switch port 36,000 / 64 per 50e9 B/s; scale-out (48 x 36,000 + 2,621,440) / 1,024 per 50e9 B/s
    assert network_usd(n) == pytest.approx(200 * 11.25 + 25 * 4247.5 / 50, rel=1e-12)
    t = ChipNetwork(64, 200e9, "torus", 25e9)
    assert network_usd(t) == pytest.approx(25 * 4247.5 / 50, rel=1e-12)
    c = network_cluster(t, 1024)
    assert [x.devices_per_group for x in c.tiers] == [64, 1024]
    assert c.tiers[0].bandwidth_Bps == pytest.approx(200e9 / 3)  # one of the 3-D torus's rings
    assert network_cluster(n, 1024).tiers[0].bandwidth_Bps == 200e9


def test_dominance_keeps_what_can_matter():
    nets = [ChipNetwork(s, 100e9, topo, 25e9) for s in (4, 8, 64) for topo in ("torus", "switch")]
    assert undominated(nets, priced=False) == (ChipNetwork(64, 100e9, "switch", 25e9),)
    kept = undominated(nets, priced=True)
    assert ChipNetwork(8, 100e9, "switch", 25e9) not in kept and ChipNetwork(4, 100e9, "torus", 25e9) in kept


# (pp, tp, dp, microbatch, microbatches) on 16 devices, global batch 32
@pytest.mark.parametrize("shape", [(2, 1, 8, 1, 4), (1, 2, 8, 2, 2), (4, 2, 2, 1, 16)])
def test_a_faster_network_never_makes_a_plan_slower(shape):
    acc = get_accelerator("tpuv4-like")
    nets = [ChipNetwork(s, up, topo, out) for s in (4, 8) for up in (50e9, 200e9) for topo in ("torus", "switch")
            for out in (12.5e9, 50e9)]
    from phaze.workload.runtime import PAPER_RUNTIME
    plan = Plan.balanced(TINY.num_layers, *shape, runtime=PAPER_RUNTIME)
    t = {n: evaluate(plan, TINY, acc, network_cluster(n, 16), 32).iteration_time_s for n in nets}
    pairs = [(a, b) for a in nets for b in nets if at_least_as_fast(b, a)]
    assert pairs
    for a, b in pairs:
        assert t[b] <= t[a] * (1 + 1e-12), (a.name, b.name)
    # and strictly faster somewhere: the network matters on this case
    assert max(t.values()) > min(t.values())


def test_the_chosen_network_fits_the_caps(tmp_path):
    from phaze.search import SearchSpec, run_search
    from phaze.search.objective import search_candidates
    from tinysearch import SPACE

    spec = SearchSpec(models=(TINY,), space=SPACE, space_name="tiny", hbm_gib=(1, 2), microbatch_sizes=(1, 2),
                      devices=16, global_batch=32, tdp_w=60.0)
    res = run_search(spec, str(tmp_path / "s.db"), workers=1, quiet=True)
    cands = search_candidates(spec.space, spec.tdp_w, spec.objective)
    net = cands.network(res.best.chip)
    assert net.to_dict() == res.network
    chip_area = res.best.area_mm2 - phy_area_mm2(net)
    assert res.best.area_mm2 <= cands.budget_mm2 * (1 + 1e-12) and chip_area > 0
    assert cands.peak_power_w()[res.best.chip] <= 60.0
