"""The GPU GEMM model against a published Hopper GEMM benchmark: Transformer Engine's GEMM profiling tutorial
(github NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst, commit 1609c89, "Worked
Example: 5B Model on H200"): the 12 linear GEMMs of one layer (hidden 4096, FFN 16384, 32 heads, M = 31 x 512
= 15,872 tokens) on an H200 NVL, BF16 31.968 ms and raw FP8 (pre-quantized CurrentScaling) 16.785 ms per layer.
The H200 NVL has the H100's GH100 SMs and tensor cores (132 SMs) at a lower datasheet clock: 835.5 TFLOP/s
dense BF16 (1,671 with sparsity); HBM3e 4.8 TB/s. Our H100 preset re-clocked to that peak must reproduce both
times with its own constants (the wave model, H100_MATRIX_EFFICIENCY and H100_FP8_MATRIX_FACTOR)."""
import dataclasses

import pytest

from phaze.cost.gpu import gpu_gemm_latency_s
from phaze.hardware.presets import H100_80G
from phaze.workload.ops import Gemm

M, H, F = 15_872, 4096, 16_384
SHAPES = {"qkv": (H, 3 * H), "proj": (H, H), "up": (H, F), "down": (F, H)}  # (in, out) features
H200_NVL = dataclasses.replace(H100_80G, name="h200-nvl", freq_hz=835.5e12 / (132 * 4 * 512 * 2),
                               hbm_bandwidth_Bps=4.8e12, op_overhead_s=0.0)


def layer_gemms(e: int) -> list[Gemm]:
    out = []
    for name, (k, n) in SHAPES.items():
        out += [Gemm(name, 1, M, n, k, e), Gemm(f"{name}.dgrad", 1, M, k, n, e), Gemm(f"{name}.wgrad", 1, n, k, M, e)]
    return out


def layer_ms(e: int) -> float:
    arch = H200_NVL.as_arrays()
    return 1e3 * sum(float(gpu_gemm_latency_s(g, arch)[0]) for g in layer_gemms(e))


def test_bf16_layer_time_matches_the_published_h200_benchmark():
    assert sum(g.flops for g in layer_gemms(2)) == 3 * 2 * M * H * (3 * H + H + F + F)
    assert layer_ms(2) == pytest.approx(31.968, rel=0.01)


def test_fp8_layer_time_matches_the_published_h200_benchmark():
    assert layer_ms(1) == pytest.approx(16.785, rel=0.01)
    assert layer_ms(2) / layer_ms(1) == pytest.approx(31.968 / 16.785, rel=1e-9)
