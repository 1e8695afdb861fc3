"""SQLite store of a co-search: the run's parameters and every finished candidate, committed one chip at a
time, so a run killed at any point (Ctrl-C or SIGKILL) resumes without recomputing or losing anything."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from phaze.errors import StoreError
from phaze.search.exact import ChipResult, ModelOutcome

_TABLE = """
CREATE TABLE IF NOT EXISTS {table} (
    chip INTEGER NOT NULL, hbm_gib INTEGER NOT NULL, status TEXT NOT NULL, score REAL NOT NULL,
    area_mm2 REAL NOT NULL, num_tc INTEGER, tc_rows INTEGER, tc_cols INTEGER, num_vc INTEGER,
    vc_width INTEGER, glb_bytes INTEGER, outcomes TEXT NOT NULL, schedules_solved INTEGER,
    schedules_not_optimal INTEGER, PRIMARY KEY (chip, hbm_gib));
"""
_SCHEMA = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);" + _TABLE.format(table="results")


def _namespaced(namespace: str) -> tuple[str, str]:
    """(results table, meta key prefix) of a namespace; "" keeps the plain names."""
    if not namespace:
        return "results", ""
    import hashlib
    import re

    tag = re.sub(r"\W", "_", namespace)[:40] + "_" + hashlib.sha256(namespace.encode()).hexdigest()[:8]
    return f"results_{tag}", f"{namespace}/"


def _diff(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class Store:
    """One search run in one SQLite file. ``open`` refuses a store of another run (naming the parameters
    that differ) and an existing store without ``resume``: nothing stored is ever overwritten."""

    def __init__(self, con: sqlite3.Connection, path: str, table: str = "results", meta_prefix: str = "") -> None:
        self.con, self.path, self.table, self.meta_prefix = con, path, table, meta_prefix

    def scoped(self, model_index: int, create: bool = True) -> "Store":
        """The same file's results of one model searched alone (table ``results_model<k>``; the joint
        results of a multi-model search stay in ``results``). Shares the connection: close the parent.
        ``create=False`` (reading): a search that has not reached that model yet raises StoreError."""
        table = f"{self.table}_model{int(model_index)}"
        if create:
            with self.con:
                self.con.executescript(_TABLE.format(table=table))
        elif self.con.execute("SELECT name FROM sqlite_master WHERE type='table' AND name=?", (table,)).fetchone() is None:
            raise StoreError(f"store {self.path} has no per-model results for model {model_index} yet; "
                             f"finish the search with --resume")
        return Store(self.con, self.path, table, self.meta_prefix)

    @classmethod
    def open(cls, path: str | Path, fingerprint: dict, resume: bool, namespace: str = "") -> "Store":
        """``namespace``: one of several searches kept in one file (``phaze reproduce``: one per model), with
        its own results table and meta keys; "" is the file's only search."""
        path = str(path)
        exists = Path(path).exists() and Path(path).stat().st_size > 0
        if exists and not resume and not namespace:
            raise StoreError(f"store {path} already exists; continue it with --resume or choose another --store")
        table, prefix = _namespaced(namespace)
        try:
            con = sqlite3.connect(path, timeout=30)
            con.execute("PRAGMA journal_mode=WAL")
            con.executescript(_SCHEMA + _TABLE.format(table=table))
            row = con.execute("SELECT value FROM meta WHERE key=?", (prefix + "spec",)).fetchone()
        except sqlite3.DatabaseError as err:
            raise StoreError(f"cannot read store {path}: {err}; pass another --store") from None
        if row is not None and namespace and not resume:
            con.close()
            raise StoreError(f"store {path} already holds the search {namespace!r}; continue it with --resume or "
                             f"choose another --store")
        if row is None:
            con.execute("INSERT INTO meta VALUES (?, ?)", (prefix + "spec", json.dumps(fingerprint, sort_keys=True)))
            con.commit()
        else:
            stored = json.loads(row[0])
            if stored != json.loads(json.dumps(fingerprint, sort_keys=True)):
                raise StoreError(f"store {path} was written by a search with other parameters "
                                 f"({', '.join(_diff(stored, fingerprint))} differ); rerun with the same "
                                 f"parameters or use another --store")
        return cls(con, path, table, prefix)

    @classmethod
    def open_existing(cls, path: str | Path) -> "Store":
        """Open for reading (``phaze results``)."""
        if not Path(path).is_file():
            raise StoreError(f"no store at {path}; run `phaze search --store {path}` first")
        try:
            con = sqlite3.connect(str(path), timeout=30)
            con.execute("SELECT value FROM meta WHERE key='spec'").fetchone()
            con.execute("SELECT count(*) FROM results").fetchone()
        except sqlite3.DatabaseError as err:
            raise StoreError(f"cannot read store {path}: {err}; is it a phaze results store?") from None
        return cls(con, str(path))

    def fingerprint(self) -> dict:
        row = self.con.execute("SELECT value FROM meta WHERE key=?", (self.meta_prefix + "spec",)).fetchone()
        return json.loads(row[0]) if row else {}

    def get_meta(self, key: str):
        row = self.con.execute("SELECT value FROM meta WHERE key=?", (self.meta_prefix + key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_meta(self, key: str, value) -> None:
        with self.con:
            self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                             (self.meta_prefix + key, json.dumps(value, sort_keys=True)))

    def add(self, results: list[ChipResult], chip_fields: dict[int, dict]) -> None:
        """Store one chip's results in one transaction (all or nothing)."""
        with self.con:
            for r in results:
                f = chip_fields[r.index]
                self.con.execute(
                    f"INSERT OR IGNORE INTO {self.table} VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (r.index, r.hbm_gib, r.status, r.score, f["area_mm2"], f["num_tc"], f["tc_rows"], f["tc_cols"],
                     f["num_vc"], f["vc_width"], f["glb_bytes"],
                     json.dumps([o.__dict__ for o in r.outcomes], sort_keys=True),
                     r.schedules_solved, r.schedules_not_optimal))

    def load(self) -> dict[tuple[int, int], ChipResult]:
        out = {}
        for row in self.con.execute("SELECT chip, hbm_gib, status, score, outcomes, schedules_solved, "
                                    f"schedules_not_optimal FROM {self.table}"):
            outs = tuple(ModelOutcome(**o) for o in json.loads(row[4]))
            out[(row[0], row[1])] = ChipResult(row[0], row[1], row[2], row[3], outs, row[5], row[6])
        return out

    def rows(self, top: int | None = None, status: str | None = "exact") -> list[dict]:
        q = f"SELECT * FROM {self.table}" + (" WHERE status=?" if status else "") + \
            " ORDER BY score DESC, area_mm2 ASC, hbm_gib ASC, chip ASC" + (f" LIMIT {int(top)}" if top else "")
        cur = self.con.execute(q, (status,) if status else ())
        cols = [d[0] for d in cur.description]
        out = []
        for row in cur:
            d = dict(zip(cols, row))
            d["outcomes"] = json.loads(d["outcomes"])
            out.append(d)
        return out

    def close(self) -> None:
        self.con.close()
