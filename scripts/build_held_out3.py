"""Builds src/phaze/validation/data/held_out3_runs.json: the third held-out set, Megatron-LM's own CI runs with
measured iteration time AND measured peak memory (issue 11).

NVIDIA's Megatron-LM functional tests gpt3_7b_tp1_pp4_memory_speed and gpt3_7b_tp4_pp1_memory_speed train a 7B
GPT for 25 steps on one 8-GPU node (tests/test_utils/recipes/{h100,a100}/gpt.yaml: nodes 1, gpus 8) and keep
the logged metrics as golden values per platform: "iteration-time" (seconds, logged every 2 steps on H100, at
steps 10 and 20 on A100) and "mem-max-allocated-bytes" (PyTorch's allocated_bytes.all.peak, megatron/training/
training.py, written by the TensorBoard writer, which lives on the last rank: megatron/training/global_vars.py;
with Megatron's default rank order the last rank is a device of the last pipeline stage). Collected 2026-12-02
from github NVIDIA/Megatron-LM at commit d98e8a64ddf34856e74b24714e3bedb2f5a39553 (2026-08-22), after the
memory-model changes of that day (the chunk-by-chunk interleaved stash and the LM head's transient logits,
both motivated by Megatron's code, not by these runs); the model's constants are not set from them.
Run: python scripts/build_held_out3.py (writes the JSON; it reads nothing outside this script).
"""
from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/phaze/validation/data/held_out3_runs.json"
COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
CASE_DIR = "tests/functional_tests/test_cases/gpt/gpt3_7b_{}_memory_speed"

# golden values (steps > 2: step 2's time includes the first iteration's start-up; the peak from step 2 on,
# after Adam's state is allocated at the first optimizer step): mean iteration time s, mem-max-allocated-bytes
GOLDEN = {
    ("h100", "tp1_pp4"): ([1.16377, 1.14861, 1.14912, 1.15017, 1.14909, 1.14967, 1.15077, 1.15255, 1.1501, 1.15138,
                           1.15105], 60720852992.0),
    ("h100", "tp4_pp1"): ([1.12221, 1.11139, 1.11368, 1.11791, 1.11551, 1.11592, 1.11576, 1.11374, 1.11451, 1.1149,
                           1.11493], 57143791616.0),
    ("a100", "tp1_pp4"): ([2.9368, 2.94791], 60489064448.0),
    ("a100", "tp4_pp1"): ([2.57769, 2.596], 58188115968.0),
}

# model_config.yaml: 32 layers, hidden 4096, 32 heads, GQA with 8 query groups, untied embeddings, seq 8192,
# NullTokenizer vocab 131073 (padded to a multiple of 128 x TP); Megatron-Core's defaults for the rest
# (megatron/core/transformer/transformer_config.py at the commit: LayerNorm, GELU, biases, hidden and attention
# dropout 0.1, FFN 4h; megatron/training/arguments.py: learned absolute positions)
MODEL = {"name": "megatron-ci-gpt3-7b", "num_layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 16384,
         "vocab": 131073, "seq_len": 8192, "norm": "layernorm", "mlp": "gelu", "position": "learned", "bias": True,
         "dropout": True, "tied_embeddings": False, "max_tp": 8, "vocab_pad_multiple": 128}

PLANS = {  # model_config.yaml: TP, PP, micro-batch, virtual stages (--num-layers-per-virtual-pipeline-stage 1)
    "tp1_pp4": dict(tp=1, pp=4, mbs=1, interleave=8),
    "tp4_pp1": dict(tp=4, pp=1, mbs=2, interleave=1),
}

ASSUMPTIONS = [
    "8 GPUs (the recipe's one node of 8) -> data-parallel 8 / (TP x PP) = 2; global batch 8",
    "model architecture from model_config.yaml and Megatron-Core's defaults at the commit (LayerNorm, GELU, "
    "biases, dropout 0.1, FFN 4h, learned absolute positions)",
    "--bf16 -> bf16 weights, fp32 gradient buffer and reduce (Megatron sets accumulate_allreduce_grads_in_fp32 "
    "for bf16, megatron/training/arguments.py) -> grad_dtype fp32",
    "--use-distributed-optimizer -> zero1; --overlap-grad-reduce --overlap-param-gather -> overlapped DP sync",
    "--transformer-impl transformer_engine: Transformer Engine's fused attention -> flash",
    "no --sequence-parallel and no --tp-comm-overlap: blocking TP all-reduces",
    "--deterministic-mode -> deterministic: PyTorch fills every allocation (torch.use_deterministic_algorithms, "
    "megatron/training/determinism.py), charged (phaze.cost.gpu_determinism)",
    "--deterministic-mode sets NVTE_ALLOW_NONDETERMINISTIC_ALGO=0: on A100 Transformer Engine then runs "
    "FlashAttention-2's deterministic backward, charged (phaze.cost.gpu_attention_determinism)",
    "--no-gradient-accumulation-fusion -> gradient_accumulation_fusion false: each wgrad GEMM writes a fresh "
    "bf16 gradient that DDP's hook adds into the fp32 main_grad, charged (phaze.cost.gpu_layer.grad_accumulate_s)",
    "not modelled, each slowing the measured step: cuDNN's deterministic attention backward on H100, "
    "NCCL_ALGO=Ring, the layer-norm SM margin "
    "(NVTE_FWD/BWD_LAYERNORM_SM_MARGIN 16), --log-params-norm and --log-num-zeros-in-grad (extra passes over the "
    "parameters and gradients), --log-interval 2",
]
A100_NOTE = "A100 part: the 80 GB A100 (the measured peak, 58-60 GB, exceeds the 40 GB part)"


