"""Builds src/phaze/validation/data/held_out4_runs.json: the fourth held-out set, NVIDIA's dgxc-benchmarking
Nemotron-4 340B pre-training on 128-2048 H100 GPUs, BF16 and FP8 (issue 11).

Source: github NVIDIA/dgxc-benchmarking at commit 35a9aec (release v24.11.1, NeMo 24.09 container), the same
release as published_runs.json's NeMo runs: nemotron/README_340b.md gives the measured training step time of
each run ("Training step time (seconds per step)", the last step of 50), nemotron/nemotron4-340b-synth.yaml
and nemotron/configure.sh give the whole configuration. Collected 2026-12-02 after that day's optimizer-state
change (motivated by NeMo 24.07's Nemotron-340B launcher config in held_out2_runs.json, which sets the same
optim.dtype: bf16), and evaluated once; no model constant is set from these runs. The held-out-2 run at FP8 on
128 GPUs (NeMo 24.07) has nearly this configuration, so the 128-GPU FP8 row is not a surprise to the model.
Run: python scripts/build_held_out4.py (writes the JSON; it reads nothing outside this script).
"""
from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/phaze/validation/data/held_out4_runs.json"
SRC = ("github NVIDIA/dgxc-benchmarking (commit 35a9aec, v24.11.1, NeMo 24.09 container) nemotron/README_340b.md "
       "table 'Nemotron4 340b 24.11 {dtype} (TP=8, PP=8, MBS=1, GA=16, VP=12)', config "
       "nemotron/nemotron4-340b-synth.yaml + nemotron/configure.sh (340b: TP 8, PP 8, VP 12, MBS 1, GBS = 2 x nodes)")

# README_340b.md: training step time (s) on 128, 256, 512, 1024, 2048 H100 GPUs (GBS 32, 64, 128, 256, 512)
STEP_S = {"bf16": (4.61, 4.67, 4.7, 4.73, 4.84), "fp8": (3.16, 3.21, 3.26, 3.34, 3.49)}
GPUS = (128, 256, 512, 1024, 2048)

# nemotron4-340b-synth.yaml: 96 layers, hidden 18432, FFN 73728, 96 heads, 8 query groups, sequence 4096, no bias,
# untied embeddings, rope on half of each head (rotary_percentage 0.5), dropout 0, the 256k tokenizer
# (nemotron_2_256k.model: 256,000 tokens) padded to 128 x TP
MODEL = {"name": "nemotron4-340b", "num_layers": 96, "hidden": 18432, "heads": 96, "ffn": 73728, "vocab": 256000,
         "seq_len": 4096, "norm": "layernorm", "mlp": "gelu", "position": "rotary", "bias": False, "dropout": False,
         "tied_embeddings": False, "max_tp": 8, "vocab_pad_multiple": 128, "rotary_fraction": 0.5, "kv_heads": 8}

NEMO_RULE = ("NeMo's setup_optimization (nemo/collections/nlp/models/language_modeling/megatron_base_model.py, "
             "github NVIDIA/NeMo 46aa1ee, Sep 2024) keeps a master copy in the optimizer dtype with fp8_params "
             "(store_params) and none when the optimizer dtype equals the model's")
COMMON = [
    "model architecture from nemotron4-340b-synth.yaml (layers, hidden, FFN, heads, query groups, sequence, no "
    "bias, untied embeddings, rotary_percentage 0.5, dropout 0); squared-ReLU MLP modelled as 'gelu' and "
    "layernorm1p as layernorm (as published_runs.json's Nemotron-4 15B)",
    "configure.sh (340b): TP 8, PP 8, VP 12, MBS 1, GBS = 2 x nodes -> data-parallel GPUs / 64, 16 micro-batches "
    "per step at every scale",
    "activations_checkpoint_granularity: selective (yaml) -> recompute selective; sequence_parallel True "
    "(configure.sh)",
    "optim distributed_fused_adam (Apex) with overlap_grad_sync and overlap_param_sync -> zero1, overlapped DP "
    "sync; grad_sync_dtype: bf16 -> grad_dtype bf16",
    "model.ub_tp_comm_overlap=True (configure.sh) and no ub_tp_comm_overlap_cfg: Transformer Engine's default "
    "userbuffers configuration -> tp_comm_overlap, te-default",
    "NVTE_FUSED_ATTN=0 for 340b (configure.sh): Transformer Engine runs FlashAttention-2 -> flash",
    "not modelled: overlap_p2p_comm=True / batch_p2p_comm=False (configure.sh), the layer-norm SM margin "
    "(NVTE_FWD/BWD_LAYERNORM_SM_MARGIN from the launcher's conditional_cfgs.py), gc_interval 12, "
    "defer_embedding_wgrad_compute",
]
PRECISION = {
    "bf16": ["BF16: model.fp8=False, +model.fp8_params=False (configure.sh)",
             f"optimizer state bf16: optim.dtype: bf16 (yaml), Apex DistributedFusedAdam's optimizer-state datatype, "
             f"equal to the bf16 model's; {NEMO_RULE} -> optimizer_state bf16 (bf16 m, v, 4 B per parameter)"],
    "fp8": ["FP8: model.fp8=True, fp8_hybrid, +model.fp8_params=True (configure.sh): the linear layers in FP8 with "
            "FP8 weights",
            f"optimizer state bf16-master: optim.dtype: bf16 (yaml) with fp8_params; {NEMO_RULE} -> optimizer_state "
            f"bf16-master (bf16 m, v and master copy, 6 B per parameter)"],
}


def run(dtype: str, i: int) -> dict:
    gpus = GPUS[i]
    gbs, dp = gpus // 4, gpus // 64
    return {
        "case": f"dgxc Nemotron-4 340B {dtype.upper()} ({gpus} GPUs)", "group": f"dgxc Nemotron-4 340B {dtype.upper()}",
        "source": SRC.format(dtype=dtype.upper()), "accelerator": "h100-80g", "cluster": "dgx-h100", "devices": gpus,
        "tp": 8, "pp": 8, "dp": dp, "mbs": 1, "global_batch": gbs, "interleave": 12, "recompute": "selective",
        "sequence_parallel": True, "zero1": True, "attention": "flash", "precision": dtype, "tp_comm_overlap": True,
        "tp_comm_overlap_config": "te-default", "overlap_grad_reduce": True, "grad_dtype": "bf16",
        "optimizer_state": "bf16" if dtype == "bf16" else "bf16-master",
        "measured_iteration_time_s": STEP_S[dtype][i],
        "conversion": "none: training step time stated",
        "assumptions": COMMON + PRECISION[dtype],
        "model": MODEL,
    }


def document() -> dict:
    return {
        "about": ("Fourth held-out set (issue 11): dgxc-benchmarking v24.11.1's Nemotron-4 340B pre-training on "
                  "128-2048 DGX H100 GPUs, BF16 and FP8, with its whole configuration (the release of "
                  "published_runs.json's NeMo runs). Collected 2026-12-02 and evaluated once; phaze's constants are "
                  "never set from these. Same fields as held_out_runs.json. Built by scripts/build_held_out4.py."),
        "runs": [run(dtype, i) for dtype in ("bf16", "fp8") for i in range(len(GPUS))],
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(document(), indent=1) + "\n")
    print(f"wrote {OUT}")
