"""Chip power: the energy constants from their sources, op energies, peak and average power."""
import numpy as np
import pytest

from phaze.cost.energy import graph_energy_j, graph_time_by_bound, op_energy_j
from phaze.hardware import get_accelerator
from phaze.hardware.power import HBM_J_PER_BYTE, LANE_OP_J, MAC_J, WIRE_J_PER_BIT_MM, peak_power_w
from phaze.workload.runtime import TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.ops import Gemm, VectorOp
from phaze.workload.zoo import get_model

TPU = get_accelerator("tpuv4-like")


def test_constants_from_their_sources():
    scale = (22 / 45) * (0.8 / 0.9) ** 2          # 45 nm 0.9 V -> 22 nm 0.8 V
    assert MAC_J == pytest.approx((1.1 + 0.9) * 1e-12 * scale)   # Horowitz 2014: fp16 mult + fp32 add
    assert LANE_OP_J == pytest.approx(0.9e-12 * scale)
    assert WIRE_J_PER_BIT_MM == pytest.approx(26e-12 / 256 * (0.8 / 0.9) ** 2)  # Keckler 2011
    assert HBM_J_PER_BYTE == pytest.approx(3.9e-12 * 8)                         # O'Connor 2017


def test_gemm_energy_is_linear_in_batch_and_above_the_macs():
    a = TPU.as_arrays()
    one = op_energy_j(Gemm("g", 1, 2048, 1600, 1600), a, 8)[0]
    two = op_energy_j(Gemm("g", 2, 2048, 1600, 1600), a, 8)[0]
    assert two == pytest.approx(2 * one, rel=1e-12)
    assert one > 2048 * 1600 * 1600 * MAC_J


def test_vector_energy_resident_saves_hbm():
    v = VectorOp("v", "add", 1 << 22, 1.0, 3 * 2 * (1 << 22))
    a = TPU.as_arrays()
    hbm = op_energy_j(v, a, 2, resident=False)[0]
    res = op_energy_j(v, a, 2, resident=True)[0]
    assert hbm - res >= v.bytes_moved * HBM_J_PER_BYTE   # at least the HBM energy itself


def test_paper_template_power_not_modelled():
    paper = get_accelerator("tpuv4-like-paper")
    assert np.isnan(peak_power_w(paper))
    assert np.isnan(op_energy_j(Gemm("g", 1, 64, 64, 64), paper.as_arrays(), 1)[0])


def test_peak_power_of_tpuv4_like_is_in_the_tpu_v4_range():
    # TPU v4: 192 W max, 170 W mean (Jouppi et al., ISCA 2023, Table 1); our template chip is not that chip,
    # but its peak power must be of that order, not kW
    assert 100 < peak_power_w(TPU) < 400


def test_layer_energy_and_bounds():
    g = layer_graph(get_model("gpt2-xl"), TrainSetting(microbatch_size=1, seq_len=1024, tp=1), "block", "fwd")
    a = TPU.as_arrays()
    e = graph_energy_j(g, a)[0]
    macs = sum(op.flops / 2 for op in g.ops if isinstance(op, Gemm))
    assert e > macs * MAC_J
    t = graph_time_by_bound(g, a)
    assert set(t) == {"compute", "glb", "hbm", "network"} and t["network"][0] == 0
    assert sum(v[0] for v in t.values()) > 0


def test_plan_power_below_peak_and_time_split_adds_up():
    from phaze.api import PlanSpace, plan
    from phaze.placement.power import plan_power
    res = plan("gpt2-xl", "tpuv4-like", devices=64, global_batch=64,
               space=PlanSpace(microbatch_sizes=(1,), recompute_modes=("none",)))
    p = plan_power(get_model("gpt2-xl"), TPU, res.best)
    assert 0 < p["power_w"] < peak_power_w(TPU)
    total = sum(p["time_by_bound_s"].values())
    assert total <= res.best.iteration_time_s * (1 + 1e-9) and total >= 0.95 * res.best.iteration_time_s
    assert p["bound"] in p["time_by_bound_s"]
    # the GLB bytes it moves per second stay within the GLB's supply (ops slow down to fit their slices)
    from phaze.search.explain import chip_facts
    assert 0 < p["glb_demand_Bps"] <= chip_facts(TPU)["glb_bandwidth_Bps"]


def test_gemm_energy_parts_count_the_schedule_hand_computed():
    # 4x16 array, operand buffer of two tiles (256 B), accumulator of 32 fp32 rows of 16 (2 KiB), GLB banks of
    # 64 B. GEMM (64 x 8) @ (8 x 16), M's rows streamed: one column block (N = C = 16), kt = 2 tiles of
    # k_rows = 4, passes of 32 rows (2); the 2-tile panel (256 B) fits the operand buffer, so it is loaded
    # once. GLB: inputs 64 x 8 x 2 B once (one column block) = 1024, weights 8 x 16 x 2 = 256, outputs
    # 64 x 16 x 2 = 2048 written; accumulator: 64 rows x 2 tiles = 128 row reads and writes; operand
    # buffer: 2 tiles x 4 rows = 8 rows written and read.
    from phaze.cost.energy import gemm_energy_parts_j
    from phaze.cost.gemm import gemm_terms
    from phaze.hardware.power import energy_parts
    from chiphelpers import small_chip

    a = small_chip(rows=4, cols=16, operand=256, acc=32 * 16 * 4, width=64).as_arrays()
    g = Gemm("g", 1, 64, 16, 8)
    t = gemm_terms(g, a, 1)
    assert bool(t["streams_m"][0])
    assert (t["glb_bytes"][0], t["glb_write_bytes"][0], t["acc_row_accesses"][0], t["operand_row_loads"][0]) \
        == (1024 + 256 + 2048, 2048, 128, 8)
    p = energy_parts(a)
    e = gemm_energy_parts_j(g, a, 1)
    assert e["mac"][0] == pytest.approx(64 * 16 * 8 * MAC_J)
    assert e["glb"][0] == pytest.approx(1280 * p["glb_read_J_per_B"][0] + 2048 * p["glb_write_J_per_B"][0])
    assert e["accumulator"][0] == pytest.approx(128 * (p["acc_row_read_J"][0] + p["acc_row_write_J"][0]))
    assert e["operand_buffer"][0] == pytest.approx(8 * (p["operand_row_read_J"][0] + p["operand_row_write_J"][0]))
    assert op_energy_j(g, a, 1)[0] == pytest.approx(sum(v[0] for v in e.values()))


def test_a_row_wider_than_the_macro_port_takes_several_accesses():
    # a 256-column array's fp32 accumulator row is 1 KiB; the macros' ports are at most 512 B, so a row is
    # two accesses (one was charged until 2026-12-02, found by the ZigZag energy cross-check); a 128-column
    # row (512 B) is one
    from phaze.hardware.chip_area import sram_parts
    from phaze.hardware.power import energy_parts
    from chiphelpers import small_chip

    for cols, words in ((128, 1), (256, 2)):
        a = small_chip(rows=128, cols=cols).as_arrays()
        acc = sram_parts(a)["acc"]
        assert energy_parts(a)["acc_rmw_J"][0] == pytest.approx(words * (acc.read_energy_j[0] + acc.write_energy_j[0]))