def run(gpu: str, cfg: str) -> dict:
    times, peak = GOLDEN[(gpu, cfg)]
    plan = PLANS[cfg]
    t = sum(times) / len(times)
    d = CASE_DIR.format(cfg)
    return {
        "case": f"Megatron-LM CI gpt3_7b {cfg.replace('_', ' ')} {gpu.upper()} (8 GPUs)",
        "group": f"Megatron-LM CI {gpu.upper()}",
        "source": (f"github NVIDIA/Megatron-LM {d}/model_config.yaml and golden_values_dev_dgx_{gpu}.json (commit "
                   f"{COMMIT}); recipe tests/test_utils/recipes/{gpu}/gpt.yaml (1 node, 8 GPUs)"),
        "accelerator": f"{gpu}-80g", "cluster": f"dgx-{gpu}", "devices": 8,
        "tp": plan["tp"], "pp": plan["pp"], "dp": 8 // (plan["tp"] * plan["pp"]), "mbs": plan["mbs"],
        "global_batch": 8, "interleave": plan["interleave"], "recompute": "none", "sequence_parallel": False,
        "zero1": True, "attention": "flash", "precision": "bf16", "tp_comm_overlap": False,
        "overlap_grad_reduce": True, "deterministic": True, "gradient_accumulation_fusion": False,
        "measured_iteration_time_s": round(t, 5),
        "measured_peak_memory_bytes": peak,
        "conversion": (f"iteration time: mean of the {len(times)} golden 'iteration-time' values after step 2 "
                       f"({', '.join(f'{x:g}' for x in times)} s) = {t:.5f} s; memory: 'mem-max-allocated-bytes' "
                       f"from step 2 on, {peak:.0f} B, on the last rank (last pipeline stage)"),
        "assumptions": ASSUMPTIONS + ([A100_NOTE] if gpu == "a100" else []),
        "model": MODEL,
    }


# Megatron-LM's small GPT functional tests (same commit, tests/functional_tests/test_cases/gpt/gpt3_mcore_te_<name>/
# model_config.yaml and golden_values_dev_dgx_<gpu>.json; one 8-GPU node): 12 layers, hidden 512, 8 heads, sequence
# 1024, micro-batch 4, global batch 32, bf16, Transformer Engine, --attention-backend unfused (standard attention,
# softmax in fp32, probabilities stored in bf16) unless noted. Their step time is host-bound at this size (~0.09 s)
# and not compared; their peak memory is. GPT-2 BPE vocabulary 50257 (vocab.json) unless noted.
# (name, gpu) -> (tp, pp, virtual stages, cp, distributed optimizer, recompute, sequence parallel, attention,
#          model changes, mem-max-allocated-bytes from step 2 on)
SMALL = {
    ("tp1_pp4_vp1", "h100"): (1, 4, 3, 1, False, "none", False, "standard", {}, 4161191424.0),
    ("tp1_pp4_vp1", "a100"): (1, 4, 3, 1, False, "none", False, "standard", {}, 4122704384.0),
    ("tp1_pp1_uniform_full_recompute", "a100"): (1, 1, 1, 1, False, "full", False, "standard", {}, 2534070272.0),
    ("tp1_pp2_rope_embeddings", "a100"): (1, 2, 1, 1, False, "none", False, "standard",
                                          {"position": "rotary"}, 3570001920.0),
    ("tp1_pp4_disable_bias_linear", "a100"): (1, 4, 1, 1, False, "none", False, "standard",
                                              {"bias": False}, 2685510144.0),
    # --swiglu: FFN int(4h x 2/3 / 64) x 64 = 1344 (megatron/training/arguments.py)
    ("tp1_pp4_swiglu", "a100"): (1, 4, 1, 1, False, "none", False, "standard",
                                 {"mlp": "swiglu", "ffn": 1344}, 2684785152.0),
    ("tp1_pp4_untie_embeddings_and_outputs", "a100"): (1, 4, 1, 1, False, "none", False, "standard",
                                                       {"tied_embeddings": False}, 2685758976.0),
    ("tp1_pp4_vp1_dist_optimizer_overlap_grad_reduce", "a100"): (1, 4, 3, 1, True, "none", False, "standard",
                                                                 {}, 3912607232.0),
    ("tp2_pp2", "a100"): (2, 2, 1, 1, False, "none", False, "standard", {}, 1900158464.0),
    ("tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather", "h100"): (4, 1, 1, 1, True, "none", False, "standard",
                                                                          {}, 1543416320.0),
    ("tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather", "a100"): (4, 1, 1, 1, True, "none", False, "standard",
                                                                          {}, 1513530880.0),
    # NullTokenizer --vocab-size 50257, --hidden-dropout 0.0 --attention-dropout 0.0, --attention-backend flash
    ("tp2_pp2_cp2", "h100"): (2, 2, 1, 2, False, "none", True, "flash", {"dropout": False}, 935253504.0),
    ("tp1_pp1_dist_optimizer_no_mmap_bin_files", "h100"): (1, 1, 1, 1, True, "none", False, "standard",
                                                           {}, 4702430720.0),
}
# the small tests' model_config.yaml set --deterministic-mode: true, except the context-parallel one
NOT_DETERMINISTIC_SMALL = {"tp2_pp2_cp2"}
SMALL_MODEL = {"name": "megatron-ci-gpt-small", "num_layers": 12, "hidden": 512, "heads": 8, "ffn": 2048,
               "vocab": 50257, "seq_len": 1024, "norm": "layernorm", "mlp": "gelu", "position": "learned",
               "bias": True, "dropout": True, "tied_embeddings": True, "max_tp": 8, "vocab_pad_multiple": 128}


