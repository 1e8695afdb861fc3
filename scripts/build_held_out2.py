"""Builds src/phaze/validation/data/held_out2_runs.json: the second held-out set of published runs (issue 11).

Collected 2026-12-01, committed at 22:25 UTC (c34a89c, data only), BEFORE any change to the time model made with it in view (the model
was not evaluated on these runs while the mechanisms were developed). Each run's measured step time is
stated by its source or converted from its published throughput as written in the run's 'conversion'.
Run: python scripts/build_held_out2.py (writes the JSON; it reads nothing outside this script).
"""
from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/phaze/validation/data/held_out2_runs.json"
COLLECTED = "2026-12-01 and committed at 22:25 UTC (c34a89c, data only), before the time-model changes of issue 11's second pass"

# The table as last published on NeMo's main branch: "24.07 perf numbers (#10253)", commit 8e3d65dc (2024-09-09),
# unchanged on main until the table gave way to a link (d31653f, 2024-12-12). Until 2026-12-02 this set read the
# table at 070a0bb, a "fix conflicts" commit of a side branch (24.09-alpha; not an ancestor of main) that still
# carries the table's first version (4c73f77, 2024-08-14), which main replaced twice (3a8081f "24.07 vboost
# numbers", then 8e3d65dc). The first-version figures are kept in NEMO_FIRST_VERSION_TPS below.
NEMO_SRC = ("github NVIDIA/NeMo docs/source/performance/performance_summary.md (commit "
            "8e3d65dcfe3504689bfc5b6e67d502780aacad41, '24.07 perf numbers (#10253)', the table's last version on "
            "main), 'Pretraining' table: NeMo 24.07 container, DGX-H100, FP8; columns #-GPUs, GBS, MBS, Sequence "
            "Length, TP, PP, CP, VP, Tokens/sec/GPU")
LAUNCHER = "github NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/training/{}.yaml (commit 26e42fa)"

GPT_BPE = 50257  # GPT2BPETokenizer (the launcher's gpt3 configs), padded to 128 x TP


def gpt(name, layers, hidden, heads, seq, vocab=GPT_BPE, tied=True):
    return {"name": name, "num_layers": layers, "hidden": hidden, "heads": heads, "ffn": 4 * hidden,
            "vocab": vocab, "seq_len": seq, "norm": "layernorm", "mlp": "gelu", "position": "learned",
            "bias": True, "dropout": True, "tied_embeddings": tied, "max_tp": 8, "vocab_pad_multiple": 128}


def llama(name, layers, hidden, heads, kv, ffn, vocab, seq):
    return {"name": name, "num_layers": layers, "hidden": hidden, "heads": heads, "kv_heads": kv, "ffn": ffn,
            "vocab": vocab, "seq_len": seq, "norm": "rmsnorm", "mlp": "swiglu", "position": "rotary",
            "bias": False, "dropout": False, "tied_embeddings": False, "max_tp": 8, "vocab_pad_multiple": 128}


def nemotron(name, layers, hidden, heads, kv, ffn, seq=4096):
    m = {"name": name, "num_layers": layers, "hidden": hidden, "heads": heads, "ffn": ffn, "vocab": 256000,
         "seq_len": seq, "norm": "layernorm", "mlp": "gelu", "position": "rotary", "bias": False,
         "dropout": False, "tied_embeddings": False, "max_tp": 8, "vocab_pad_multiple": 128,
         "rotary_fraction": 0.5}
    if kv:
        m["kv_heads"] = kv
    return m


