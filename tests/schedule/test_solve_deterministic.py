"""``solve`` ends on work budgets, not the clock: a layer whose proof the budgets do not reach gets the same
schedule on a machine that runs it slower (simulated here by a clock running 4x fast, within the 10x safety
net). Found by CI: a 27-op MoE block backward ran CP-SAT to the wall clock, so a loaded machine stored another
throughput."""
import dataclasses
import time

from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import NetworkTier
from phaze.placement.layer_costs import setting_for
from phaze.schedule import bnb, build_problem, solve, solver
from phaze.search.spec import search_runtime
from phaze.workload.graphs import layer_graph
from tinysearch import TINY

TINY_MOE = dataclasses.replace(TINY, name="tiny-moe", num_experts=4, experts_per_token=2, moe_ffn=256, mlp="swiglu")
# the tiny MoE co-search's winner (tests/search/test_moe_search.py), 1 GiB of HBM
CHIP = Accelerator(name="chip 268", num_tc=16, tc_rows=64, tc_cols=64, num_vc=4, vc_width=64, glb_bytes=32 * 2**20,
                   hbm_bytes=2**30, hbm_bandwidth_Bps=1.2e12, freq_hz=1e9, bytes_per_element=2, glb_banks=64,
                   glb_bank_width_bytes=256, tc_operand_bytes=16384, tc_acc_bytes=131072, noc="crossbar",
                   noc_link_bytes=256, input_staging=True)


def _problem():
    setting = setting_for(TINY_MOE, 1, 2, True, "none", runtime=search_runtime("full", "adam"))
    tier = NetworkTier("scale-up", 16, 50e9, 1e-6)
    return build_problem(layer_graph(TINY_MOE, setting, "block", "bwd"), CHIP, tier)


def test_an_unproven_layer_gets_the_same_schedule_on_a_slow_machine(monkeypatch):
    problem = _problem()
    ref = solve(problem, time_limit_s=1.0)
    assert solve(problem, time_limit_s=1.0, exact=False).status != "optimal"  # the bounds alone do not prove it
    real, t0 = time.perf_counter, time.perf_counter()
    fast = type("FastClock", (), {"perf_counter": staticmethod(lambda: t0 + 4 * (real() - t0))})
    monkeypatch.setattr(solver, "time", fast)
    monkeypatch.setattr(bnb, "time", fast)
    monkeypatch.setattr(solver, "_BNB_MEMO", {})  # solve again, not the memoized result of ``ref``
    slow = solve(problem, time_limit_s=1.0)
    assert slow.makespan_s == ref.makespan_s and slow.status == ref.status
    assert [(o.name, o.start_s, o.cores) for o in slow.ops] == [(o.name, o.start_s, o.cores) for o in ref.ops]
