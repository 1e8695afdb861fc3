"""The walk over a ``torch.export`` graph: each ATen node's ops in our terms, as autodiff ``Node``s grouped
by the layer whose code ran them, with the parameters and the saved activations of each layer.

- GEMMs (``linear``, ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``) become ``Gemm`` with their
  batch, M, N, K: a weight GEMM when an operand is a parameter (its gradient goes to the other operand),
  else an activation GEMM (both operands get one); ``scaled_dot_product_attention`` becomes its two
  products and a softmax;
- vector ops become ``VectorOp`` by kind with their element count (``VECTOR_OPS``);
- shape and layout ops (views, transposes, casts, ...) carry no work and are dropped; every other op is
  listed as unmapped with its count and FLOPs (PyTorch's flop formula where it has one, else one FLOP per
  output element). Unmapped ops are not costed and keep nothing for the backward.
Saved activations (what the backward of a mapped op reads, each tensor once per layer, 2 bytes per float
element, integer tensors at their own width): a weight GEMM keeps its activation operand, an activation
GEMM both operands; norms, activations, transcendental ops and pow keep their activation inputs; a
product of two tensors keeps both (times a scalar: nothing); softmax keeps its output; the loss the fp32
softmax of the logits (4 bytes per element); dropout a 1-byte mask; an embedding lookup its indices; add/sub, masks and
reductions keep nothing (their backward needs only shapes).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from phaze.workload.autodiff import Node
from phaze.workload.ops import Gemm
from phaze.workload.traced import SavedTensor
from phaze.workload.vector_kinds import vector_op

BYTES_PER_ELEMENT = 2  # 16-bit training, as the analytic graphs (the trace itself runs in fp32 on meta)
GEMM_OPS = ("linear", "mm", "addmm", "bmm", "baddbmm", "matmul")
# aten op -> our vector-op kind (vector_kinds.VECTOR_KINDS); element count = output elements, or input
# elements for reductions
VECTOR_OPS = {
    "layer_norm": "layernorm", "native_layer_norm": "layernorm", "rms_norm": "rmsnorm",
    "softmax": "softmax", "_softmax": "softmax", "log_softmax": "softmax", "_log_softmax": "softmax",
    "gelu": "gelu", "relu": "relu", "silu": "silu", "dropout": "dropout", "native_dropout": "dropout",
    "add": "elementwise", "sub": "elementwise", "mul": "elementwise", "div": "elementwise", "neg": "elementwise",
    "pow": "elementwise", "where": "elementwise", "masked_fill": "elementwise", "rsub": "elementwise",
    "rsqrt": "transcendental", "exp": "transcendental", "tanh": "transcendental", "sigmoid": "transcendental",
    "sin": "transcendental", "cos": "transcendental", "sqrt": "transcendental",
    "mean": "reduction", "sum": "reduction", "embedding": "embedding_gather",
    "cross_entropy_loss": "cross_entropy",  # export keeps the loss whole: one pass over the logits
}
LAYOUT_OPS = frozenset((
    "view", "_unsafe_view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "slice", "select",
    "alias", "contiguous", "clone", "to", "_to_copy", "_assert_tensor_metadata", "arange", "zeros", "ones",
    "new_ones", "new_zeros", "full", "empty", "detach", "lift_fresh_copy", "t", "flatten", "unflatten", "split",
    "chunk", "split_with_sizes", "unbind", "cat", "stack", "index", "getitem", "type_as", "expand_as", "view_as", "copy_",
    "scalar_tensor", "sym_size", "_assert_scalar", "item", "zeros_like", "ones_like", "full_like",
))
# ops whose backward reads their activation inputs / their output (module docstring)
SAVES_INPUTS = frozenset(("layer_norm", "native_layer_norm", "rms_norm", "gelu", "relu", "silu",
                          "pow", "rsqrt", "exp", "tanh", "sigmoid", "sin", "cos", "sqrt"))
SAVES_OUTPUT = frozenset(("softmax", "_softmax", "log_softmax", "_log_softmax"))


@dataclass
class Walk:
    """What the walk collects per owner (block index, "embedding" or "head")."""

    nodes: dict = field(default_factory=lambda: defaultdict(list))  # owner -> [Node]
    saved: dict = field(default_factory=lambda: defaultdict(dict))  # owner -> {root name: SavedTensor}
    param_owners: dict = field(default_factory=lambda: defaultdict(set))  # param placeholder -> {owner}
    param_numel: dict = field(default_factory=dict)
    unmapped: dict = field(default_factory=lambda: defaultdict(lambda: [0, 0.0]))  # aten op -> [count, FLOPs]
    total_flops: float = 0.0
    outputs: dict = field(default_factory=lambda: defaultdict(dict))  # owner -> {root name: bytes} read by others


def aten_name(target) -> str:
    name = getattr(target, "__name__", str(target))  # e.g. "linear.default"
    return name.split(".")[0]


def shape_of(arg) -> tuple[int, ...] | None:
    val = getattr(arg, "meta", {}).get("val") if hasattr(arg, "meta") else None
    return tuple(int(d) for d in val.shape) if val is not None and hasattr(val, "shape") else None


def _nbytes(node, scale: float | None = None) -> int:
    """Bytes of ``node``'s value in training: floats at 16 bits, others at their width (``scale`` forces it)."""
    val = node.meta.get("val")
    n = math.prod(shape_of(node) or ())
    if scale is None:
        scale = BYTES_PER_ELEMENT if getattr(val, "dtype", None) is None or val.dtype.is_floating_point \
            else val.dtype.itemsize
    return int(n * scale)