# NeMo 24.07 DGX-H100 FP8 pre-training table: (label, model, launcher config, gpus, gbs, mbs, seq, tp, pp, cp, vp,
# tokens/s/GPU, recompute)
NEMO = [
    ("GPT3-5B", gpt("nemo-gpt3-5b", 24, 4096, 32, 2048), "gpt3/5b", 64, 2048, 4, 2048, 1, 1, 1, 1, 23406, "none"),
    ("GPT3-20B", gpt("nemo-gpt3-20b", 44, 6144, 48, 2048), "gpt3/20b", 64, 256, 2, 2048, 2, 1, 1, 1, 5851, "none"),
    ("GPT3-175B", gpt("nemo-gpt3-175b", 96, 12288, 96, 2048), "gpt3/175b", 128, 256, 1, 2048, 4, 8, 1, 6, 716, "none"),
    ("GPT3-175B", gpt("nemo-gpt3-175b", 96, 12288, 96, 2048), "gpt3/175b", 512, 2048, 2, 2048, 4, 8, 1, 6, 825, "none"),
    ("LLAMA2-7B", llama("llama2-7b", 32, 4096, 32, None, 11008, 32000, 4096), "llama/llama2_7b",
     8, 128, 1, 4096, 1, 1, 1, 1, 16934, "none"),
    ("LLAMA2-13B", llama("llama2-13b", 40, 5120, 40, None, 13824, 32000, 4096), "llama/llama2_13b",
     16, 128, 1, 4096, 1, 4, 1, 10, 8715, "none"),
    ("LLAMA2-70B", llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096), "llama/llama2_70b",
     64, 128, 1, 4096, 4, 4, 1, 20, 1728, "none"),
    ("Nemotron-8B", nemotron("nemotron3-8b", 32, 4096, 32, None, 16384), "nemotron/nemotron_8b",
     64, 256, 4, 4096, 2, 1, 1, 1, 12507, "none"),
    ("Nemotron-22B", nemotron("nemotron3-22b", 40, 6144, 48, None, 24576), "nemotron/nemotron_22b",
     64, 256, 2, 4096, 2, 4, 1, 10, 4312, "none"),
    ("Nemotron-340B", nemotron("nemotron4-340b", 96, 18432, 96, 8, 73728), "nemotron/nemotron_340b",
     128, 32, 1, 4096, 8, 8, 1, 12, 326, "selective"),
    ("LLAMA3-8B", llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192), "llama/llama3_8b",
     8, 128, 1, 8192, 1, 1, 2, 1, 12273, "none"),
    ("LLAMA3-70B", llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192), "llama/llama3_70b",
     64, 128, 1, 8192, 4, 4, 2, 5, 1524, "none"),
]

# The first version's tokens/s/GPU (commit 4c73f77 / the side branch's 070a0bb), which this set used until
# 2026-12-02: {(label, GPUs): tokens/s/GPU}.
NEMO_FIRST_VERSION_TPS = {
    ("GPT3-5B", 64): 22521, ("GPT3-20B", 64): 5851, ("GPT3-175B", 128): 726, ("GPT3-175B", 512): 782,
    ("LLAMA2-7B", 8): 16847, ("LLAMA2-13B", 16): 8646, ("LLAMA2-70B", 64): 1707, ("Nemotron-8B", 64): 12701,
    ("Nemotron-22B", 64): 4256, ("Nemotron-340B", 128): 322, ("LLAMA3-8B", 8): 12036, ("LLAMA3-70B", 64): 1533
}


