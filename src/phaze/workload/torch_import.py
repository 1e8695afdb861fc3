"""A PyTorch module's per-layer operator graph in our terms, captured with ``torch.export`` (``[torch]`` extra).

``import_torch_module("pkg.module:factory")`` calls the factory under ``torch.device("meta")`` (no
weights, no GPU); it returns a module (a transformers model gets ``input_ids`` of microbatch x sequence
and the same ids as ``labels``, so the trace holds the training loss) or ``(module, example_args)`` (the
first input's first two dimensions are then the microbatch size and the sequence length). The
exported ATen graph is walked node by node (``torch_walk``: which ops map to what, what is kept for the
backward). Nodes are grouped by the block (entry of the module's longest ``ModuleList``) whose code
produced them; blocks whose ops, parameters and saved tensors are identical form one layer kind, so the
placement sees identical layers. Ops before the first block form the "embedding", after the last the
"head". Edges follow data flow between mapped ops (through dropped ops) inside one layer. With one block
kind the result also carries a ``TracedModel`` that plan/evaluate/search take like a zoo model.
"""
from __future__ import annotations

import importlib
import os
import sys
from collections import defaultdict
from dataclasses import dataclass, replace

from phaze.errors import ConfigError
from phaze.workload.autodiff import ForwardBuilder, Node
from phaze.workload.config import ModelConfig
from phaze.workload.runtime import TrainSetting
from phaze.workload.ops import LayerGraph
from phaze.workload.traced import TracedLayer, TracedModel

@dataclass(frozen=True)
class ImportedLayer:
    """One layer kind of the traced module: ``count`` identical occurrences of ``graph`` (forward)."""

    kind: str
    count: int
    graph: LayerGraph
    traced: TracedLayer


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
    traced_model: TracedModel | None = None
    not_plannable: str = ""  # why there is no traced_model (one line), else ""


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
    from phaze.workload.torch_walk import Walker

    module, args, kwargs = _build(spec, microbatch_size, seq_len)
    if args:  # the example inputs set the shapes: microbatch and sequence = the first input's first two dims
        first = next((a for a in args if hasattr(a, "shape") and len(a.shape) >= 2), None)
        if first is None:
            raise ConfigError(f"--torch {spec!r}: the first example input must be at least (microbatch, sequence, ...)")
        microbatch_size, seq_len = int(first.shape[0]), int(first.shape[1])
    module.eval()  # no dropout RNG in the trace (a traced model has no dropout ops)
    ep = _trace(module, args, kwargs)
    prefixes = _block_prefixes(module)
    walk = Walker(ep, lambda node: _owner(node, prefixes), lambda n, o, op: _label(n, o, prefixes, op)).run()
    total = walk.total_flops or 1.0
    um = tuple(sorted((UnmappedOp(k, int(c), f, f / total) for k, (c, f) in walk.unmapped.items()),
                      key=lambda u: -u.flops))
    model, analytic = _hf_model(getattr(module, "config", None), spec, microbatch_size, seq_len)
    layers = _layers(walk, len(prefixes))
    traced, why = _traced_model(spec, microbatch_size, seq_len, layers, walk)
    return TorchImport(spec, microbatch_size, seq_len, layers, um, total, model, analytic, traced, why)


def traced_model_of(spec: str, microbatch_size: int = 1, seq_len: int = 128) -> TracedModel:
    """The plannable model of a traced module; refused in one line when the trace has no single block kind."""
    res = import_torch_module(spec, microbatch_size, seq_len)
    if res.traced_model is None:
        raise ConfigError(f"--torch {spec}: cannot be planned: {res.not_plannable}")
    return res.traced_model


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
    return built, (), {"input_ids": ids, "labels": ids, "use_cache": False}


def _label(node, owner, prefixes: list[str], op: str) -> str:
    """An op's name: its module path inside its block (or the model), then the ATen op (not for linear)."""
    stack = node.meta.get("nn_module_stack") or {}
    path = list(stack.values())[-1][0] if stack else ""
    if isinstance(owner, int):
        path = "" if path == prefixes[owner] else path.split(f"{prefixes[owner]}.", 1)[-1]
    return f"{path}.{op}" if path and op != "linear" else (path or op)


