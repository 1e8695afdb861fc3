"""A PyTorch module's per-layer operator graph in our terms, captured with ``torch.export`` (``[torch]`` extra).

``import_torch_module("pkg.module:factory")`` calls the factory under ``torch.device("meta")`` (no
weights, no GPU); it returns a module (a transformers model gets ``input_ids`` of microbatch x sequence)
or ``(module, example_args)``. The exported ATen graph is walked node by node:
- GEMMs (``linear``, ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``) become ``Gemm`` with their
  batch, M, N, K; ``scaled_dot_product_attention`` becomes its two products and a softmax;
- vector ops become ``VectorOp`` by kind with their element count (``VECTOR_OPS`` below);
- shape and layout ops (views, transposes, casts, ...) carry no work and are dropped; every other op is
  listed as unmapped with its count and its share of the module's FLOPs (PyTorch's flop formula where it
  has one, else one FLOP per output element).
Nodes are grouped by the block (entry of the module's longest ``ModuleList``) whose code produced them;
blocks whose ops are identical form one layer kind, so the placement sees identical layers. Ops before
the first block form the "embedding", after the last the "head". Edges follow data flow between mapped
ops (through dropped ops) inside one layer.
"""
from __future__ import annotations

import importlib
import math
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, replace

from phaze.errors import ConfigError
from phaze.workload.config import ModelConfig, TrainSetting
from phaze.workload.ops import Gemm, LayerGraph, Op
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
}
LAYOUT_OPS = frozenset((
    "view", "_unsafe_view", "reshape", "transpose", "permute", "unsqueeze", "squeeze", "expand", "slice", "select",
    "alias", "contiguous", "clone", "to", "_to_copy", "_assert_tensor_metadata", "arange", "zeros", "ones",
    "new_ones", "new_zeros", "full", "empty", "detach", "lift_fresh_copy", "t", "flatten", "unflatten", "split",
    "chunk", "split_with_sizes", "cat", "stack", "index", "getitem", "type_as", "expand_as", "view_as", "copy_",
    "scalar_tensor", "sym_size", "_assert_scalar", "item", "zeros_like", "ones_like", "full_like",
))


@dataclass(frozen=True)
class ImportedLayer:
    """One layer kind of the traced module: ``count`` identical occurrences of ``graph`` (forward)."""

    kind: str
    count: int
    graph: LayerGraph


@dataclass(frozen=True)
class UnmappedOp:
    aten_op: str
    count: int
    flops: float
    flops_share: float  # of all the module's forward FLOPs


@dataclass(frozen=True)
class TorchImport:
    """The traced forward; ``model`` is the ModelConfig when the module carries a Hugging Face config
    (then ``analytic_block_gemm_flops`` is our own block's forward GEMM FLOPs at the same shape)."""

    source: str
    microbatch_size: int
    seq_len: int
    layers: tuple[ImportedLayer, ...]
    unmapped: tuple[UnmappedOp, ...]
    total_flops: float
    model: ModelConfig | None = None
    analytic_block_gemm_flops: int | None = None


def _aten_name(target) -> str:
    name = getattr(target, "__name__", str(target))  # e.g. "linear.default"
    return name.split(".")[0]


def _shape(arg) -> tuple[int, ...] | None:
    val = getattr(arg, "meta", {}).get("val") if hasattr(arg, "meta") else None
    return tuple(int(d) for d in val.shape) if val is not None and hasattr(val, "shape") else None


def _gemms(op: str, node, name: str) -> list[Op] | None:
    """The GEMM(s) of one node (attention: with its softmax), or None if the shapes do not fit."""
    e = BYTES_PER_ELEMENT
    if op == "scaled_dot_product_attention":
        q, k, v = (_shape(a) for a in node.args[:3])
        if not (q and k and v) or len(q) < 3:
            return None
        batch = math.prod(q[:-2])
        return [Gemm(f"{name}.scores", batch, q[-2], k[-2], q[-1], e),
                vector_op(f"{name}.softmax", "softmax", batch * q[-2] * k[-2]),
                Gemm(f"{name}.attn_v", batch, q[-2], v[-1], k[-2], e)]
    args = node.args[1:3] if op in ("addmm", "baddbmm") else node.args[:2]
    a, b = (_shape(x) for x in args)
    if not a or not b:
        return None
    if op == "linear":  # weight is (N, K)
        return [Gemm(name, 1, math.prod(a[:-1]), b[0], a[-1], e)]
    if len(a) < 2 or len(b) < 2:
        return None
    out = _shape(node)
    batch = math.prod(out[:-2]) if out and len(out) > 2 else 1
    return [Gemm(name, batch, a[-2], b[-1], a[-1], e)]


