"""Schedules cached by the content of their problem, in memory and optionally in a SQLite file.

The key is a sha256 over op kinds, modes (cores and exact durations), edges and core counts (and, with shared
bandwidth, every mode's rates and the supply); op names are
not part of it (a hit is relabelled with the asking problem's names), so the same layer met on many chips
with equal latencies is solved once.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

from phaze.errors import StoreError
from phaze.schedule.problem import Schedule, ScheduleProblem, problem_key
from phaze.schedule.solver import solve


class ScheduleCache:
    """``get``/``put`` by problem; ``hits``/``misses`` count lookups. ``path``: SQLite file that persists."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._mem: dict[str, tuple[Schedule, float]] = {}
        self.hits = 0
        self.misses = 0
        self._db = None
        if path is not None:
            try:
                self._db = sqlite3.connect(str(path))
                self._db.execute("CREATE TABLE IF NOT EXISTS schedules "
                                 "(key TEXT PRIMARY KEY, time_limit_s REAL, payload TEXT)")
                self._db.commit()
            except sqlite3.Error as e:
                raise StoreError(f"schedule cache {path}: cannot open as SQLite ({e}); "
                                 f"pass a writable path or delete the file") from e

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def __len__(self) -> int:
        if self._db is not None:
            return int(self._db.execute("SELECT COUNT(*) FROM schedules").fetchone()[0])
        return len(self._mem)

    def _lookup(self, key: str) -> tuple[Schedule, float] | None:
        if key in self._mem:
            return self._mem[key]
        if self._db is not None:
            row = self._db.execute("SELECT time_limit_s, payload FROM schedules WHERE key = ?", (key,)).fetchone()
            if row is not None:
                entry = (Schedule.from_dict(json.loads(row[1])), float(row[0]))
                self._mem[key] = entry
                return entry
        return None

    def get(self, problem: ScheduleProblem, time_limit_s: float = 0.0) -> Schedule | None:
        """The cached schedule, relabelled with this problem's op names; a non-optimal entry computed with
        a shorter time limit than ``time_limit_s`` counts as a miss (it may improve)."""
        entry = self._lookup(problem_key(problem))
        if entry is None or (entry[0].status != "optimal" and entry[1] < time_limit_s):
            self.misses += 1
            return None
        self.hits += 1
        sched = entry[0]
        ops = tuple(replace(so, name=op.name) for so, op in zip(sched.ops, problem.ops))
        return replace(sched, ops=ops)

    def put(self, problem: ScheduleProblem, schedule: Schedule, time_limit_s: float = 0.0) -> None:
        key = problem_key(problem)
        self._mem[key] = (schedule, float(time_limit_s))
        if self._db is not None:
            self._db.execute("INSERT OR REPLACE INTO schedules VALUES (?, ?, ?)",
                             (key, float(time_limit_s), json.dumps(schedule.to_dict())))
            self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def solve_cached(problem: ScheduleProblem, cache: ScheduleCache | None, time_limit_s: float = 5.0,
                 exact: bool = True, **kwargs) -> Schedule:
    """``solve`` through ``cache`` (None: no cache). Heuristic-only answers are cached with limit 0."""
    if cache is None:
        return solve(problem, time_limit_s, exact, **kwargs)
    limit = time_limit_s if exact else 0.0
    hit = cache.get(problem, limit)
    if hit is not None:
        return hit
    sched = solve(problem, time_limit_s, exact, **kwargs)
    cache.put(problem, sched, limit)
    return sched
