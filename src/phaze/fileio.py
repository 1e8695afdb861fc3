"""Reading a user's file safely: every JSON or YAML file phaze reads (model, chip, space, area table,
validation cases, reproduce rows, traced graphs, Hugging Face configs) comes through ``read_data_file``.

It refuses, each with one ConfigError line: a path that is not a regular file, a file over
``MAX_FILE_BYTES``, binary content (a NUL byte or text that is not UTF-8), YAML anchors/aliases (an alias
"bomb" expands exponentially; no phaze file needs them), nesting deeper than ``MAX_NESTING`` and syntax
errors. Usable by every stage (like ``errors`` and ``filefields``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from phaze.errors import ConfigError
from phaze.filefields import load_yaml

# 64 MiB: the largest file phaze reads is a traced model (per-layer graphs of one block, embedding and head:
# about 0.1 MiB for TinyLlama, tests/workload/test_traced.py); 64 MiB is ~500x that and still parses in about
# a second, while a multi-GB file given by mistake is refused before it is read.
MAX_FILE_BYTES = 64 * 2**20
# 64 levels: the deepest phaze file (a traced graph: file -> layers -> ops -> op -> shape list) is 6 deep;
# PyYAML's composer and json's decoder recurse once per level, so depth is also bounded well below
# Python's recursion limit (1000) for everything that walks the parsed data afterwards.
MAX_NESTING = 64
JSON_SUFFIXES = (".json",)
YAML_SUFFIXES = (".yaml", ".yml")


def _depth(data: Any) -> int:
    """Nesting depth of parsed data (iterative, so it cannot itself overflow the stack)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, d)
            if d > MAX_NESTING:
                return d
            stack.extend((v, d + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def read_text_file(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of a regular file of at most MAX_FILE_BYTES, or one ConfigError line."""
    p = Path(path)
    try:
        if not p.exists():
            raise ConfigError(f"{what} {p} does not exist; check the path")
        if not p.is_file():
            raise ConfigError(f"{what} {p} is not a regular file; pass a JSON or YAML file")
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(f"{what} {p} is {size / 2**20:.0f} MiB; phaze reads files up to "
                              f"{MAX_FILE_BYTES // 2**20} MiB (is it the right file?)")
        with open(p, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"cannot read {what} {p}: {err.strerror or err}; check the path and its permissions") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{what} {p} is over {MAX_FILE_BYTES // 2**20} MiB; is it the right file?")
    if b"\x00" in raw:
        raise ConfigError(f"{what} {p} is a binary file, not JSON or YAML text; pass the right file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what} {p} is not UTF-8 text (byte {err.start}); pass a JSON or YAML text file") from None


def read_data_file(path: str | Path, what: str = "file", fmt: str | None = None) -> Any:
    """The parsed content of a JSON (``.json``) or YAML (``.yaml``/``.yml``, or any other suffix) file.
    ``fmt`` ("json" or "yaml") overrides the suffix. Every problem is one ConfigError line."""
    p = Path(path)
    text = read_text_file(p, what)
    kind = fmt or ("json" if p.suffix.lower() in JSON_SUFFIXES else "yaml")
    try:
        data = json.loads(text) if kind == "json" else load_yaml(text)
    except RecursionError:
        raise ConfigError(f"{what} {p} is nested too deeply (phaze files are at most {MAX_NESTING} levels deep)") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{what} {p} does not parse as JSON ({err.msg} at line {err.lineno}); fix the syntax") from None
    except yaml.YAMLError as err:
        first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
        where = getattr(err, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(err, "problem", None) or first
        raise ConfigError(f"{what} {p} does not parse as YAML ({problem}{at}); fix the syntax") from None
    except ValueError as err:  # e.g. an integer literal of more than 4300 digits (Python's int limit)
        raise ConfigError(f"{what} {p}: {str(err).splitlines()[0]}; fix the value") from None
    if _depth(data) > MAX_NESTING:
        raise ConfigError(f"{what} {p} is nested too deeply (phaze files are at most {MAX_NESTING} levels deep)")
    return data
