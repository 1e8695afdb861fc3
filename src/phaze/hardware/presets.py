"""Named accelerators and clusters, all in the one Phaze template (phaze-paper.md), with sources.

Template conventions (see accelerator.py): a tensor core is a ``tc_rows x tc_cols`` array of 16-bit
MACs (1 MAC = 2 FLOPs per cycle); a vector core has ``vc_width`` lanes and a lane retires ONE
floating-point operation per cycle. A GPU's non-tensor throughput is therefore expressed as lanes =
datasheet FLOP/s / (SMs * clock): an FMA counts as two lanes and a packed half2 op as two more.

Achievable fractions of peak (matrix, vector, memory, network) are named constants with their source;
they are the same for every workload (never per-case factors).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from phaze.errors import ConfigError
from phaze.fileio import read_data_file
from phaze.limits import RANGES, check
from phaze.filefields import check_fields, dataclass_schema
from phaze.hardware.accelerator import Accelerator
from phaze.hardware.cluster import Cluster, NetworkTier
from phaze.units import GiB, MiB


# ---- tpuv4-like: the paper's template chip, which also sets the area budget (phaze-paper.md) -------------
# 8 tensor cores of 128x128, 2 vector cores of 128 lanes, 128 MiB GLB, ~1 GHz (reference constants).
# HBM: TPU v4 has 32 GiB HBM2 at 1200 GB/s (Jouppi et al., "TPU v4", ISCA 2023, Table 1).
# The paper's analytical model assumes ideal utilisation, so the template's efficiencies are 1 and it
# has no per-op overhead: the design-space search compares chips under the same ideal assumptions.
TPUV4_HBM_BYTES = 32 * GiB
TPUV4_HBM_BANDWIDTH_BPS = 1200e9
TPUV4_FREQ_HZ = 1.0e9
# The paper's own chip, in the paper's template (no on-chip hierarchy): the reference and area budget of
# the paper's space (``--space paper``, 278.83 mm^2 under the paper's area model).
TPUV4_LIKE_PAPER = Accelerator(
    name="tpuv4-like-paper", num_tc=8, tc_rows=128, tc_cols=128, num_vc=2, vc_width=128, glb_bytes=128 * MiB,
    hbm_bytes=TPUV4_HBM_BYTES, hbm_bandwidth_Bps=TPUV4_HBM_BANDWIDTH_BPS, freq_hz=TPUV4_FREQ_HZ)


def chip_hierarchy(num_tc: int, tc_rows: int, tc_cols: int, num_vc: int, glb_banks: int,
                   glb_bank_width_bytes: int, bytes_per_element: int = 2) -> dict:
    """The on-chip hierarchy the default space gives a chip (one rule, also used for ``tpuv4-like``):
    - operand buffer = two weight tiles (2 R C e: the double buffer that hides weight loads);
    - accumulator = ACC_ROWS_PER_ARRAY_ROW * R rows of C fp32 sums (so a weight tile is reused by 8R
      streamed rows before it is reloaded: weight traffic is C / (8R) of the input traffic);
    - network: a crossbar up to CROSSBAR_MAX_PORTS core ports, a 2-D mesh beyond; a link is as wide as
      a core's peak demand (a tensor core's input + weight row (R + C) e, a vector core's 2 x lanes x e,
      rounded up to a power of two), at most a GLB bank port.
    Scalars or numpy arrays (the space applies it to every candidate at once)."""
    import numpy as np

    ports = np.asarray(num_tc) + np.asarray(num_vc)
    demand = np.maximum((np.asarray(tc_rows) + np.asarray(tc_cols)) * bytes_per_element,
                        2 * np.asarray(tc_cols) * bytes_per_element)  # vector lanes = tensor-core width
    link = np.minimum(np.asarray(glb_bank_width_bytes), 2 ** np.ceil(np.log2(demand)).astype(np.int64))
    return {
        "glb_banks": glb_banks, "glb_bank_width_bytes": glb_bank_width_bytes,
        "tc_operand_bytes": 2 * np.asarray(tc_rows) * np.asarray(tc_cols) * bytes_per_element,
        "tc_acc_bytes": ACC_ROWS_PER_ARRAY_ROW * np.asarray(tc_rows) * np.asarray(tc_cols) * 4,
        "noc": np.where(ports <= CROSSBAR_MAX_PORTS, "crossbar", "mesh"),
        "noc_link_bytes": link,
    }


# Rule constants of chip_hierarchy (design choices of our space, not measured figures).
ACC_ROWS_PER_ARRAY_ROW = 8
CROSSBAR_MAX_PORTS = 64


def _scalar(d: dict) -> dict:
    return {k: (str(v) if k == "noc" else int(v)) for k, v in d.items()}


# tpuv4-like: the paper's chip (same cores, lanes, GLB and HBM as TPUV4_LIKE_PAPER) with the on-chip
# hierarchy of the default space's rule, so it is costed by the same model as every candidate: 64 GLB banks
# with 256 B ports (the CACTI bank cycles in 1.84 ns, so 8.9 KB per 1 GHz cycle in all, above the 5 KiB per
# cycle its 8 arrays and 2 vector cores demand at peak).
TPUV4_LIKE = Accelerator(
    name="tpuv4-like", num_tc=8, tc_rows=128, tc_cols=128, num_vc=2, vc_width=128, glb_bytes=128 * MiB,
    hbm_bytes=TPUV4_HBM_BYTES, hbm_bandwidth_Bps=TPUV4_HBM_BANDWIDTH_BPS, freq_hz=TPUV4_FREQ_HZ,
    **_scalar(chip_hierarchy(8, 128, 128, 2, 64, 256)))

# ---- tpuv4: the real TPU v4 from public figures, the search's second reference (issue 34 item 2) -------------
# Google Cloud, "TPU v4" (cloud.google.com/tpu/docs/v4): each chip has two TensorCores, each with four MXUs, a
# vector unit and a scalar unit; 275 TFLOP/s bf16 peak; 32 GiB HBM2 at 1200 GB/s; measured min/mean/max power
# 90/170/192 W; 4096-chip pods on a 3-D mesh/torus interconnect (ICI).
# Jouppi et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine Learning with Hardware Support
# for Embeddings", ISCA 2023 (Table 1 and Section 2): MXUs of 128x128 (8 arrays), 1050 MHz (8 * 16384 * 2 *
# 1.05e9 = 275 TFLOP/s bf16, the quoted peak); each TensorCore's vector unit is 128 lanes x 8 sublanes with 2
# ALUs each (2048 lane operations per cycle); 128 MiB CMEM (the chip-wide on-chip memory: our GLB) and 16 MiB
# VMEM per TensorCore, which feeds its 4 MXUs (modelled as each MXU's operand buffer, 16 MiB / 4 = 4 MiB); six
# ICI links per chip for the 3-D torus (issue 34 reads 45 GB/s one way per link from the paper; not re-checked
# here, and not used: a search's network is its --cluster, the paper's flat 4 GiB/s by default). The GLB
# banking, accumulators and network are not published: they follow the default space's rule
# (chip_hierarchy), as for tpuv4-like. Ideal efficiencies, as every template chip. Its area and peak power are
# our 22 nm model's (468.5 mm^2, 308 W), not the real 7 nm die's; its measured power is TPUV4_MEASURED_POWER_W.
# Against tpuv4-like it has the same 8 MXUs, 16x the vector lanes, a 5% faster clock and 4 MiB operand
# buffers: since issue 34 item 1e (an op alone has all of the GLB and HBM) it is the faster of the two.
TPUV4 = Accelerator(
    name="tpuv4", num_tc=8, tc_rows=128, tc_cols=128, num_vc=2, vc_width=128 * 8 * 2, glb_bytes=128 * MiB,
    hbm_bytes=TPUV4_HBM_BYTES, hbm_bandwidth_Bps=TPUV4_HBM_BANDWIDTH_BPS, freq_hz=1.05e9,
    **dict(_scalar(chip_hierarchy(8, 128, 128, 2, 64, 256)), tc_operand_bytes=4 * MiB))

# ---- NVIDIA achievable fractions of peak (shared by A100 and H100 unless stated) -------------------------
# Dense GEMM: "optimized GEMM can reach up to 80-90% of the theoretical maximum device throughput"
# on A100 (Dao, FlashAttention-2, 2023, Sec. 1); we take the low end for whole-model GEMM mixes.
A100_MATRIX_EFFICIENCY = 0.80
# H100 SXM5: the in-wave efficiency at which our model of a published H100 layer takes its measured time.
# Transformer Engine's getting-started tutorial (github NVIDIA/TransformerEngine docs/getting_started/
# getting_started_pytorch.py / .out, commit a97674070, "on an NVIDIA H100 GPU", index.rst) times one GPT layer's
# forward + backward on one GPU: hidden 4096, FFN 16384, 32 heads, sequence 2048 x batch 8, BF16, TE LayerNorm
# and Linear, TE DotProductAttention (causal, dropout 0.1): "TE Unfused + TE Attention" 35.709 ms. Our model of
# that layer (phaze's GPT block, flash attention at H100_ATTENTION_EFFICIENCY, the vector ops at the HBM
# bandwidth) takes 35.709 ms at 0.670 (tests/cost/test_gpu_published.py); we read the part as the SXM5 of this
# preset (NVIDIA's pyxis cluster that ran it is not named). Checked, not fitted: the tutorial's FP8 run of the
# same layer (23.406 ms; model -4%), its JAX twin (BF16 35.054 ms, +1.9%; FP8 22.638 ms, -0.7%), and an
# 8 x H100 SXM fp16 8192^3 matmul followed by an all-gather
# (pytorch PR #172714, 2.96 ms; model +2.7%; 0.75 gave -3.5%). The same GEMMs reach 0.746 of an H200 NVL's peak
# (below): the fraction of the datasheet peak a GH100 sustains differs by part (the H200 NVL's 835.5 TFLOP/s are
# quoted at a lower clock than the SXM5's 989), so each takes its own measurement. 0.75 until 2026-12-02.
H100_MATRIX_EFFICIENCY = 0.670
# HBM: STREAM-style copy/triad kernels (BabelStream, nvbandwidth) sustain ~90% of the HBM2e/HBM3 pin
# bandwidth on A100 and H100.
GPU_MEMORY_EFFICIENCY = 0.90
# Non-tensor (vector) ops of LLM training are memory-bound; no published achievable fraction is used,
# so the lane throughput is taken at its datasheet peak.
GPU_VECTOR_EFFICIENCY = 1.0
# Fused (flash) attention kernels, fraction of the 16-bit matrix peak:
# A100: FlashAttention-2 "reaching 50-73% of the theoretical maximum FLOPs/s on A100" (Dao, FlashAttention-2,
# arXiv 2307.08691, abstract); the backward is the slower pass, so the low end, 0.50.
A100_ATTENTION_EFFICIENCY = 0.50
# H100: the NeMo / Megatron-LM releases of 2024 run cuDNN's fused attention or FlashAttention-2, kernels of the
# FlashAttention-2 generation (FlashAttention-3, written for Hopper, is not what they use); FlashAttention-2
# reaches "only 35% utilization on the H100" (Shah et al., FlashAttention-3, arXiv 2407.08608, abstract):
# 0.35. (FlashAttention-3 itself would be 1.5-2.0x faster; README "Validation" shows what 0.525 would give.)
H100_ATTENTION_EFFICIENCY = 0.35
# An H200 NVL figure from a published GEMM benchmark: Transformer Engine's GEMM profiling tutorial
# (github NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst, commit 1609c89, "Worked
# Example: 5B Model on H200") times the 12 linear GEMMs of one layer (hidden 4096, FFN 16384, M = 15,872
# tokens) on an H200 NVL (the same GH100 SMs and tensor cores; 835.5 TFLOP/s dense BF16 datasheet): BF16
# 31.968 ms per layer = 600 TFLOP/s = 71.8% of its peak, which our tile/wave model reproduces at an in-wave
# efficiency of 0.746 (tests/cost/test_gpu_published.py; an H200 NVL figure, not this preset's H100 SXM5:
# see H100_MATRIX_EFFICIENCY above).
# FP8 tensor cores: the datasheet's 1,979 vs 989 TFLOP/s dense is 2.0x; the H100 SXM5's measured rate comes from
# the same H100 tutorial as H100_MATRIX_EFFICIENCY (one part, one software stack, one measurement for both
# rates). Its "TE Unfused + TE Attention + FP8" run of that layer takes 23.406 ms. Our model of it -- the layer
# with its linear GEMMs in FP8 and Transformer Engine's cast/transpose kernels (phaze.cost.gpu_framework), plus
# what that benchmark runs and training does not: its unfused te.LayerNorm hands QKV and FC1 a 16-bit input
# (a full 4 B cast + transpose each), and its FP8 weights are re-cast every step (4 B per weight: no
# is_first_microbatch, so TE caches nothing) -- takes that time at 1.845x the BF16 rate
# (tests/cost/test_gpu_published.py). Checked, not fitted: the same tutorial's "TE Fused + TE Attention + FP8"
# run, 22.964 ms (model 23.01, +0.2%: LayerNormLinear / LayerNormMLP write FP8 from the norm as Megatron-Core's
# FP8 layers do, and the MLP's GELU writes FC2's FP8 input), and the JAX twin's FP8 run, 22.638 ms (+3.4%; its
# BF16 run +1.9%). For comparison, TE's GEMM profiling tutorial on the H200 NVL (above) has raw FP8 GEMMs
# (pre-quantized inputs, FP8 CurrentScaling) take 16.785 ms for the 12 GEMMs of a 5B layer against 31.968 ms in
# BF16: 1.905x, 3% more on the same SMs at a lower clock and power. The H200 NVL ratio was this constant until
# 2026-12-02 (README "What moved"). A100 has none.
H100_FP8_MATRIX_FACTOR = 1.845
# Per-kernel launch + synchronisation cost: CUDA kernel launch latency is ~2-5 us (NVIDIA CUDA
# C++ Best Practices Guide, "kernel launch overhead"; ~3 us is the commonly measured value).
GPU_OP_OVERHEAD_S = 3e-6

# ---- A100 SXM4 80 GB (NVIDIA A100 datasheet and Ampere GA100 whitepaper) --------------------------------
# 108 SMs x 4 third-gen tensor cores, each 256 dense FP16 FMA/clk (a 16x16 array), 1410 MHz boost:
# 432 * 256 * 2 * 1.41e9 = 311.9e12 FLOP/s (datasheet: 312 TFLOP/s dense FP16/BF16).
# Non-tensor FP16: 78 TFLOP/s = 108 SMs * 512 lane-ops/clk * 1.41e9 (64 FP32 cores x 2 (FMA) x 4
# (FP16 rate = 4x FP32 on GA100, 19.5 -> 78 TFLOP/s)).  L2 = 40 MiB.  HBM2e 80 GB at 2039 GB/s.
A100_80G = Accelerator(
    name="a100-80g", num_tc=108 * 4, tc_rows=16, tc_cols=16, num_vc=108, vc_width=512, glb_bytes=40 * MiB,
    hbm_bytes=80 * 10**9, hbm_bandwidth_Bps=2.039e12, freq_hz=1.41e9,
    matrix_efficiency=A100_MATRIX_EFFICIENCY, vector_efficiency=GPU_VECTOR_EFFICIENCY,
    memory_efficiency=GPU_MEMORY_EFFICIENCY, op_overhead_s=GPU_OP_OVERHEAD_S,
    attention_efficiency=A100_ATTENTION_EFFICIENCY)

# ---- H100 SXM5 80 GB (NVIDIA H100 datasheet and Hopper whitepaper) ---------------------------------------
# 132 SMs x 4 fourth-gen tensor cores, each 512 dense FP16/BF16 FMA/clk (16x32), 1.83 GHz:
# 528 * 512 * 2 * 1.83e9 = 989.4e12 FLOP/s (datasheet: 989 TFLOP/s dense BF16).
# Non-tensor FP16/BF16: 133.8 TFLOP/s, quoted at the 1.98 GHz boost clock; the template has one clock
# (1.83 GHz), so lanes = 133.8e12 / (132 * 1.83e9) = 554 per SM (553.9) keep the datasheet throughput.
# L2 = 50 MiB.  HBM3 80 GB at 3.35 TB/s.
H100_80G = Accelerator(
    name="h100-80g", num_tc=132 * 4, tc_rows=16, tc_cols=32, num_vc=132, vc_width=554, glb_bytes=50 * MiB,
    hbm_bytes=80 * 10**9, hbm_bandwidth_Bps=3.35e12, freq_hz=1.83e9,
    matrix_efficiency=H100_MATRIX_EFFICIENCY, vector_efficiency=GPU_VECTOR_EFFICIENCY,
    memory_efficiency=GPU_MEMORY_EFFICIENCY, op_overhead_s=GPU_OP_OVERHEAD_S,
    fp8_matrix_factor=H100_FP8_MATRIX_FACTOR, attention_efficiency=H100_ATTENTION_EFFICIENCY)

ACCELERATORS: dict[str, Accelerator] = {a.name: a for a in (TPUV4_LIKE, TPUV4_LIKE_PAPER, TPUV4, A100_80G, H100_80G)}

# TPU v4's measured power per chip, W (Google Cloud, "TPU v4", cloud.google.com/tpu/docs/v4: "Measured
# min/mean/max power 90/170/192 W"): what the energy of a training run counts for the tpuv4 preset (its max).
TPUV4_MEASURED_POWER_W = {"min": 90.0, "mean": 170.0, "max": 192.0}

# Board power (TDP) of the GPU presets, W: what the energy of a training run (``phaze plan --tokens``) counts per
# GPU, the GPUs alone (no host CPUs, NICs, switches or cooling). NVIDIA A100 Tensor Core GPU datasheet
# (A100 80GB SXM: "Max Thermal Design Power (TDP) 400W"); NVIDIA H100 Tensor Core GPU datasheet (H100 SXM: "Max
# Thermal Design Power (TDP) Up to 700W (configurable)").
BOARD_POWER_W: dict[str, float] = {"a100-80g": 400.0, "h100-80g": 700.0}


def device_power_w(acc: Accelerator) -> tuple[float, str]:
    """The power a device draws for the energy of a training run, W, and what it is: a GPU preset's board TDP,
    the tpuv4 preset's measured max power, else the chip model's peak power (``hardware.power.peak_power_w``; NaN for the paper's template)."""
    if acc.name in BOARD_POWER_W and acc == ACCELERATORS[acc.name]:
        return BOARD_POWER_W[acc.name], f"{acc.name} board TDP ({BOARD_POWER_W[acc.name]:g} W, datasheet), GPUs only"
    if acc == TPUV4:
        w = TPUV4_MEASURED_POWER_W["max"]
        return w, f"tpuv4 measured max power ({w:g} W, Google's TPU v4 page), chips only"
    from phaze.hardware.power import peak_power_w
    w = float(peak_power_w(acc))
    return w, f"{acc.name} peak power from phaze's chip power model ({w:.0f} W), chips only"


def get_accelerator(name: str) -> Accelerator:
    """A preset chip by name, or a YAML/JSON file with the fields of ``Accelerator``; unknown names raise
    ConfigError listing the presets."""
    if isinstance(name, str) and name.lower().endswith((".yaml", ".yml", ".json")):
        return load_accelerator_file(name)
    try:
        return ACCELERATORS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown accelerator {name!r}; choose one of: {', '.join(ACCELERATORS)} "
                          f"(or pass a .yaml/.json file)") from None


