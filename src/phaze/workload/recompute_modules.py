"""Which ops and which stashed tensors each selective-recompute module covers (Megatron-Core
``--recompute-modules``; ``Runtime.recompute_modules``). "selective" recompute re-runs the listed modules' forward
ops in the backward instead of keeping their outputs: the graph adds those ops to the backward
(``phaze.workload.graphs``), the memory drops the tensors they would have kept (``phaze.workload.memory``).

- core_attn: the attention core (scores, softmax, dropout, probs x V; Korthikanti et al. 2022 sec. 5); a flash
  kernel keeps no score matrix, so it frees nothing there and the kernel's own recompute is already counted.
- layernorm: the norms; their outputs (the next GEMM's input) are not kept.
- mla_up_proj: MLA's query and key/value up projections (and the rotary); the per-head q, k, v are not kept, only
  the latents.
- mlp: a dense block's MLP (FC1, activation, FC2); only its input is kept.
- moe_act: the experts' activation; its output (FC2's input) is not kept.
- shared_experts: the shared experts' MLP; only its input is kept.
"""
from __future__ import annotations

# forward op names each module re-runs
MODULE_OPS: dict[str, tuple[str, ...]] = {
    "core_attn": ("attn_scores", "softmax", "attn_dropout", "attn_v"),
    "layernorm": ("norm1", "norm2", "q_norm", "kv_norm"),
    "mla_up_proj": ("q_up_proj", "q_proj", "kv_up_proj", "rotary"),
    "mlp": ("fc1", "swiglu", "geglu", "gelu", "relu", "fc2"),
    "moe_act": ("expert_swiglu", "expert_geglu", "expert_gelu", "expert_relu"),
    "shared_experts": ("shared_fc1", "shared_swiglu", "shared_geglu", "shared_gelu", "shared_relu", "shared_fc2"),
}
# stashed tensors (``phaze.workload.memory.activation_terms`` names) each module no longer keeps
MODULE_TERMS: dict[str, tuple[str, ...]] = {
    "core_attn": ("softmax.output", "attn_dropout.mask", "attn_dropout.output"),
    "layernorm": ("qkv.input", "fc1.input", "router.input", "shared_fc1.input"),
    "mla_up_proj": ("q,k", "v"),
    "mlp": ("fc1.output", "fc2.input"),
    "moe_act": ("expert_fc2.input",),
    "shared_experts": ("shared_fc1.output", "shared_fc2.input"),
}


def recomputed_ops(modules) -> frozenset[str]:
    return frozenset(op for m in modules for op in MODULE_OPS[m])


def freed_terms(modules) -> frozenset[str]:
    return frozenset(t for m in modules for t in MODULE_TERMS[m])