def gemm_operands(op: str, node):
    """The (A, B) fx arguments of a GEMM node (linear: input and weight)."""
    return tuple(node.args[1:3]) if op in ("addmm", "baddbmm") else tuple(node.args[:2])


def _gemm(op: str, node, name: str) -> Gemm | None:
    a, b = (shape_of(x) for x in gemm_operands(op, node))
    if not a or not b:
        return None
    if op == "linear":  # weight is (N, K)
        return Gemm(name, 1, math.prod(a[:-1]), b[0], a[-1], BYTES_PER_ELEMENT)
    if len(a) < 2 or len(b) < 2:
        return None
    out = shape_of(node)
    batch = math.prod(out[:-2]) if out and len(out) > 2 else 1
    return Gemm(name, batch, a[-2], b[-1], a[-1], BYTES_PER_ELEMENT)


class Walker:
    """One pass over ``ep``'s nodes; ``owner_of(node)`` gives a block index or None (before the first block
    the "embedding", after it the "head"); ``label(node, owner, op)`` names an op."""

    def __init__(self, ep, owner_of, label):
        sig = ep.graph_signature
        self.params = set(sig.inputs_to_parameters)
        self.not_activations = self.params | set(sig.inputs_to_buffers) | set(
            getattr(sig, "inputs_to_lifted_tensor_constants", {}) or {})
        self.owner_of, self.label, self.ep = owner_of, label, ep
        self.root: dict = {}  # fx node -> the node whose storage it views (through layout ops)
        self.produced: dict = {}  # fx node -> {(owner, index)} of the mapped ops its value comes from
        self.owner: dict = {}
        self.w = Walk()

    def run(self) -> Walk:
        seen_block = False
        for node in self.ep.graph.nodes:
            if node.op == "placeholder":
                self.root[node] = node
                if node.name in self.params:
                    self.w.param_numel[node.name] = math.prod(shape_of(node) or ())
                continue
            if node.op != "call_function":
                continue
            op = aten_name(node.target)
            owner = self.owner_of(node)
            seen_block = seen_block or owner is not None
            owner = owner if owner is not None else ("head" if seen_block else "embedding")
            self.owner[node] = owner
            self._note_reads(node, owner)
            first = node.args[0] if node.args and hasattr(node.args[0], "meta") else None
            self.root[node] = self.root.get(first, node) if op in LAYOUT_OPS and first is not None else node
            self._visit(op, node, owner)
        return self.w

    def _note_reads(self, node, owner) -> None:
        """Parameters read by ``owner``; values another owner produced (the layer boundary)."""
        for a in node.all_input_nodes:
            r = self.root.get(a, a)
            if r.name in self.params:
                self.w.param_owners[r.name].add(owner)
            prod = self.owner.get(r)
            if prod is not None and prod != owner and r.name not in self.not_activations:
                self.w.outputs[prod][r.name] = _nbytes(r)

    def _dep(self, arg, owner) -> int | None:
        ds = [i for o, i in self.produced.get(arg, ()) if o == owner]
        return max(ds) if ds else None

    def _is_activation(self, arg) -> bool:
        return hasattr(arg, "meta") and self.root.get(arg, arg).name not in self.not_activations

    def _save(self, owner, arg, scale: float | None = None) -> None:
        r = self.root.get(arg, arg)
        if r.name not in self.not_activations and shape_of(r) is not None:
            prod = [i for o, i in self.produced.get(r, ()) if o == owner]
            self.w.saved[owner].setdefault(r.name, SavedTensor(r.name, _nbytes(r, scale), max(prod) if prod else None))

    def _visit(self, op: str, node, owner) -> None:
        inputs = set().union(*(self.produced.get(a, set()) for a in node.all_input_nodes))
        deps = tuple(sorted({i for o, i in inputs if o == owner}))
        group = self.w.nodes[owner]
        new = self._nodes(op, node, owner, deps, len(group))
        if new:
            group.extend(new)
            self.produced[node] = {(owner, len(group) - 1)}
            self.w.total_flops += sum(n.op.flops for n in new)
            self._saves(op, node, owner, new)
            return
        self.produced[node] = inputs
        if new is None or op in LAYOUT_OPS:
            return
        flops = unmapped_flops(node)
        self.w.unmapped[f"aten.{op}"][0] += 1
        self.w.unmapped[f"aten.{op}"][1] += flops
        self.w.total_flops += flops

    def _nodes(self, op: str, node, owner, deps: tuple[int, ...], base: int) -> list[Node] | None:
        """Our nodes for one ATen node: a list (empty: not mapped), or None when the node is the identity
        (dropout in eval mode or with p = 0)."""
        label = self.label(node, owner, op)
        if op == "scaled_dot_product_attention":
            return self._attention(node, owner, deps, base, label)
        if op in GEMM_OPS:
            g = _gemm(op, node, label)
            if g is None:
                return []
            a, b = gemm_operands(op, node)
            if not (self._is_activation(a) and self._is_activation(b)):
                x = a if self._is_activation(a) else b
                return [Node(g, "weight_gemm", deps, (("x", self._dep(x, owner)),))]
            return [Node(g, "act_gemm", deps, (("a", self._dep(a, owner)), ("b", self._dep(b, owner))))]
        if op not in VECTOR_OPS:
            return []
        if op == "dropout" and not (len(node.args) > 2 and node.args[2] and node.args[1]):
            return None
        shape = shape_of(node.args[0] if VECTOR_OPS[op] == "reduction" else node)
        if shape is None:
            return []
        grad = () if op == "embedding" else tuple(("x", d) for d in deps)
        return [Node(vector_op(label, VECTOR_OPS[op], math.prod(shape)), "vector", deps, grad)]

    def _attention(self, node, owner, deps, base: int, name: str) -> list[Node]:
        q, k, v = node.args[:3]
        qs, ks, vs = (shape_of(a) for a in (q, k, v))
        if not (qs and ks and vs) or len(qs) < 3:
            return []
        batch, e = math.prod(qs[:-2]), BYTES_PER_ELEMENT
        dq, dk, dv = (self._dep(a, owner) for a in (q, k, v))
        scores = Node(Gemm(f"{name}.scores", batch, qs[-2], ks[-2], qs[-1], e), "act_gemm",
                      tuple(d for d in (dq, dk) if d is not None), (("q", dq), ("k", dk)))
        soft = Node(vector_op(f"{name}.softmax", "softmax", batch * qs[-2] * ks[-2]), "vector", (base,), (("x", base),))
        av = Node(Gemm(f"{name}.attn_v", batch, qs[-2], vs[-1], ks[-2], e), "act_gemm",
                  tuple(sorted({base + 1} | ({dv} if dv is not None else set()))), (("probs", base + 1), ("v", dv)))
        return [scores, soft, av]

    def _saves(self, op: str, node, owner, new: list[Node]) -> None:
        if op == "scaled_dot_product_attention":
            for a in node.args[:3]:
                self._save(owner, a)
            probs = len(self.w.nodes[owner]) - 2
            self.w.saved[owner][f"{node.name}.probs"] = SavedTensor(
                f"{node.name}.probs", new[1].op.elements * BYTES_PER_ELEMENT, probs)
        elif op in GEMM_OPS:
            for a in gemm_operands(op, node):
                self._save(owner, a)
        elif op in ("mul", "div"):  # a product's backward reads the partner of each operand (none for a scalar)
            tensors = [a for a in node.args[:2] if hasattr(a, "meta")]
            for a in tensors if len(tensors) == 2 else ():
                self._save(owner, a)
        elif op == "cross_entropy_loss":  # the fp32 softmax of the logits (Korthikanti et al.'s 4sbv)
            self._save(owner, node.args[0], 4)
        elif op in SAVES_INPUTS:
            for a in node.all_input_nodes:
                self._save(owner, a)
        elif op in SAVES_OUTPUT:
            self._save(owner, node)
        elif op in ("dropout", "native_dropout"):
            self._save(owner, node, 1)
        elif op == "embedding":
            self._save(owner, node.args[1])


def unmapped_flops(node) -> float:
    """PyTorch's flop formula for the node where it has one, else one FLOP per output element."""
    from torch.utils.flop_counter import flop_registry

    out = shape_of(node)
    packet = getattr(node.target, "overloadpacket", None)
    if packet in flop_registry:
        try:
            return float(flop_registry[packet](*[shape_of(a) or a for a in node.args], out_shape=out))
        except Exception:  # a formula that wants other arguments: fall back to elements
            pass
    return float(math.prod(out)) if out else 0.0


__all__ = ["Walk", "Walker", "aten_name", "shape_of", "unmapped_flops", "GEMM_OPS", "VECTOR_OPS",
           "LAYOUT_OPS", "BYTES_PER_ELEMENT"]