def load_accelerator_file(path: str) -> Accelerator:
    """An Accelerator from a YAML/JSON mapping of its fields (name defaults to the file name)."""
    import dataclasses
    from pathlib import Path

    p = Path(path)
    data = read_data_file(p, "accelerator file")
    if not isinstance(data, dict):
        raise ConfigError(f"accelerator file {path}: expected a mapping of Accelerator fields")
    data = dict(data)
    if data.get("network") is not None:  # the chip's own network (``load_accelerator_network``): checked here too
        from phaze.hardware.chip_network import network_from_mapping
        network_from_mapping(data["network"], f"accelerator file {path}: network")
    data.pop("network", None)
    schema = dataclass_schema(Accelerator, nonneg=("op_overhead_s", "fp8_matrix_factor", "glb_banks",
                                                   "glb_bank_width_bytes", "tc_operand_bytes", "tc_acc_bytes",
                                                   "noc_link_bytes"))
    required = tuple(f.name for f in dataclasses.fields(Accelerator)
                     if f.default is dataclasses.MISSING and f.name != "name")
    data = check_fields(data, schema, f"accelerator file {path}", required, "Accelerator fields")
    for k, v in data.items():
        if k in RANGES:
            check(k, v, f"accelerator file {path}: field '{k}'")
    data.setdefault("name", p.stem)
    try:
        return Accelerator(**data)
    except ConfigError as err:
        raise ConfigError(f"accelerator file {path}: {err}") from None
    except TypeError as err:
        raise ConfigError(f"accelerator file {path}: {err}") from None