# The userbuffers configuration each launcher model config of NeMo-Framework-Launcher tag 24.07 (commit 8325688)
# loads (its `defaults: - optional tp_overlap@model.ub_tp_comm_overlap_cfg: FILE`), as phaze's named configuration
# (src/phaze/cost/data/tp_overlap_configs.json): (name, why). The table does not name its configurations; the runs
# take their architecture from these launcher files, so we take their userbuffers configuration from them too.
_L = "NeMo-Framework-Launcher 24.07 {cfg}.yaml"
UB = {
    "gpt3/20b": ("nemo-launcher-h100-h6144-tp2-mbs2",
                 _L + " loads tp_overlap/ub_cfg_h100_h6144_tp2_mbs2_seqlen2048 (the table's TP 2, MBS 2)"),
    "gpt3/175b": ("nemo-gpt3-175b-h100",
                  _L + " loads tp_overlap/ub_cfg_h100_h12288_tp4_mbs1_seqlen2048 (the values of "
                  "nemo-gpt3-175b-h100; the 512-GPU run's MBS 2 has no file of its own at 24.07), though gpt3/175b.yaml "
                  "itself sets ub_tp_comm_overlap: False: the overlap itself stays an assumption here"),
    "llama/llama2_70b": ("nemo-launcher-h100-h8192-tp4-mbs1-seq4096",
                         _L + " loads tp_overlap/ub_cfg_h100_h8192_tp4_mbs1_seqlen4096 (the table's TP 4, MBS 1)"),
    "llama/llama3_70b": ("dgxc-llama3.1-70b",
                         _L + " loads tp_overlap/ub_cfg_h100_h8192_tp4_mbs1_seqlen8192, the values of "
                         "dgxc-llama3.1-70b"),
    "nemotron/nemotron_8b": ("te-default", _L + " sets ub_tp_comm_overlap: true and loads no tp_overlap file, so "
                             "Transformer Engine's defaults apply"),
    "nemotron/nemotron_22b": ("te-default", _L + " sets ub_tp_comm_overlap: true and loads no tp_overlap file, so "
                              "Transformer Engine's defaults apply"),
    "nemotron/nemotron_340b": ("nemo-gpt3-175b-h100", _L + " sets ub_tp_comm_overlap: False and names no "
                               "tp_overlap file: not established; phaze's default kept"),
}

# The gradients' format (optim.grad_sync_dtype) of each run. NeMo 24.07 reduces in fp32 unless told bf16: with
# distributed_fused_adam (every config of tag 24.07) Apex DistributedFusedAdam defaults grad_sync_dtype to its
# fp32 state dtype and keeps its gradient buffer (param.main_grad, where Transformer Engine's wgrad GEMM
# accumulates) in grad_sync_dtype (apex/contrib/optimizers/distributed_fused_adam.py, _init_grad_buffer); with
# mcore_distributed_optim NeMo sets grad_reduce_in_fp32=(cfg.optim.get('grad_sync_dtype', 'fp32') == 'fp32')
# (nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py line 541 at NVIDIA/NeMo commit 070a0bb).
# Of the launcher model configs only nemotron_340b sets it, to bf16 (line 161 at tag 24.07 commit 8325688). The
# launcher's H100 FP8 example scripts of the same tag (examples/training/{gpt,llama}/h100/*_fp8*.sh: 5b_fp8_8node,
# 20b_fp8_8node, 175b_fp8_16node, llama2_{7b,13b,70b}_fp8, llama3_{8b,70b}_fp8) all add
# +training.model.optim.grad_sync_dtype=bf16 (commit e743722a "Added to example configs", 2024-04-10), and the
# Nemotron ones do not (79f92438 "Removed grad_sync_dtype from Nemotron models", the same day). The table names
# no scripts; its GPT-3 5B, Llama 2 70B, Llama 3 8B / 70B rows have exactly their scripts' node count and batch,
# so we take each family's script setting.
_EX = ("NeMo-Framework-Launcher 24.07 examples/training/{ex}.sh (the launcher's H100 FP8 example for this model) "
       "adds +training.model.optim.grad_sync_dtype=bf16; the table names no script, so its setting is assumed "
       "(the gradient buffer, its reduce-scatter and the wgrad accumulation in bf16; fp32 master weights and Adam "
       "state as before) -> grad_dtype bf16")
GRAD_SYNC_BF16 = {
    "nemotron/nemotron_340b": _L + " sets optim.grad_sync_dtype: bf16 (the gradient buffer, its reduce-scatter and "
                              "the wgrad accumulation in bf16) -> grad_dtype bf16",
    "gpt3/5b": _EX.format(ex="gpt/h100/5b_fp8_8node"),
    "gpt3/20b": _EX.format(ex="gpt/h100/20b_fp8_8node"),
    "gpt3/175b": _EX.format(ex="gpt/h100/175b_fp8_16node"),
    "llama/llama2_7b": _EX.format(ex="llama/h100/llama2_7b_fp8"),
    "llama/llama2_13b": _EX.format(ex="llama/h100/llama2_13b_fp8"),
    "llama/llama2_70b": _EX.format(ex="llama/h100/llama2_70b_fp8"),
    "llama/llama3_8b": _EX.format(ex="llama/h100/llama3_8b_fp8"),
    "llama/llama3_70b": _EX.format(ex="llama/h100/llama3_70b_fp8"),
}