def _call_factory(spec: str):
    torch = _torch()
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"--torch {spec!r}: expected MODULE:FACTORY, e.g. mypkg.models:build")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module next to where phaze is run
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"--torch {spec!r}: cannot load the factory ({exc}); check the module path and name") from None
    with torch.device("meta"):
        built = factory()
    return built


def _torch():
    try:
        import torch
    except ImportError:
        from phaze.workload.torch_check import TORCH_MISSING
        raise ConfigError(TORCH_MISSING) from None
    return torch


def _block_prefixes(module) -> list[str]:
    torch = _torch()
    best: tuple[str, int] = ("", 0)
    for name, sub in module.named_modules():
        if isinstance(sub, torch.nn.ModuleList) and len(sub) > best[1]:
            best = (name, len(sub))
    return [f"{best[0]}.{i}" if best[0] else str(i) for i in range(best[1])]


def _owner(node, prefixes: list[str]) -> int | None:
    """Index of the block whose code produced ``node`` (from its module stack), else None."""
    stack = node.meta.get("nn_module_stack") or {}
    for path, _ in reversed(list(stack.values())):
        for i, p in enumerate(prefixes):
            if path == p or path.startswith(p + ".") or path.startswith("L__self__." + p):
                return i
    return None


def _trace(module, args, kwargs):
    torch = _torch()
    try:
        return torch.export.export(module, tuple(args), kwargs, strict=False)
    except Exception as exc:  # torch.export raises many types; the user needs the first line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"torch.export could not capture the module ({first}); make the forward traceable") from None


def import_torch_module(spec: str, microbatch_size: int = 1, seq_len: int = 128) -> TorchImport:
    """Trace ``spec`` ("module:factory") and return its per-layer operator graphs (module docstring)."""
    module, args, kwargs = _build(spec, microbatch_size, seq_len)
    module.eval()  # no dropout RNG in the trace; the training graph's dropout comes from the analytic model
    ep = _trace(module, args, kwargs)
    prefixes = _block_prefixes(module)
    groups, unmapped, total = _walk(ep, prefixes)
    total = total or 1.0
    um = tuple(sorted((UnmappedOp(k, int(c), f, f / total) for k, (c, f) in unmapped.items()),
                      key=lambda u: -u.flops))
    model, analytic = _hf_model(getattr(module, "config", None), spec, microbatch_size, seq_len)
    return TorchImport(spec, microbatch_size, seq_len, _layers(groups, len(prefixes)), um, total, model, analytic)


def _build(spec: str, microbatch_size: int, seq_len: int):
    """(module, example args, example kwargs) from the factory; a transformers model gets input_ids."""
    torch = _torch()
    built = _call_factory(spec)
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module):
        args = tuple(built[1]) if isinstance(built[1], (tuple, list)) else (built[1],)
        return built[0], args, {}
    if not isinstance(built, torch.nn.Module):
        raise ConfigError(f"--torch {spec!r}: the factory must return an nn.Module or (module, example_args)")
    if not hasattr(getattr(built, "config", None), "vocab_size"):
        raise ConfigError(f"--torch {spec!r}: return (module, example_args) so the forward can be traced")
    ids = torch.zeros(microbatch_size, seq_len, dtype=torch.long, device="meta")
    return built, (), {"input_ids": ids, "use_cache": False}


def _label(node, owner, prefixes: list[str], op: str) -> str:
    """An op's name: its module path inside its block (or the model), then the ATen op (not for linear)."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    if isinstance(owner, int):
        path = "" if path == prefixes[owner] else path.split(f"{prefixes[owner]}.", 1)[-1]
    return f"{path}.{op}" if path and op != "linear" else (path or op)


def _node_ops(op: str, node, label: str) -> list[Op] | None:
    """Our ops for one ATen node: a list (empty: not mapped), or None when the node is the identity
    (dropout in eval mode or with p = 0)."""
    if op in GEMM_OPS or op == "scaled_dot_product_attention":
        return _gemms(op, node, label) or []
    if op not in VECTOR_OPS:
        return []
    if op == "dropout" and not (len(node.args) > 2 and node.args[2] and node.args[1]):
        return None
    shape = _shape(node.args[0] if VECTOR_OPS[op] == "reduction" else node)
    return [vector_op(label, VECTOR_OPS[op], math.prod(shape))] if shape is not None else []


def _unmapped_flops(node) -> float:
    """PyTorch's flop formula for the node where it has one, else one FLOP per output element."""
    from torch.utils.flop_counter import flop_registry

    out = _shape(node)
    packet = getattr(node.target, "overloadpacket", None)
    if packet in flop_registry:
        try:
            return float(flop_registry[packet](*[_shape(a) or a for a in node.args], out_shape=out))
        except Exception:  # a formula that wants other arguments: fall back to elements
            pass
    return float(math.prod(out)) if out else 0.0