def load_accelerator_network(path: str):
    """The ``network`` mapping of a chip file (docs/chip-file.md: the chip's own scale-up and scale-out network,
    what ``phaze search --export-chip`` writes for a winner of a space with a network axis) as a ChipNetwork,
    None when the file has none."""
    from phaze.hardware.chip_network import network_from_mapping

    data = read_data_file(Path(path), "accelerator file")
    if not isinstance(data, dict) or data.get("network") is None:
        return None
    return network_from_mapping(data["network"], f"accelerator file {path}: network")


# ---- Networks ----------------------------------------------------------------------------------------
# Achievable fraction of link bandwidth for large ring collectives, from nccl-tests bus bandwidth
# (busbw = algbw * 2(n-1)/n for all-reduce, the quantity our ring formulas divide by): ~230 GB/s of
# 300 GB/s on DGX A100 NVLink3 for large messages, ~360-370 GB/s of 450 GB/s on DGX H100 NVLink4
# (NVIDIA nccl-tests results / DGX user guides) -> 230/300 = 0.767 (NVLink3), 360/450 = 0.8 (NVLink4);
# InfiniBand rings reach ~90% of line rate (nccl-tests busbw ~22-23 GB/s per 200 Gb/s HDR HCA,
# ~45 GB/s per 400 Gb/s NDR HCA; NCCL's maintainers: "For NDR @ 400Gbps you should see 46-48GB/s per NIC",
# github NVIDIA/nccl-tests issue #290) -> 0.9. A ring over k GPUs of a node uses their k NICs
# (Cluster.ring_tier).
NVLINK3_EFFICIENCY = 230e9 / 300e9
NVLINK4_EFFICIENCY = 360e9 / 450e9
INFINIBAND_EFFICIENCY = 0.90
# Per-step latency of a ring step: a few us inside an NVSwitch node, ~5 us across InfiniBand
# (NCCL's own tuning model uses microsecond-scale base latencies of this order).
NVLINK_LATENCY_S = 3e-6
INFINIBAND_LATENCY_S = 5e-6