# What Adam keeps per parameter (optimizer_state). Every launcher config of tag 24.07 runs Apex's
# DistributedFusedAdam; only nemotron_340b sets its state dtype, optim.dtype: bf16 (line 162 at commit 8325688;
# Apex: "dtype (torch.dtype, optional): datatype for optimizer state (default: torch.float32)"). NeMo then keeps a
# master copy only with FP8 parameters (megatron_base_model.py setup_optimization: fp8_params -> store_params;
# optimizer dtype == model dtype -> none; github NVIDIA/NeMo 46aa1ee). The FP8 runs are modelled with FP8
# parameters (the FP8 weight and its transpose), so the 340B run keeps bf16 m, v and a bf16 master copy. The other
# configs keep Apex's default fp32 state, and with FP8 parameters store_params: an fp32 copy + m + v, the default.
OPTIM_STATE = {
    "nemotron/nemotron_340b": ("bf16-master", _L + " sets optim.dtype: bf16, Apex DistributedFusedAdam's optimizer-state "
                               "datatype; with FP8 parameters (as every FP8 run here is modelled) NeMo's "
                               "setup_optimization (megatron_base_model.py, github NVIDIA/NeMo 46aa1ee) sets "
                               "store_params, a master copy in that dtype -> optimizer_state bf16-master (bf16 m, v and "
                               "master copy, 6 B per parameter; first evaluated with the fp32 master + m + v, 12 B)"),
}


def nemo_runs():
    out = []
    for label, model, cfg, gpus, gbs, mbs, seq, tp, pp, cp, vp, tps, recompute in NEMO:
        dp = gpus // (tp * pp * cp)
        t = gbs * seq / (tps * gpus)
        assumptions = [
            f"model architecture from the NeMo launcher config {cfg}.yaml (layers, hidden, heads, query groups, "
            "FFN, norm, activation, positions, bias, tied embeddings); GPT-3 vocabulary = GPT-2 BPE 50257",
            "precision fp8 (the table is FP8: Transformer Engine hybrid E4M3/E5M2, delayed scaling)",
            "fused attention (cuDNN via Transformer Engine, the NeMo 24.07 default) -> flash",
            "distributed optimizer (optim distributed_fused_adam, Apex) -> zero1; overlapped grad reduce (overlap_grad_sync)",
            "sequence parallelism and TP-communication overlap (userbuffers) whenever TP > 1",
            f"activation recompute {recompute} (the launcher config's activations_checkpoint_granularity)",
        ]
        if "nemotron" in model["name"]:
            assumptions.append("squared-ReLU MLP modelled as 'gelu' (as published_runs.json does); layernorm1p as "
                               "layernorm; rotary on half of each head")
        if tp > 1:
            ub_name, why = UB[cfg]
            assumptions.append(f"userbuffers configuration: the table names none; {why.format(cfg=cfg)} -> {ub_name}")
        if cfg in GRAD_SYNC_BF16:
            assumptions.append(GRAD_SYNC_BF16[cfg].format(cfg=cfg))
        if cfg in OPTIM_STATE:
            assumptions.append(OPTIM_STATE[cfg][1].format(cfg=cfg))
        if label.startswith("LLAMA3"):
            assumptions.append("context parallelism 2 (the table's CP); close to held_out_runs.json's Llama 3.1 "
                               "runs (same architecture, NeMo 24.09) -- not an independent model family")
        out.append({
            "case": f"NeMo 24.07 {label} FP8 ({gpus} GPUs)", "group": "NeMo 24.07 FP8", "source": NEMO_SRC,
            "accelerator": "h100-80g", "cluster": "dgx-h100", "devices": gpus, "tp": tp, "pp": pp, "dp": dp,
            "cp": cp, "mbs": mbs, "global_batch": gbs, "interleave": vp, "recompute": recompute,
            "sequence_parallel": tp > 1, "zero1": True, "attention": "flash", "precision": "fp8",
            "tp_comm_overlap": tp > 1, **({"tp_comm_overlap_config": UB[cfg][0]} if tp > 1 else {}),
            "overlap_grad_reduce": True, **({"grad_dtype": "bf16"} if cfg in GRAD_SYNC_BF16 else {}),
            **({"optimizer_state": OPTIM_STATE[cfg][0]} if cfg in OPTIM_STATE else {}),
            "measured_iteration_time_s": round(t, 4),
            "conversion": f"T = GBS x seq / (tokens/s/GPU x GPUs) = {gbs} x {seq} / ({tps} x {gpus}) = {t:.4f} s "
                          f"(tokens/s/GPU published to integer precision)",
            "assumptions": assumptions, "model": model})
    return out


