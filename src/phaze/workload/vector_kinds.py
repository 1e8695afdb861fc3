"""Per-element cost of each vector-op kind: lane operations and compulsory memory traffic.

Counts are our own estimates of a straightforward fused kernel (one pass, operands read once, results
written once); activations are 16-bit (2 bytes), dropout masks 1 byte, cross-entropy softmax fp32.
"""
from __future__ import annotations

from phaze.errors import ConfigError
from phaze.workload.ops import VectorOp

# kind -> (flops_per_element, bytes_per_element). Forward kinds:
#   layernorm 8: mean (add), centre (sub), square+accumulate (2), normalise (mul), scale+shift (2) ~ 8
#   rmsnorm 4: square+accumulate (2), multiply by rsqrt, multiply by gain
#   softmax 7: scale, causal/pad mask, running max, subtract, exp, sum, divide (scale+mask fused here)
#   dropout 3: random draw, compare, multiply by mask/(1-p); writes a 1-byte mask (2+2+1 bytes)
#   gelu 14: tanh approximation (x^3, 2 fma, tanh ~6, 1+, 0.5x*) with the bias add fused
#   relu 1: max(x, 0) with the bias add fused as for gelu (OPT)
#   swiglu 6 per output element: silu(gate) = gate*sigmoid(gate) ~5, times up; reads 2 inputs, writes 1
#   geglu 15 per output element: gelu(gate) (14, as above) times up; reads 2 inputs, writes 1 (Gemma)
#   scale 1: multiply by a constant (Gemma's sqrt(hidden) embedding scale)
# Unfused ATen ops of a traced PyTorch module (phaze.workload.torch_import), one kernel each:
#   silu 5: x * sigmoid(x) as in swiglu; elementwise 1: add/sub/mul/div/pow..., reads 2 writes 1 (6 bytes)
#   transcendental 4: rsqrt/exp/tanh/sin/cos by a short polynomial after range reduction; reads 1 writes 1
#   reduction 1 per input element: sum or mean over the input (reads it once; the output is negligible)
#   rotary 3: x*cos + rotate(x)*sin (2 mul + 1 add); cos/sin tables stay on chip
#   add 1: residual add (reads 2, writes 1)
#   dropout_add 4: dropout (3) + residual add (1); reads 2, writes 1 + 1-byte mask
#   embedding_gather 0: pure data movement (read one row element, write it)
#   cross_entropy_max 1: running max over the local vocabulary shard (read logits)
#   cross_entropy 4: subtract max, exp, accumulate, pick target; writes the fp32 exp (2 + 4 bytes)
#   cross_entropy_loss 3 per token: log, subtract, mean (fp32 in, fp32 out)
# Backward kinds ("_bwd"): read the saved tensor(s) and the incoming gradient, write the input gradient.
#   add_bwd / dropout_add_bwd: accumulate the two branch gradients of the residual (+ mask multiply)
#   relu_bwd: pass the gradient where the saved input was positive; geglu_bwd: gelu_bwd (20) + 2 products
#   embedding_gather_bwd: scatter-add of the output gradient into the embedding-table gradient
#   cross_entropy_bwd: softmax = exp/sum minus one-hot, from the saved fp32 exp (4 + 2 bytes)
# Mixture-of-Experts (per element of the tensors named; our estimates of a fused kernel, as above):
#   router 10 per score: softmax or sigmoid (~7), top-k selection and the gate normalisation (~3), fp32 scores
#   permute 0: gather each token's hidden vector into its experts' order (read, write); unpermute 2: scale by
#   the gate probability and add into the token's output (reads the expert output and the token, writes it)
VECTOR_KINDS: dict[str, tuple[float, float]] = {
    "layernorm": (8, 4), "layernorm_bwd": (14, 6),
    "rmsnorm": (4, 4), "rmsnorm_bwd": (8, 6),
    "softmax": (7, 4), "softmax_bwd": (4, 6),
    "dropout": (3, 5), "dropout_bwd": (1, 5),
    "gelu": (14, 4), "gelu_bwd": (20, 6),
    "relu": (1, 4), "relu_bwd": (1, 6),
    "swiglu": (6, 6), "swiglu_bwd": (10, 10),
    "geglu": (15, 6), "geglu_bwd": (22, 10),
    "scale": (1, 4), "scale_bwd": (1, 4),
    "silu": (5, 4), "silu_bwd": (8, 6),
    "elementwise": (1, 6), "elementwise_bwd": (1, 6),
    "transcendental": (4, 4), "transcendental_bwd": (5, 6),
    "reduction": (1, 2), "reduction_bwd": (1, 4),
    "rotary": (3, 4), "rotary_bwd": (3, 4),
    "add": (1, 6), "add_bwd": (1, 6),
    "dropout_add": (4, 7), "dropout_add_bwd": (2, 7),
    "embedding_gather": (0, 4), "embedding_gather_bwd": (1, 6),
    "cross_entropy_max": (1, 2),
    "cross_entropy": (4, 6), "cross_entropy_bwd": (2, 6),
    "cross_entropy_loss": (3, 12),
    "router": (10, 6), "router_bwd": (6, 10),
    "permute": (0, 4), "permute_bwd": (0, 4),
    "unpermute": (2, 6), "unpermute_bwd": (2, 6),
}


def vector_op(name: str, kind: str, elements: int) -> VectorOp:
    """A VectorOp of ``kind`` over ``elements`` values, priced from VECTOR_KINDS."""
    if kind not in VECTOR_KINDS:
        raise ConfigError(f"unknown vector-op kind {kind!r}; known kinds: {', '.join(VECTOR_KINDS)}")
    flops, nbytes = VECTOR_KINDS[kind]
    return VectorOp(name=name, kind=kind, elements=int(elements), flops_per_element=float(flops),
                    bytes_moved=int(round(nbytes * elements)))
