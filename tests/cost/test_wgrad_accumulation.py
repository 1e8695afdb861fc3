"""Every microbatch's weight gradient is added into the persistent gradient buffer. A weight-gradient GEMM is marked
(``Gemm.accumulate_bytes``, by ``phaze.workload.graphs.accumulating_wgrads``) and a designed chip's GEMM reads and
writes that buffer in its HBM term (``phaze.cost.gemm.gemm_hbm_bytes``) instead of writing a fresh result once; the
GPU model keeps charging it as its own pass (``grad_accumulate_s``), so GPU times do not move. Until this was charged
a designed chip accumulated gradients for free."""
from dataclasses import replace

import numpy as np
import pytest

from phaze.cost import gemm_hbm_bytes, gemm_latency_s
from phaze.cost.energy import gemm_energy_parts_j
from phaze.cost.gpu import gpu_gemm_latency_s
from phaze.hardware import Accelerator
from phaze.hardware.presets import get_accelerator
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import PAPER_RUNTIME, TrainSetting
from phaze.workload.graphs import layer_graph
from phaze.workload.ops import Gemm

MiB = 2**20
GPT = ModelConfig("tiny-gpt", num_layers=2, hidden=256, heads=4, ffn=1024, vocab=1000, seq_len=128)


def chip(bw=1200e9, glb=128 * MiB):
    return Accelerator("t", 1, 128, 128, 1, 128, glb, 32 * 2**30, bw, 1e9).as_arrays()


def test_hbm_bytes_hand_computed():
    g = Gemm("fc1.wgrad", 1, 256, 1024, 4096)
    big = np.array([128 * MiB])  # everything fits: compulsory traffic
    plain = gemm_hbm_bytes(g, big, np.array([128]))[0]
    assert plain == 2 * (256 * 4096 + 4096 * 1024 + 256 * 1024)  # inputs once, the result written once
    acc = replace(g, accumulate_bytes=4)
    # the fp32 buffer's 256 x 1024 elements read and written (8 B) instead of a 2 B write
    assert gemm_hbm_bytes(acc, big, np.array([128]))[0] == plain + (8 - 2) * 256 * 1024 == acc.bytes_moved
    assert gemm_hbm_bytes(acc, big, np.array([128]), accumulate=False)[0] == plain
    assert gemm_hbm_bytes(replace(g, accumulate_bytes=2), big, np.array([128]))[0] == plain + (4 - 2) * 256 * 1024


def test_graphs_mark_every_wgrad_with_the_buffer_format():
    for grad_dtype, b in (("fp32", 4), ("bf16", 2)):
        s = TrainSetting(microbatch_size=2, seq_len=128, tp=1, runtime=PAPER_RUNTIME.with_(grad_dtype=grad_dtype))
        for kind in ("embedding", "block", "head"):
            bwd = layer_graph(GPT, s, kind, "bwd")
            for op in bwd.gemms:
                assert op.accumulate_bytes == (b if op.name.endswith(".wgrad") else 0), (kind, op.name)
            assert all(op.accumulate_bytes == 0 for op in layer_graph(GPT, s, kind, "fwd").gemms)
        assert sum(op.name.endswith(".wgrad") for op in layer_graph(GPT, s, "block", "bwd").gemms) == 4


def test_memory_bound_wgrad_pays_the_traffic_on_a_chip():
    g = Gemm("w.wgrad", 1, 4096, 4096, 8)  # K = 8 tokens: memory-bound
    arch = chip(bw=1e9)
    t0 = gemm_latency_s(g, arch, 1)[0]
    t1 = gemm_latency_s(replace(g, accumulate_bytes=4), arch, 1)[0]
    assert t1 - t0 == pytest.approx(6 * 4096 * 4096 / 1e9, rel=1e-9)
    tpu = get_accelerator("tpuv4-like").as_arrays()  # a chip with the on-chip hierarchy (the energy model's)
    e0 = gemm_energy_parts_j(g, tpu)["hbm"][0]
    assert gemm_energy_parts_j(replace(g, accumulate_bytes=4), tpu)["hbm"][0] > e0


