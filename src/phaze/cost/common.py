"""Helpers shared by the cost functions: core-count validation and integer ceil-division on arrays."""
from __future__ import annotations

import numpy as np

from phaze.errors import ConfigError


def ceil_div(a, b):
    """Elementwise ceil(a / b) for non-negative integer arrays (exact, no float rounding)."""
    return -(-np.asarray(a, dtype=np.int64) // np.asarray(b, dtype=np.int64))


def as_cores(cores, available: np.ndarray, what: str) -> np.ndarray:
    """``cores`` (int or per-chip array) as an int64 array of len(available), each in 1..available."""
    c = np.asarray(cores)
    if c.dtype.kind not in "iu":
        if c.dtype.kind == "f" and np.all(np.isfinite(c)) and np.all(c == np.round(c)):
            c = c.astype(np.int64)
        else:
            raise ConfigError(f"{what}: core count must be an integer (or integer array), got {cores!r}")
    c = np.broadcast_to(c.astype(np.int64), available.shape)
    if np.any(c < 1):
        raise ConfigError(f"{what}: core count must be at least 1, got {int(c.min())}")
    if np.any(c > available):
        i = int(np.argmax(c > available))
        raise ConfigError(f"{what}: asked for {int(c[i])} cores on a chip that has {int(available[i])}")
    return c


def core_modes(num_cores: int) -> tuple[int, ...]:
    """The core counts an op may be spread over: powers of two below ``num_cores``, and ``num_cores``."""
    if isinstance(num_cores, bool) or not isinstance(num_cores, (int, np.integer)) or num_cores < 1:
        raise ConfigError(f"core_modes: num_cores must be a positive integer, got {num_cores!r}")
    out, p = [], 1
    while p < num_cores:
        out.append(p)
        p *= 2
    return tuple(out) + (int(num_cores),)
