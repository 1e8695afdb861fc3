"""Published measurements as validated, frozen cases (a JSON file of the shape of
``phaze/validation/data/published_measurements.json``), read at the edge with pydantic.

File shape::

  {"source": "<citation>", "notes": ["..."],
   "models": {"<name>": {"layers": L, "hidden": h, "heads": a, "ffn": f, "seq": s, "vocab": V}},
   "iteration_time_s": [{"model": "<name>", "gpus": N, "tp": t, "pp": p, "dp": d, "global_batch": B,
                         "microbatch": b, "pipeline_interleaving": v, "mode": "full", "measured_s": 18.13}],
   "memory_gib_per_gpu": [{"model": "<name>", "tp": t, "pp": p, "microbatch": b, "pipeline_interleaving": v,
                           "params_grads_optimizer": 45.5625, "activations": {"none": 59.25, "seqsel": 9.5625}}]}

Optional per entry: "accelerator" (default "a100-80g"), "cluster" (default "dgx-a100"); memory entries may
give "global_batch" (default: microbatch x 4 x pp, enough microbatches for the 1F1B steady state).
Models are Megatron GPT decoders: GELU, LayerNorm, learned positions, dropout, biases, tied embeddings,
vocabulary padded to a multiple of 128 x t (Megatron's ``--make-vocab-size-divisible-by 128``).
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from phaze.errors import ConfigError
from phaze.validation.case_types import Cases, MemoryCase, TimeCase, validated
from phaze.validation.runs import runs_from_mapping
from phaze.workload.config import ModelConfig

PosInt = Annotated[int, Field(strict=True, gt=0)]
PosFloat = Annotated[float, Field(gt=0)]
# mode -> (recompute, sequence_parallel); the modes of Korthikanti et al. 2022, Table 5 / Figure 1.
MODES: dict[str, tuple[str, bool]] = {
    "none": ("none", False), "seq": ("none", True), "sel": ("selective", False),
    "seqsel": ("selective", True), "full": ("full", False),
}
Mode = Literal["none", "seq", "sel", "seqsel", "full"]
DEFAULT_FILE = "published_measurements.json"
RUNS_FILE = "published_runs.json"  # 23 published runs (SC21, NeMo), the model is checked against
HELD_OUT_FILE = "held_out_runs.json"  # further published runs the model is never tuned on
HELD_OUT2_FILE = "held_out2_runs.json"  # a second held-out set, collected before the second accuracy pass
HELD_OUT3_FILE = "held_out3_runs.json"  # a third: Megatron-LM CI runs with measured peak memory as well as time
HELD_OUT4_FILE = "held_out4_runs.json"  # a fourth: dgxc-benchmarking's Nemotron-4 340B, 128-2048 H100, BF16 / FP8
DEFAULT_FILES = (DEFAULT_FILE, RUNS_FILE)


class _ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    layers: PosInt
    hidden: PosInt
    heads: PosInt
    ffn: PosInt
    seq: PosInt
    vocab: PosInt


class _TimeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    gpus: PosInt
    tp: PosInt
    pp: PosInt
    dp: PosInt
    global_batch: PosInt
    microbatch: PosInt
    pipeline_interleaving: PosInt = 1
    mode: Mode
    measured_s: PosFloat
    accelerator: str = "a100-80g"
    cluster: str = "dgx-a100"


class _MemorySpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    tp: PosInt
    pp: PosInt
    microbatch: PosInt
    pipeline_interleaving: PosInt = 1
    params_grads_optimizer: PosFloat
    activations: dict[Mode, PosFloat]
    global_batch: PosInt | None = None
    accelerator: str = "a100-80g"
    cluster: str = "dgx-a100"


class _FileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    source: str
    notes: list[str] = []
    models: dict[str, _ModelSpec]
    iteration_time_s: list[_TimeSpec] = []
    memory_gib_per_gpu: list[_MemorySpec] = []


def megatron_gpt(name: str, layers: int, hidden: int, heads: int, ffn: int, seq: int, vocab: int,
                 max_tp: int = 8) -> ModelConfig:
    """A Megatron-LM GPT decoder (GELU, LayerNorm, learned positions, dropout, biases, tied embeddings)."""
    return ModelConfig(name=name, num_layers=layers, hidden=hidden, heads=heads, ffn=ffn, vocab=vocab,
                       seq_len=seq, norm="layernorm", mlp="gelu", position="learned", dropout=True, bias=True,
                       tied_embeddings=True, arch="decoder", max_tp=max(8, max_tp), vocab_pad_multiple=128)


def cases_from_mapping(data: Any, source: str) -> Cases:
    """Validate a parsed cases document; every problem is one ConfigError line naming the field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a JSON object with 'source', 'models', 'iteration_time_s' "
                          f"and/or 'memory_gib_per_gpu', got {type(data).__name__}")
    spec = validated(_FileSpec, data, source)

    def model(name: str, tp: int, where: str) -> ModelConfig:
        if name not in spec.models:
            raise ConfigError(f"{source}: {where} names model {name!r}, which is not under 'models' "
                              f"(known: {', '.join(spec.models) or 'none'})")
        m = spec.models[name]
        try:
            return megatron_gpt(name, m.layers, m.hidden, m.heads, m.ffn, m.seq, m.vocab, max_tp=tp)
        except ConfigError as exc:
            raise ConfigError(f"{source}: model {name!r}: {exc}") from None

    time = []
    for i, e in enumerate(spec.iteration_time_s):
        where = f"iteration_time_s[{i}]"
        if e.gpus != e.tp * e.pp * e.dp:
            raise ConfigError(f"{source}: {where}: gpus {e.gpus} != tp x pp x dp = {e.tp * e.pp * e.dp}")
        if e.global_batch % (e.microbatch * e.dp):
            raise ConfigError(f"{source}: {where}: global_batch {e.global_batch} is not a multiple of "
                              f"microbatch x dp = {e.microbatch * e.dp}")
        time.append(TimeCase(model(e.model, e.tp, where), e.gpus, e.tp, e.pp, e.dp, e.global_batch,
                             e.microbatch, e.pipeline_interleaving, e.mode, float(e.measured_s), e.accelerator,
                             e.cluster, group=spec.source.split(",")[0].split("'")[0].strip()))
    memory = []
    for i, e in enumerate(spec.memory_gib_per_gpu):
        where = f"memory_gib_per_gpu[{i}]"
        if not e.activations:
            raise ConfigError(f"{source}: {where}: 'activations' needs at least one mode (e.g. \"none\")")
        gb = e.global_batch or e.microbatch * 4 * e.pp
        if gb % e.microbatch:
            raise ConfigError(f"{source}: {where}: global_batch {gb} is not a multiple of microbatch {e.microbatch}")
        memory.append(MemoryCase(model(e.model, e.tp, where), e.tp, e.pp, e.microbatch, e.pipeline_interleaving,
                                 gb, float(e.params_grads_optimizer),
                                 tuple((k, float(v)) for k, v in e.activations.items()), e.accelerator,
                                 e.cluster))
    if not time and not memory:
        raise ConfigError(f"{source}: no cases; add entries under 'iteration_time_s' or 'memory_gib_per_gpu'")
    return Cases(spec.source, tuple(time), tuple(memory))


def _any_from_mapping(data: Any, source: str) -> Cases:
    """Either file shape: published runs ({"runs": [...]}, ``phaze.validation.runs``) or measurements."""
    if isinstance(data, dict) and "runs" in data:
        return runs_from_mapping(data, source)
    return cases_from_mapping(data, source)


def packaged_cases(name: str) -> Cases:
    """A file shipped in phaze/validation/data."""
    text = resources.files("phaze.validation").joinpath("data", name).read_text(encoding="utf-8")
    return _any_from_mapping(json.loads(text), f"phaze:validation/data/{name}")


def load_cases(path: str | Path | None = None) -> Cases:
    """Cases from a JSON file of the published-measurements or published-runs shape (default: the packaged
    Korthikanti et al. measurements plus the packaged published runs, ``DEFAULT_FILES``)."""
    if path is None:
        out = None
        for name in DEFAULT_FILES:
            c = packaged_cases(name)
            out = c if out is None else out + c
        return out
    from phaze.fileio import read_data_file

    p = Path(path)
    data = read_data_file(p, "cases file", fmt="json")
    return _any_from_mapping(data, str(p))