# Megatron-LM README (github NVIDIA/Megatron-LM images/model_table.png, added in commit f2e5db4 "New scaling
# figures on H100 GPUs", Megatron-Core r0.8.0): vocab 131072, seq 4096, H100. Only the rows with pipeline size 1:
# the rows with PP > 1 do not state the interleaving, which sets their pipeline bubble.
MLM_SRC = ("github NVIDIA/Megatron-LM README.md 'Training Speed and Scalability' + images/model_table.png (commit "
           "f2e5db402c44ae309aa6448bcb4ae87e8ae0f5f4, Megatron-Core r0.8.0, H100): model size, heads, hidden, "
           "layers, TP, PP, DP, GPUs, batch size, per-GPU teraFLOP/s")
MLM = [  # (label, heads, hidden, layers, tp, pp, dp, gpus, batch, tflops)
    ("1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8),
    ("7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9),
    ("16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1),
    ("32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6),
]


def megatron_flops(batch, seq, layers, hidden, vocab):
    """megatron/training/training.py num_floating_point_operations at commit f2e5db4 (MHA, ffn = 4h, no SwiGLU):
    12 B s L h^2 ((1 + 1 + s/h) + 4 + V/(2 L h))."""
    return 12 * batch * seq * layers * hidden ** 2 * ((2 + seq / hidden) + 4 + vocab / (2 * layers * hidden))


def mlm_runs():
    out = []
    for label, heads, hidden, layers, tp, pp, dp, gpus, batch, tflops in MLM:
        f = megatron_flops(batch, 4096, layers, hidden, 131072)
        t = f / (tflops * 1e12 * gpus)
        model = gpt(f"mlm-h100-gpt-{label.lower()}", layers, hidden, heads, 4096, vocab=131072)
        out.append({
            "case": f"Megatron-LM H100 GPT {label} ({gpus} GPUs)", "group": "Megatron-Core r0.8 H100",
            "source": MLM_SRC, "accelerator": "h100-80g", "cluster": "dgx-h100", "devices": gpus, "tp": tp,
            "pp": pp, "dp": dp, "mbs": 1, "global_batch": batch, "interleave": 1, "recompute": "none",
            "sequence_parallel": tp > 1, "zero1": True, "attention": "flash", "precision": "bf16",
            "tp_comm_overlap": tp > 1, **({"tp_comm_overlap_config": "te-default"} if tp > 1 else {}),
            "overlap_grad_reduce": True, "measured_iteration_time_s": round(t, 4),
            "conversion": f"T = F / (X x GPUs), F = 12 B s L h^2 (2 + s/h + 4 + V/(2 L h)) (Megatron-LM "
                          f"num_floating_point_operations at the commit) = {f:.4e} FLOP, X = {tflops} TFLOP/s "
                          f"=> {t:.4f} s",
            "assumptions": [
                "micro-batch size 1 (not stated); no interleaving needed (PP = 1)",
                "bf16 (not stated; the MFU column is against the 989 TFLOP/s BF16 peak)",
                "no activation recompute (not stated)",
                "fused attention (Transformer Engine cuDNN attention, Megatron-Core's default) -> flash",
                "--overlap-grad-reduce --overlap-param-gather (README) -> distributed optimizer (zero1) and "
                "overlapped reduce; --tp-comm-overlap (README) with sequence parallelism when TP > 1",
                "GPT architecture of Megatron's defaults: learned positions, LayerNorm, GELU, ffn 4h, biases, "
                "dropout 0.1, tied embeddings"] + ([
                "userbuffers configuration: --tp-comm-overlap without --tp-comm-overlap-cfg (the README names "
                "none); Megatron-LM megatron/training/initialize.py _initialize_tp_communicators then passes "
                "ub_cfgs = {} to Transformer Engine's initialize_ub, so TE's defaults apply (get_default_config, "
                "the same in TE 1.8 to 1.12) -> te-default"] if tp > 1 else []),
            "model": model})
    return out


# MT-NLG 530B on Selene (DGX A100 80 GB, HDR InfiniBand).
MTNLG_SRC = ("Smith et al., 'Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B', arXiv 2201.11990, "
             "Sec. 2-3: 105 layers, hidden 20480, 128 heads, seq 2048, global batch 1920, 8-way TP x 35-way PP, "
             "iteration time 60.1 / 50.2 / 44.4 s on 280 / 350 / 420 DGX A100 nodes (126 / 121 / 113 TFLOP/s per "
             "GPU); the figures as quoted in github cli99/llm-analysis examples/megatron-turing-nlg/README.md")
MTNLG = [(2240, 8, 60.1), (2800, 10, 50.2), (3360, 12, 44.4)]


def mtnlg_runs():
    out = []
    for gpus, dp, t in MTNLG:
        out.append({
            "case": f"MT-NLG 530B A100 ({gpus} GPUs)", "group": "MT-NLG 530B A100", "source": MTNLG_SRC,
            "accelerator": "a100-80g", "cluster": "dgx-a100", "devices": gpus, "tp": 8, "pp": 35, "dp": dp,
            "mbs": 1, "global_batch": 1920, "interleave": 1, "recompute": "full", "sequence_parallel": False,
            "zero1": True, "attention": "standard", "precision": "bf16", "tp_comm_overlap": False,
            "overlap_grad_reduce": False, "measured_iteration_time_s": t,
            "conversion": "none: iteration time stated",
            "assumptions": [
                "micro-batch size 1 (not stated in the quoted text)",
                "full activation recompute (DeepSpeed activation checkpointing; not stated in the quoted text)",
                "DeepSpeed ZeRO stage 1 over the data-parallel ranks (the paper's 3D parallelism) -> zero1; "
                "gradient reduce not overlapped",
                "DeepSpeed 1F1B pipeline without interleaving; no sequence parallelism (2021 code)",
                "standard (materialised) attention, bf16 mixed precision",
                "GPT-2 BPE vocabulary 50257, learned positions, LayerNorm, GELU, ffn 4h, tied embeddings"],
            "model": gpt("mt-nlg-530b", 105, 20480, 128, 2048)})
    return out


def document() -> dict:
    """The held-out-2 document as main writes it (tests compare it with the packaged file)."""
    return {"about": ("Second held-out set of published runs (issue 11). Collected " + COLLECTED + ": NeMo 24.07 "
                      "FP8 pre-training on DGX H100 (12 runs, 10 models), Megatron-Core r0.8 H100 weak scaling (the "
                      "4 rows with PP = 1) and MT-NLG 530B on DGX A100 (3 runs). phaze's constants are never set "
                      "from these; the set was evaluated once, after the mechanism work was finished. Same fields "
                      "as held_out_runs.json; built by scripts/build_held_out2.py. Run data amended since its first "
                      "evaluation, each from the run's own configuration, never from its error: the userbuffers "
                      "configuration (tp_comm_overlap_config), the gradient format (grad_dtype) and Adam's state "
                      "(optimizer_state); and the NeMo 24.07 figures, read since 2026-12-02 from the table's last "
                      "version on NeMo's main branch (8e3d65dc) instead of a side branch's copy of its first "
                      "version (070a0bb)."),
            "runs": nemo_runs() + mlm_runs() + mtnlg_runs()}


def main() -> None:
    doc = document()
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{OUT}: {len(doc['runs'])} runs")


if __name__ == "__main__":
    main()
