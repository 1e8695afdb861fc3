"""Checking the fields of a user file (model, chip, space, cluster): every problem names its field once,
with the type expected, and all problems come in one line. Usable by every stage (like ``errors``).

YAML 1.1 (PyYAML's default) reads ``1.0e9`` (an exponent without a sign) as the TEXT "1.0e9"; user files
are read with ``load_yaml``, which reads it as a number as YAML 1.2 does. A value in quotes stays text,
and the error message says so.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import yaml

from phaze.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads YAML 1.2 floats such as 1.0e9, 1e9 and 2.5E-3 as numbers, and refuses
    anchors and aliases: an alias "bomb" (billion laughs) expands exponentially, and no phaze file needs them."""

    def compose_node(self, parent, index):
        ev = self.peek_event()
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            mark = "*" if isinstance(ev, yaml.AliasEvent) else "&"
            raise yaml.composer.ComposerError(None, None, f"YAML anchors and aliases ({mark}{ev.anchor}) are not "
                                                          f"allowed in a phaze file; write the value out", ev.start_mark)
        return super().compose_node(parent, index)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
               r"|[0-9][0-9_]*[eE][-+]?[0-9]+|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def load_yaml(text: str):
    """Parse a user's YAML text (YAML 1.2 numbers, no aliases; see the module docstring). Files go through
    ``phaze.fileio.read_data_file``, which also caps size and nesting and refuses binary input."""
    return yaml.load(text, Loader=_Loader)

HF_KEYS = {"architectures", "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads",
           "intermediate_size", "transformers_version"}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# kind -> (what is expected, test)
KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "pos_int": ("a positive integer", lambda v: _is_int(v) and v > 0),
    "nonneg_int": ("an integer >= 0", lambda v: _is_int(v) and v >= 0),
    "pos_float": ("a positive number", lambda v: _is_num(v) and v > 0),
    "nonneg_float": ("a number >= 0", lambda v: _is_num(v) and v >= 0),
    "fraction": ("a number in [0, 1]", lambda v: _is_num(v) and 0 <= v <= 1),
    "str": ("text", lambda v: isinstance(v, str)),
    "bool": ("true or false", lambda v: isinstance(v, bool)),
    "any": ("any value", lambda v: True),
}


def dataclass_schema(cls, nonneg: tuple[str, ...] = ()) -> dict[str, str]:
    """A schema from a dataclass's annotations: int -> positive integer, float -> positive number (``nonneg``
    fields: >= 0), str -> text, bool -> true/false; any other type is not checked here."""
    import dataclasses

    kinds = {"int": "pos_int", "float": "pos_float", "str": "str", "bool": "bool"}
    out = {}
    for f in dataclasses.fields(cls):
        t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        k = kinds.get(t, "any")
        if f.name in nonneg:
            k = k.replace("pos_", "nonneg_")
        out[f.name] = k
    return out


def got(v) -> str:
    """How a bad value reads in a message, with the YAML exponent hint when it applies."""
    if isinstance(v, str):
        try:
            float(v)
        except ValueError:
            return f"the text {v!r}"
        return f"the text {v!r} (a number in quotes: remove the quotes)"
    if isinstance(v, bool):
        return f"{str(v).lower()} (a boolean)"
    return repr(v)


def hf_hint(data: dict, source: str) -> None:
    """A Hugging Face config.json is not a phaze file: say so in one line."""
    if len(HF_KEYS & set(data)) >= 2:
        raise ConfigError(f"{source} looks like a Hugging Face config.json, not a phaze model file; pass it as "
                          f"hf:{source}, or convert it with `phaze import-model {source} -o model.yaml`")


def check_fields(data: Any, schema: dict[str, str], source: str, required: tuple[str, ...] = (),
                 what: str = "fields") -> dict:
    """Check ``data`` against ``schema`` (field -> a KINDS key); one ConfigError lists every unknown field,
    every missing required field and every wrong value, each field once. Integers given for number fields
    become floats."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of {what} (name: value), got {type(data).__name__}")
    problems = []
    unknown = [k for k in data if k not in schema]
    if unknown:
        problems.append(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                        f"(allowed: {', '.join(schema)})")
    missing = [k for k in required if k not in data]
    if missing:
        problems.append(f"missing field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}")
    out = {}
    for k, v in data.items():
        if k not in schema:
            continue
        expected, ok = KINDS[schema[k]]
        if not ok(v):
            problems.append(f"{k}: expected {expected}, got {got(v)}")
            continue
        out[k] = float(v) if schema[k].endswith("float") or schema[k] == "fraction" else v
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
    return out
