"""The model zoo (data in ``zoo/models.yaml``) and user model files (.yaml/.yml/.json), validated at the edge.

Note: ``gpt3-175b`` keeps the paper's vocabulary (50257); the comparison with Korthikanti et al. 2022
uses vocab 51200 and overrides it with ``dataclasses.replace(get_model("gpt3-175b"), vocab=51200)``.
"""
from __future__ import annotations

import difflib
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from phaze.errors import ConfigError
from phaze.fileio import read_data_file
from phaze.filefields import got, hf_hint
from phaze.workload.config import ModelConfig
from phaze.workload.hf import HF_PREFIX, from_hf_config, is_hf_config, model_name
from phaze.workload.traced import TRACED_KEY, TracedModel, traced_from_dict

TORCH_PREFIX = "torch:"  # --model torch:MODULE:FACTORY traces a PyTorch module (phaze.workload.torch_import)

FILE_SUFFIXES = (".yaml", ".yml", ".json")
PosInt = Annotated[int, Field(strict=True, gt=0)]
StrictBool = Annotated[bool, Field(strict=True)]


class _ModelSpec(BaseModel):
    """Pydantic mirror of ModelConfig: the schema a user file must follow (unknown fields rejected)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str | None = None
    num_layers: PosInt
    hidden: PosInt
    heads: PosInt
    ffn: PosInt
    vocab: PosInt
    seq_len: PosInt
    kv_heads: PosInt | None = None
    norm: Literal["layernorm", "rmsnorm"] = "layernorm"
    mlp: Literal["gelu", "relu", "swiglu", "geglu"] = "gelu"
    tied_embeddings: Annotated[bool, Field(strict=True)] = True
    arch: Literal["encoder", "decoder"] = "decoder"
    position: Literal["learned", "rotary"] = "learned"
    bias: Annotated[bool, Field(strict=True)] = True
    dropout: Annotated[bool, Field(strict=True)] = True
    max_tp: PosInt = 8
    vocab_pad_multiple: PosInt = 1
    embed_proj_dim: PosInt | None = None
    head_dim_override: PosInt | None = None
    qkv_bias: StrictBool | None = None
    out_bias: StrictBool | None = None
    mlp_bias: StrictBool | None = None
    head_bias: StrictBool | None = None
    parallel_block: StrictBool = False
    shared_norm: StrictBool = False
    rotary_fraction: Annotated[float, Field(gt=0, le=1)] = 1.0
    sliding_window: PosInt | None = None
    extra_positions: Annotated[int, Field(strict=True, ge=0)] = 0
    final_norm: StrictBool = True
    embed_scale: StrictBool = False
    num_experts: Annotated[int, Field(strict=True, ge=0)] = 0
    experts_per_token: Annotated[int, Field(strict=True, ge=0)] = 0
    moe_ffn: PosInt | None = None
    shared_experts: Annotated[int, Field(strict=True, ge=0)] = 0
    shared_ffn: PosInt | None = None
    first_dense_layers: Annotated[int, Field(strict=True, ge=0)] = 0
    moe_layer_freq: PosInt = 1
    router_scoring: Literal["softmax", "sigmoid"] = "softmax"
    router_bias: StrictBool = False
    expert_bias: StrictBool = False
    q_lora_rank: Annotated[int, Field(strict=True, ge=0)] = 0
    kv_lora_rank: Annotated[int, Field(strict=True, ge=0)] = 0
    qk_nope_head_dim: Annotated[int, Field(strict=True, ge=0)] = 0
    qk_rope_head_dim: Annotated[int, Field(strict=True, ge=0)] = 0
    v_head_dim: Annotated[int, Field(strict=True, ge=0)] = 0
    mtp_layers: Annotated[int, Field(strict=True, ge=0)] = 0
    sliding_window_period: Annotated[int, Field(strict=True, ge=0)] = 0
    attention_sinks: StrictBool = False
    qk_norm: StrictBool = False
    shared_expert_gate: StrictBool = False


def _describe(err: dict[str, Any]) -> str:
    """One pydantic error as "field 'x': what is wrong; how to fix it"."""
    field = ".".join(str(p) for p in err["loc"]) or "<top level>"
    kind = err["type"]
    if kind == "missing":
        return f"missing required field '{field}'; add it"
    if kind in ("greater_than", "int_type", "int_parsing", "int_from_float"):
        return f"field '{field}' must be a positive integer, got {got(err.get('input'))}"
    return f"field '{field}': {err['msg']} (got {got(err.get('input'))}); fix the value"


def _describe_all(errors: list[dict[str, Any]]) -> str:
    """Every pydantic error of a file, each field once; unknown fields together, with the allowed list once."""
    extra = [".".join(map(str, e["loc"])) for e in errors if e["type"] == "extra_forbidden"]
    out, seen = [], set()
    if extra:
        out.append(f"unknown field{'s' if len(extra) > 1 else ''} {', '.join(map(repr, extra))} (allowed: "
                   f"{', '.join(_ModelSpec.model_fields)})")
    for e in errors:
        field = e["loc"][0] if e["loc"] else None
        if e["type"] == "extra_forbidden" or field in seen:
            continue
        seen.add(field)
        out.append(_describe(e))
    return "; ".join(out)


def model_from_mapping(data: Any, source: str, default_name: str) -> ModelConfig:
    """Validate a mapping of ModelConfig fields; every problem becomes a one-line ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of model fields (name: value), got {type(data).__name__}")
    hf_hint(data, source)
    try:
        spec = _ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: " + _describe_all(exc.errors())) from None
    fields = spec.model_dump()
    fields["name"] = fields["name"] or default_name
    try:
        return ModelConfig(**fields)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def load_model_file(path: str | Path, hf: bool = False) -> ModelConfig:
    """Read one model from a .yaml/.yml/.json file whose keys are ModelConfig field names, or a Hugging
    Face config.json (``hf`` = True requires one)."""
    p = Path(path)
    if p.suffix.lower() not in FILE_SUFFIXES:
        raise ConfigError(f"{p}: model files must end in .yaml, .yml or .json")
    data = read_data_file(p, "model file")
    if isinstance(data, dict) and TRACED_KEY in data and not hf:
        return traced_from_dict(data, str(p))
    if not hf:
        return model_from_mapping(data, str(p), default_name=model_name(p))
    if not is_hf_config(data):
        raise ConfigError(f"{p}: no 'model_type' field, so not a Hugging Face config.json; pass a config.json")
    return from_hf_config(data, str(p), model_name(p))