# DGX A100: 8 GPUs on NVSwitch, NVLink3 600 GB/s bidirectional = 300e9 B/s per direction per GPU;
# 8x 200 Gb/s HDR HCAs per node = 25e9 B/s per GPU.
DGX_A100_TIERS = (
    NetworkTier("nvlink", 8, 300e9, NVLINK_LATENCY_S, NVLINK3_EFFICIENCY),
    NetworkTier("infiniband", 2**62, 25e9, INFINIBAND_LATENCY_S, INFINIBAND_EFFICIENCY),
)
# DGX H100: NVLink4 900 GB/s bidirectional = 450e9 B/s per direction; 8x 400 Gb/s NDR = 50e9 B/s per GPU.
DGX_H100_TIERS = (
    NetworkTier("nvlink", 8, 450e9, NVLINK_LATENCY_S, NVLINK4_EFFICIENCY),
    NetworkTier("infiniband", 2**62, 50e9, INFINIBAND_LATENCY_S, INFINIBAND_EFFICIENCY),
)
# The paper's network: one 4 GiB/s link class (PCIe 3.0-like) for everything, no latency term, ideal.
FLAT_4GIB_TIERS = (NetworkTier("flat", 2**62, 4.0 * GiB, 0.0, 1.0),)

# 1024 devices is the paper's cluster (phaze-paper.md: "1024 accelerators"); used for every preset.
DEFAULT_NUM_DEVICES = 1024
CLUSTERS: dict[str, tuple[NetworkTier, ...]] = {
    "dgx-a100": DGX_A100_TIERS,
    "dgx-h100": DGX_H100_TIERS,
    "flat-4gib": FLAT_4GIB_TIERS,
}


def get_cluster(name: str, num_devices: int | None = None) -> Cluster:
    """A preset cluster of ``num_devices`` (default 1024), or a YAML/JSON cluster file
    (docs/cluster-file.md); the last tier spans every device."""
    if isinstance(name, str) and name.lower().endswith((".yaml", ".yml", ".json")):
        from phaze.hardware.cluster import load_cluster_file
        return load_cluster_file(name, num_devices)
    if name not in CLUSTERS:
        raise ConfigError(f"unknown cluster {name!r}; choose one of: {', '.join(CLUSTERS)} (or pass a "
                          f".yaml/.json cluster file, docs/cluster-file.md)")
    n = DEFAULT_NUM_DEVICES if num_devices is None else num_devices
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise ConfigError(f"cluster {name!r}: num_devices must be a positive integer, got {n!r}")
    tiers: list[NetworkTier] = []
    for i, t in enumerate(CLUSTERS[name]):
        if t.devices_per_group >= n or i == len(CLUSTERS[name]) - 1:
            tiers.append(replace(t, devices_per_group=n))  # the first tier that spans every device
            break
        tiers.append(t)
    return Cluster(name=name, num_devices=n, tiers=tuple(tiers))
