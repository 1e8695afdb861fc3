"""GEMM latency on a GPU (NVIDIA Ampere/Hopper), vectorized over chips: output tiles in waves over the SMs.

A GPU runs a GEMM as a grid of thread blocks (CTAs), each computing one ``tm x tn`` tile of the output
over the whole K loop; the CTAs run in *waves* of ``ctas`` per SM. Hence (NVIDIA Deep Learning
Performance Guide, "Matrix Multiplication Background": tile quantization and wave quantization):

  tiles   = batch * ceil(M / tm) * ceil(N / tn)              (partial tiles cost a whole tile)
  waves   = ceil(tiles / (SMs * ctas))                        (a partial last wave costs a whole wave)
  compute = waves * ctas * 2 * tm * tn * ceil(K / TILE_K) * TILE_K / (per-SM peak * matrix_efficiency)

taking the fastest of ``GPU_TILES`` (a library heuristic such as cuBLAS's picks the kernel per shape). The SMs are ``num_tc / TENSOR_CORES_PER_SM`` of the template chip. ``matrix_efficiency`` is
then the in-wave fraction of peak of a large, wave-aligned cuBLAS GEMM (set at the preset).
memory: the blocked HBM traffic of ``phaze.cost.gemm.gemm_hbm_bytes`` with the L2 as the on-chip buffer,
at the achievable HBM bandwidth. latency = max(compute, memory) + op_overhead_s (the kernel launch).
"""
from __future__ import annotations

import numpy as np

from phaze.cost.common import ceil_div
from phaze.cost.gemm import _check, gemm_hbm_bytes
from phaze.hardware.accelerator import ArchArrays
from phaze.workload.ops import Gemm

# CUTLASS's default SM80 fp16 tensor-op GEMM: ThreadblockShape 128x256x64, 3 stages, 8 warps
# (cutlass/include/cutlass/gemm/device/default_gemm_configuration.h, OpClassTensorOp/Sm80); its
# (128+256)*64*2 B * 3 stages = 144 KiB of shared memory allow one CTA per SM (164 KiB on A100).
# The half-size 128x128 tile (also a stock CUTLASS SM80 configuration) fits two CTAs per SM: the same
# work per wave, finer quantization. Every tile runs at the same in-wave efficiency (matrix_efficiency):
# an assumption, documented in docs/validation.md.
# (tm, tn, CTAs per SM)
GPU_TILES = ((128, 256, 1), (256, 128, 1), (128, 128, 2))
TILE_K = 64
# Ampere GA100 and Hopper GH100 SMs each have 4 tensor cores (NVIDIA A100 / H100 whitepapers).
TENSOR_CORES_PER_SM = 4


def gpu_gemm_wave_flops(g: Gemm, sms: np.ndarray) -> np.ndarray:
    """FLOPs one SM executes (padded tiles x waves) for the best tile of ``GPU_TILES``, per chip."""
    k_pad = -(-g.k // TILE_K) * TILE_K
    best = None
    for tm, tn, ctas in GPU_TILES:
        tiles = g.batch * (-(-g.m // tm)) * (-(-g.n // tn))
        work = ceil_div(tiles, sms * ctas) * (ctas * 2.0 * tm * tn * k_pad)
        best = work if best is None else np.minimum(best, work)
    return best


def is_flash(gemm: Gemm) -> bool:
    """A GEMM half of a fused flash-attention kernel (``phaze.workload.graphs.FLASH_OPS``), incl. its
    backward and recompute copies."""
    return "flash_" in gemm.name


def gpu_gemm_latency_s(gemm: Gemm, arch: ArchArrays) -> np.ndarray:
    """Latency (s) of ``gemm`` on the whole GPU of each chip of ``arch`` (see module docstring). One-byte
    operands run on the FP8 tensor cores (``fp8_matrix_factor`` x the 16-bit rate). The halves of a
    flash-attention kernel are compute at ``attention_efficiency`` of the peak: the fused kernel keeps the
    score tiles on chip and pays one launch for all its GEMMs (charged to the first)."""
    _check(gemm)
    peak = 2.0 * arch.num_tc * arch.tc_rows * arch.tc_cols * arch.freq_hz
    if is_flash(gemm):
        launch = arch.op_overhead_s if gemm.name.endswith("flash_scores") else 0.0  # fwd / bwd kernel
        return gemm.flops / (peak * arch.attention_efficiency) + launch
    sms = np.maximum(1, arch.num_tc // TENSOR_CORES_PER_SM)
    per_sm_flops = 2.0 * TENSOR_CORES_PER_SM * arch.tc_rows * arch.tc_cols * arch.freq_hz
    if gemm.bytes_per_element == 1:
        if np.any(arch.fp8_matrix_factor <= 0):
            from phaze.errors import ConfigError
            raise ConfigError(f"GEMM {gemm.name!r} is FP8 but the chip has no FP8 tensor cores "
                              f"(fp8_matrix_factor 0); use --precision bf16 or fp16")
        per_sm_flops = per_sm_flops * arch.fp8_matrix_factor
    compute_s = gpu_gemm_wave_flops(gemm, sms) / (per_sm_flops * arch.matrix_efficiency)
    # the weight-gradient accumulation is charged as its own pass (phaze.cost.gpu_layer.grad_accumulate_s)
    memory_s = (gemm_hbm_bytes(gemm, arch.glb_bytes, arch.tc_rows, accumulate=False)
                / (arch.hbm_bandwidth_Bps * arch.memory_efficiency))
    return np.maximum(compute_s, memory_s) + arch.op_overhead_s