def load_hf_config(path: str | Path) -> ModelConfig:
    """A Hugging Face config.json from disk (named after its folder if the file is called config.json)."""
    return load_model_file(path, hf=True)


def model_to_yaml(model: ModelConfig, comment: str = "") -> str:
    """A model file for ``model``: its name and every field that differs from the default (read back by
    ``load_model_file`` into an equal ModelConfig)."""
    defaults = {k: f.default for k, f in _ModelSpec.model_fields.items() if not f.is_required()}
    fields = {"name": model.name}
    for key in _ModelSpec.model_fields:
        value = getattr(model, key)
        if key != "name" and (key not in defaults or value != defaults[key]):
            fields[key] = value
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + yaml.safe_dump(fields, sort_keys=False)


@lru_cache(maxsize=1)
def _zoo() -> dict[str, ModelConfig]:
    text = resources.files("phaze.workload").joinpath("zoo/models.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    return {name: model_from_mapping({**fields, "name": name}, f"zoo:{name}", name) for name, fields in raw.items()}


def list_models() -> list[ModelConfig]:
    """Every model of the built-in zoo, in file order."""
    return list(_zoo().values())


def get_model(name_or_path: str | Path | ModelConfig) -> ModelConfig:
    """A zoo model by name (case-insensitive), a model read from a .yaml/.yml/.json file, or
    ``hf:PATH``: a Hugging Face config.json, or ``torch:MODULE:FACTORY``: a PyTorch module traced (a
    transformers model at microbatch 1 and sequence 128, else at its example inputs' shapes; other shapes:
    ``import-model --torch ... --mbs --seq -o FILE.json``)."""
    if isinstance(name_or_path, (ModelConfig, TracedModel)):
        return name_or_path
    key = str(name_or_path)
    if key.startswith(TORCH_PREFIX):
        from phaze.workload.torch_import import traced_model_of

        return traced_model_of(key[len(TORCH_PREFIX):])
    if key.startswith(HF_PREFIX):
        return load_model_file(key[len(HF_PREFIX):], hf=True)
    if Path(key).suffix.lower() in FILE_SUFFIXES or Path(key).is_file():
        return load_model_file(key)
    zoo = _zoo()
    if key.lower() in zoo:
        return zoo[key.lower()]
    close = difflib.get_close_matches(key.lower(), zoo, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise ConfigError(
        f"unknown model '{key}'; {hint}known models: {', '.join(zoo)} (or pass a .yaml/.yml/.json file, "
        f"or hf:CONFIG.json)"
    )
