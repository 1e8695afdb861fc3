"""A model traced from a PyTorch module, planned like a zoo model (``torch_import`` builds it).

The trace gives, per layer kind (embedding, the identical blocks, head), the forward ops as autodiff
``Node``s (a GEMM with a parameter operand is a weight GEMM, a product of two activations an activation
GEMM), the parameters each layer reads and the activations its backward reads. From these:
- the backward graph is derived by ``autodiff.backward`` exactly as for our own graphs (recompute "full"
  re-runs every forward op of a block, "selective" the activation GEMMs and the vector ops between them,
  i.e. the attention core);
- memory: weights/gradients/optimizer state from the parameter counts (``memory.OPTIMIZERS``); stashed
  activations = the tensors the backward reads (each stored once), minus those a selective recompute
  re-creates; with full recompute only the block's inputs are kept (as Korthikanti et al. keep 2sbh).
A traced graph is not sharded: it plans at tensor-parallel width 1 only, and at the microbatch size and
sequence length it was traced at (re-import with other --mbs/--seq for others); other settings are refused.
"""
from __future__ import annotations

from dataclasses import dataclass

from phaze.errors import ConfigError
from phaze.workload.autodiff import ForwardBuilder, Node, backward
from phaze.workload.config import LAYER_KINDS
from phaze.workload.ops import Gemm, LayerGraph, VectorOp

TRACED_KEY = "phaze_traced_model"  # marks a JSON file written by `import-model --torch ... -o`
FORMAT_VERSION = 1
ROLES = ("weight_gemm", "act_gemm", "vector")  # the autodiff roles a traced forward uses


@dataclass(frozen=True)
class SavedTensor:
    """An activation the backward reads: ``producer`` = index of the node of this layer that makes it
    (None: it enters the layer from outside)."""

    name: str
    nbytes: int
    producer: int | None


@dataclass(frozen=True)
class TracedLayer:
    nodes: tuple[Node, ...]
    params: int
    saved: tuple[SavedTensor, ...]
    tied_params: int = 0  # parameters this layer shares with an earlier one (a tied LM head)


@dataclass(frozen=True)
class TracedModel:
    """The pipeline sees embedding, ``num_layers`` identical blocks, head; ``boundary_bytes`` is what one
    block passes to the next (and its gradient back) per microbatch."""

    name: str
    source: str
    microbatch_size: int
    seq_len: int
    num_layers: int
    embedding: TracedLayer
    block: TracedLayer
    head: TracedLayer
    total_params: int
    boundary_bytes: int
    max_tp: int = 1

    def layer_sequence(self) -> tuple[str, ...]:
        return ("embedding",) + ("block",) * self.num_layers + ("head",)

    def valid_tp(self, tp: int) -> bool:
        return tp == 1

    @property
    def tp_rule(self) -> str:
        return "a traced model is not sharded: use tensor-parallel width 1"

    def layer(self, kind: str) -> TracedLayer:
        if kind not in LAYER_KINDS:
            raise ConfigError(f"unknown layer kind {kind!r}; use one of embedding, block, head")
        return getattr(self, kind)

    def check_setting(self, setting) -> None:
        """Raise ConfigError unless ``setting`` is one this trace describes (module docstring)."""
        if setting.tp != 1:
            raise ConfigError(f"{self.name} is a traced model and plans at tensor-parallel width 1 only "
                              f"(its graph is not sharded); use --tp 1")
        if setting.microbatch_size != self.microbatch_size or setting.seq_len != self.seq_len:
            raise ConfigError(f"{self.name} was traced at microbatch {self.microbatch_size}, sequence "
                              f"{self.seq_len}; use --mbs {self.microbatch_size} and that sequence, or re-import "
                              f"with --mbs/--seq")
        if setting.bytes_per_element != 2:
            raise ConfigError(f"{self.name}: traced models are costed in 16-bit (bytes_per_element 2)")


def microbatch_choices(model, requested) -> tuple[int, ...]:
    """The microbatch sizes a plan may use: ``requested``, or a traced model's own one if requested."""
    requested = tuple(requested)
    if not isinstance(model, TracedModel):
        return requested
    if model.microbatch_size not in requested:
        raise ConfigError(f"{model.name} was traced at microbatch {model.microbatch_size}, which --mbs "
                          f"{','.join(map(str, requested))} leaves out; include it or re-import with --mbs")
    return (model.microbatch_size,)


def selective_set(nodes: tuple[Node, ...]) -> frozenset[int]:
    """The attention core: activation GEMMs, and the vector ops on a path of vector ops between two of them
    (scale, mask, softmax)."""
    core = {i for i, n in enumerate(nodes) if n.role == "act_gemm"}
    succs: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for d in n.deps:
            succs[d].append(i)
    after: set[int] = set()  # vector ops fed (through vector ops) by an activation GEMM
    for i, n in enumerate(nodes):
        if n.role == "vector" and any(d in core or d in after for d in n.deps):
            after.add(i)
    before: set[int] = set()  # vector ops feeding (through vector ops) an activation GEMM
    for i in reversed(range(len(nodes))):
        if nodes[i].role == "vector" and any(j in core or j in before for j in succs[i]):
            before.add(i)
    return frozenset(core | (after & before))