def _unique_names(nodes: list[Node]) -> tuple[Node, ...]:
    """Repeated op names get '#2', '#3', ... so every op name of a layer is unique."""
    seen: dict[str, int] = defaultdict(int)
    out = []
    for n in nodes:
        seen[n.op.name] += 1
        out.append(n if seen[n.op.name] == 1 else replace(n, op=replace(n.op, name=f"{n.op.name}#{seen[n.op.name]}")))
    return tuple(out)


def _traced_layer(walk, owner, tied: int = 0) -> TracedLayer:
    params = sum(walk.param_numel[p] for p, owners in walk.param_owners.items() if owner in owners)
    return TracedLayer(_unique_names(walk.nodes.get(owner, [])), params,
                       tuple(walk.saved.get(owner, {}).values()), tied)


def _signature(lay: TracedLayer) -> tuple:
    """What makes two blocks the same layer: ops with their roles and data flow, parameters, saved bytes."""
    return (tuple((type(n.op).__name__, getattr(n.op, "kind", ""), n.op.flops, n.role, n.deps) for n in lay.nodes),
            lay.params, tuple(sorted((t.nbytes, -1 if t.producer is None else t.producer) for t in lay.saved)))


def _layers(walk, num_blocks: int) -> tuple[ImportedLayer, ...]:
    """Embedding, the blocks grouped by identical op graphs (in order of first appearance), head."""
    out = []
    if walk.nodes.get("embedding"):
        lay = _traced_layer(walk, "embedding")
        out.append(ImportedLayer("embedding", 1, ForwardBuilder(list(lay.nodes)).graph("embedding"), lay))
    kinds: dict[tuple, list] = {}
    for i in range(num_blocks):
        lay = _traced_layer(walk, i)
        kinds.setdefault(_signature(lay), []).append(lay)
    for n, lays in enumerate(kinds.values()):
        kind = "block" if n == 0 else f"block_{n + 1}"
        out.append(ImportedLayer(kind, len(lays), ForwardBuilder(list(lays[0].nodes)).graph(kind), lays[0]))
    if walk.nodes.get("head"):
        tied = sum(walk.param_numel[p] for p, owners in walk.param_owners.items()
                   if "head" in owners and len(owners) > 1)
        lay = _traced_layer(walk, "head", tied)
        out.append(ImportedLayer("head", 1, ForwardBuilder(list(lay.nodes)).graph("head"), lay))
    return tuple(out)


def _traced_model(spec: str, mbs: int, seq: int, layers: tuple[ImportedLayer, ...], walk):
    """(TracedModel, "") when the placement can take the trace (one block kind), else (None, why)."""
    blocks = [l for l in layers if l.kind.startswith("block")]
    if not blocks:
        return None, "no repeated blocks (no nn.ModuleList) in the module, so no layers to place"
    if len(blocks) > 1:
        found = ", ".join(f"{l.kind} x{l.count}" for l in blocks)
        return None, f"the placement needs identical blocks, the trace has several kinds ({found})"
    by_kind = {l.kind: l.traced for l in layers}
    empty = TracedLayer((), 0, ())
    boundary = sum(walk.outputs.get(0, {}).values())  # what block 0 hands on, per microbatch
    name = spec.rpartition(":")[2]
    return TracedModel(name, spec, mbs, seq, blocks[0].count, by_kind.get("embedding", empty), blocks[0].traced,
                       by_kind.get("head", empty), sum(walk.param_numel.values()), boundary), ""


def _hf_model(hf_config, spec: str, mbs: int, seq: int) -> tuple[ModelConfig | None, int | None]:
    """The ModelConfig of a transformers module (None for other modules) and our block's GEMM FLOPs."""
    if hf_config is None or not hasattr(hf_config, "to_dict"):
        return None, None
    from phaze.workload.graphs import layer_graph
    from phaze.workload.hf import from_hf_config

    model = from_hf_config(hf_config.to_dict(), f"--torch {spec}", spec.rpartition(":")[2])
    setting = TrainSetting(microbatch_size=mbs, seq_len=seq)
    return model, layer_graph(model, setting, "block", "fwd").gemm_flops