def _walk(ep, prefixes: list[str]):
    """Group the exported nodes' ops by owner (block index, "embedding" or "head") with their producers;
    also the unmapped ops ({aten op: [count, FLOPs]}) and the total FLOPs."""
    groups: dict[object, list[tuple[Op, list]]] = defaultdict(list)  # owner -> [(op, [(owner, index)])]
    produced: dict = {}  # fx node -> the mapped ops {(owner, index)} its value comes from
    unmapped: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    total, seen_block = 0.0, False
    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        op = _aten_name(node.target)
        owner = _owner(node, prefixes)
        seen_block = seen_block or owner is not None
        if owner is None:
            owner = "head" if seen_block else "embedding"
        inputs = set().union(*(produced.get(a, set()) for a in node.all_input_nodes))
        new_ops = _node_ops(op, node, _label(node, owner, prefixes, op))
        if new_ops:
            first = len(groups[owner])
            for j, o in enumerate(new_ops):  # a node's ops in a chain (attention: scores, softmax, probs x V)
                groups[owner].append((o, [d for d in inputs if d[0] == owner] + [(owner, first + i) for i in range(j)]))
            produced[node] = {(owner, len(groups[owner]) - 1)}
            total += sum(o.flops for o in new_ops)
            continue
        produced[node] = inputs
        if new_ops is None or op in LAYOUT_OPS:
            continue
        flops = _unmapped_flops(node)
        unmapped[f"aten.{op}"][0] += 1
        unmapped[f"aten.{op}"][1] += flops
        total += flops
    return groups, unmapped, total


def _graph(kind: str, entries: list[tuple[Op, list]]) -> LayerGraph:
    """A LayerGraph of the entries; repeated names get '#2', '#3', ... so every op name is unique."""
    edges = sorted({(d[1], i) for i, (_, deps) in enumerate(entries) for d in deps})
    seen: dict[str, int] = defaultdict(int)
    ops = []
    for op, _ in entries:
        seen[op.name] += 1
        ops.append(op if seen[op.name] == 1 else replace(op, name=f"{op.name}#{seen[op.name]}"))
    return LayerGraph(kind, "fwd", tuple(ops), tuple(edges))


def _signature(g: LayerGraph) -> tuple:
    return (tuple((type(o).__name__, getattr(o, "kind", ""), o.flops) for o in g.ops), g.edges)


def _layers(groups: dict, num_blocks: int) -> tuple[ImportedLayer, ...]:
    """Embedding, the blocks grouped by identical op graphs (in order of first appearance), head."""
    out = []
    if groups.get("embedding"):
        out.append(ImportedLayer("embedding", 1, _graph("embedding", groups["embedding"])))
    kinds: dict[tuple, list] = {}
    for i in range(num_blocks):
        g = _graph("block", groups.get(i, []))
        kinds.setdefault(_signature(g), []).append(g)
    for n, graphs in enumerate(kinds.values()):
        kind = "block" if n == 0 else f"block_{n + 1}"
        out.append(ImportedLayer(kind, len(graphs), LayerGraph(kind, "fwd", graphs[0].ops, graphs[0].edges)))
    if groups.get("head"):
        out.append(ImportedLayer("head", 1, _graph("head", groups["head"])))
    return tuple(out)


def _hf_model(hf_config, spec: str, mbs: int, seq: int) -> tuple[ModelConfig | None, int | None]:
    """The ModelConfig of a transformers module (None for other modules) and our block's GEMM FLOPs."""
    if hf_config is None or not hasattr(hf_config, "to_dict"):
        return None, None
    from phaze.workload.graphs import layer_graph
    from phaze.workload.hf import from_hf_config

    model = from_hf_config(hf_config.to_dict(), f"--torch {spec}", spec.rpartition(":")[2])
    setting = TrainSetting(microbatch_size=mbs, seq_len=seq)
    return model, layer_graph(model, setting, "block", "fwd").gemm_flops