def traced_layer_graph(model: TracedModel, setting, layer: str, direction: str) -> LayerGraph:
    model.check_setting(setting)
    nodes = model.layer(layer).nodes
    if direction == "fwd":
        return ForwardBuilder(list(nodes)).graph(layer)
    recompute: frozenset[int] = frozenset()
    if layer == "block" and setting.recompute == "full":
        recompute = frozenset(range(len(nodes)))
    elif layer == "block" and setting.recompute == "selective":
        recompute = selective_set(nodes)
    return backward(list(nodes), layer, 1, False, recompute)


def traced_activation_bytes(model: TracedModel, setting, layer: str) -> tuple[int, int]:
    """(kept, total) stashed activation bytes per microbatch of ``layer`` under ``setting.recompute``."""
    lay = model.layer(layer)
    total = sum(t.nbytes for t in lay.saved)
    if layer != "block" or setting.recompute == "none":
        return total, total
    if setting.recompute == "full":
        return sum(t.nbytes for t in lay.saved if t.producer is None), total
    core = selective_set(lay.nodes)
    return sum(t.nbytes for t in lay.saved if t.producer not in core), total


# ---- plain JSON (import-model --torch ... -o traced.json) ----

def _op_to_dict(op) -> dict:
    if isinstance(op, Gemm):
        return {"type": "gemm", "name": op.name, "batch": op.batch, "m": op.m, "n": op.n, "k": op.k,
                "bytes_per_element": op.bytes_per_element}
    if isinstance(op, VectorOp):
        return {"type": "vector", "name": op.name, "kind": op.kind, "elements": op.elements}
    raise ConfigError(f"a traced graph holds no collectives; got {op.name!r}")


def _op_from_dict(d: dict):
    from phaze.workload.vector_kinds import vector_op

    if d["type"] == "gemm":
        return Gemm(str(d["name"]), int(d["batch"]), int(d["m"]), int(d["n"]), int(d["k"]), int(d["bytes_per_element"]))
    if d["type"] == "vector":
        return vector_op(str(d["name"]), str(d["kind"]), int(d["elements"]))
    raise ConfigError(f"unknown op type {d['type']!r}")


def _layer_to_dict(lay: TracedLayer) -> dict:
    return {"params": lay.params, "tied_params": lay.tied_params,
            "ops": [dict(_op_to_dict(n.op), role=n.role, deps=list(n.deps),
                         grad_to=[[a, p] for a, p in n.grad_to]) for n in lay.nodes],
            "saved": [{"name": t.name, "bytes": t.nbytes, "producer": t.producer} for t in lay.saved]}


def _layer_from_dict(d: dict) -> TracedLayer:
    nodes = tuple(Node(_op_from_dict(o), o["role"], tuple(int(x) for x in o["deps"]),
                       tuple((str(a), None if p is None else int(p)) for a, p in o["grad_to"]))
                  for o in d["ops"])
    saved = tuple(SavedTensor(str(t["name"]), int(t["bytes"]), None if t["producer"] is None else int(t["producer"]))
                  for t in d["saved"])
    return TracedLayer(nodes, int(d["params"]), saved, int(d.get("tied_params", 0)))


def traced_to_dict(model: TracedModel) -> dict:
    return {TRACED_KEY: FORMAT_VERSION, "name": model.name, "source": model.source,
            "microbatch_size": model.microbatch_size, "seq_len": model.seq_len, "num_layers": model.num_layers,
            "total_params": model.total_params, "boundary_bytes": model.boundary_bytes,
            "layers": {k: _layer_to_dict(model.layer(k)) for k in LAYER_KINDS}}


def traced_from_dict(data: dict, source: str) -> TracedModel:
    """Read back ``traced_to_dict``'s output; a malformed file is refused in one line."""
    if data.get(TRACED_KEY) != FORMAT_VERSION:
        raise ConfigError(f"{source}: traced-model format {data.get(TRACED_KEY)!r} is not {FORMAT_VERSION}; "
                          f"re-import with `phaze import-model --torch MODULE:FACTORY -o FILE`")
    try:
        layers = {k: _layer_from_dict(data["layers"][k]) for k in LAYER_KINDS}
        out = TracedModel(str(data["name"]), str(data["source"]), int(data["microbatch_size"]),
                          int(data["seq_len"]), int(data["num_layers"]), layers["embedding"], layers["block"],
                          layers["head"], int(data["total_params"]), int(data["boundary_bytes"]))
        for lay in layers.values():  # deps and gradient targets point backwards; roles are autodiff's
            if any(not 0 <= d < i for i, n in enumerate(lay.nodes) for d in n.deps):
                raise ValueError("an op depends on a later op")
            if any(p is not None and not 0 <= p < i for i, n in enumerate(lay.nodes) for _, p in n.grad_to):
                raise ValueError("a gradient goes to a later op")
            if any(n.role not in ROLES for n in lay.nodes):
                raise ValueError(f"roles must be one of {', '.join(ROLES)}")
    except (KeyError, TypeError, ValueError, AttributeError, ConfigError) as exc:
        raise ConfigError(f"{source}: not a valid traced model ({type(exc).__name__}: {exc}); re-import it") from None
    return out


__all__ = ["TracedModel", "TracedLayer", "SavedTensor", "microbatch_choices", "traced_layer_graph",
           "traced_activation_bytes", "traced_to_dict", "traced_from_dict", "TRACED_KEY", "selective_set"]