def small_run(name: str, gpu: str) -> dict:
    tp, pp, v, cp, dist_opt, recompute, sp, attention, changes, peak = SMALL[(name, gpu)]
    overlap = "overlap_grad_reduce" in name
    return {
        "case": f"Megatron-LM CI small GPT {name} {gpu.upper()} (memory)",
        "group": "Megatron-LM CI small GPT (memory only)",
        "source": (f"github NVIDIA/Megatron-LM tests/functional_tests/test_cases/gpt/gpt3_mcore_te_{name}/"
                   f"model_config.yaml and golden_values_dev_dgx_{gpu}.json (commit {COMMIT}); one 8-GPU node"),
        "accelerator": f"{gpu}-80g", "cluster": f"dgx-{gpu}", "devices": 8,
        "tp": tp, "pp": pp, "dp": 8 // (tp * pp * cp), "cp": cp, "mbs": 4, "global_batch": 32, "interleave": v,
        "recompute": recompute, "sequence_parallel": sp, "zero1": dist_opt, "attention": attention,
        "precision": "bf16", "tp_comm_overlap": False, "overlap_grad_reduce": overlap,
        "deterministic": name not in NOT_DETERMINISTIC_SMALL, "gradient_accumulation_fusion": False,
        "measured_peak_memory_bytes": peak,
        "conversion": (f"memory only: 'mem-max-allocated-bytes' from step 2 on, {peak:.0f} B, on the last rank (last "
                       f"pipeline stage); the ~0.09 s step of a 12-layer, 512-wide model is host-bound, not compared"),
        "assumptions": ["model: 12 layers, hidden 512, 8 heads, sequence 1024 and the test's own flags (see "
                        "SMALL in scripts/build_held_out3.py); Megatron-Core's defaults otherwise (LayerNorm, "
                        "GELU, biases, dropout 0.1, learned positions, tied embeddings)",
                        "8 GPUs -> data-parallel 8 / (TP x PP x CP); --bf16 -> fp32 gradients; "
                        "--use-distributed-optimizer -> zero1; --no-gradient-accumulation-fusion (every small "
                        "test sets it) -> gradient_accumulation_fusion false (time only; no memory term)",
                        "not modelled: PyTorch-allocated library workspaces (cuBLAS, Transformer Engine), about "
                        "0.1 GiB, which at this size are a few percent of the peak"],
        "model": dict(SMALL_MODEL, **changes),
    }


def document() -> dict:
    return {
        "about": ("Third held-out set (issue 11): Megatron-LM's CI runs with measured iteration time and measured peak "
                  "memory, collected 2026-12-02 after that day's memory-model changes, which Megatron's code (not "
                  "these runs) motivated; phaze's constants are never set from them. Same fields as "
                  "held_out_runs.json plus measured_peak_memory_bytes; the small-GPT runs give memory only. "
                  "Built by scripts/build_held_out3.py. Run data amended since its first evaluation, from the "
                  "runs' own model_config.yaml, never from their error: gradient_accumulation_fusion false "
                  "(--no-gradient-accumulation-fusion, set by every run here; 2026-12-02, session 15)."),
        "runs": [run(g, c) for g in ("h100", "a100") for c in ("tp1_pp4", "tp4_pp1")] + [small_run(n, g) for n, g in SMALL],
    }


if __name__ == "__main__":
    OUT.write_text(json.dumps(document(), indent=1) + "\n")
    print(f"wrote {OUT}")