def test_gpu_gemm_time_does_not_move():
    """The GPU model charges the accumulation as its own pass (grad_accumulate_s), not in the GEMM."""
    arch = get_accelerator("h100-80g").as_arrays()
    for g in (Gemm("w.wgrad", 1, 4096, 4096, 8), Gemm("fc1.wgrad", 1, 4096, 16384, 8192)):
        assert gpu_gemm_latency_s(replace(g, accumulate_bytes=4), arch)[0] == gpu_gemm_latency_s(g, arch)[0]


def _hier(**kw):
    """The TPUv4-like chip (on-chip hierarchy), fields replaced."""
    return replace(get_accelerator("tpuv4-like"), **kw).as_arrays()


def test_glb_carries_the_buffer_on_a_chip_with_the_hierarchy():
    """The buffer passes through the GLB both ways: each output's old sums in (4 B fp32) and new sums out
    (4 B) instead of one 2 B write; the writes are the energy model's GLB writes, and each output row's old
    sums are one more accumulator row write."""
    from phaze.cost.gemm_chip import gemm_chip_terms

    g = Gemm("fc1.wgrad", 1, 512, 1024, 2048)
    arch = _hier()
    hbm = gemm_hbm_bytes(g, arch.glb_bytes, arch.tc_rows)
    t0 = gemm_chip_terms(g, arch, np.array([8.0]), hbm)
    acc = replace(g, accumulate_bytes=4)
    t1 = gemm_chip_terms(acc, arch, np.array([8.0]), gemm_hbm_bytes(acc, arch.glb_bytes, arch.tc_rows))
    assert bool(t0["streams_m"][0]) == bool(t1["streams_m"][0])
    S, T = (512, 1024) if t1["streams_m"][0] else (1024, 512)
    assert t1["glb_bytes"][0] - t0["glb_bytes"][0] == (4 + 4 - 2) * 512 * 1024
    assert t1["glb_write_bytes"][0] - t0["glb_write_bytes"][0] == (4 - 2) * 512 * 1024
    assert t1["acc_row_accesses"][0] - t0["acc_row_accesses"][0] == S * -(-T // 128)
    e0, e1 = gemm_energy_parts_j(g, arch), gemm_energy_parts_j(acc, arch)
    assert e1["glb"][0] > e0["glb"][0] and e1["accumulator"][0] > e0["accumulator"][0]


def test_glb_bound_wgrad_pays_the_glb_traffic():
    """On a chip whose GLB is the bottleneck (1 bank of 8 B), the accumulating GEMM's GLB time grows by at
    least the 6 B per output more at the op's GLB bandwidth, and its latency with it."""
    from phaze.cost.gemm_chip import gemm_chip_terms
    from phaze.cost.onchip import glb_bandwidth_Bps

    g = Gemm("w.wgrad", 1, 1024, 1024, 64)
    arch = _hier(glb_banks=1, glb_bank_width_bytes=8)
    acc = replace(g, accumulate_bytes=4)
    cores = np.array([8.0])
    t0 = gemm_chip_terms(g, arch, cores, gemm_hbm_bytes(g, arch.glb_bytes, arch.tc_rows))
    t1 = gemm_chip_terms(acc, arch, cores, gemm_hbm_bytes(acc, arch.glb_bytes, arch.tc_rows))
    assert t0["glb_s"][0] > max(t0["compute_s"][0], t0["hbm_s"][0])  # GLB-bound, as built
    extra_s = 6 * 1024 * 1024 / glb_bandwidth_Bps(arch, "tc", cores)[0]
    assert t1["glb_s"][0] - t0["glb_s"][0] >= extra_s * (1 - 1e-9)
    assert gemm_latency_s(acc, arch, 8)[0] - gemm_latency_s(g, arch, 8)[0] >= extra_s * (1 - 1e-9)
