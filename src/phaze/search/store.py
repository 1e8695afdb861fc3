"""SQLite store of a co-search: the run's parameters and every finished candidate, committed as each chip
(or batch of chips) comes back, so a run killed at any point (Ctrl-C or SIGKILL) resumes without recomputing
or losing anything it had received."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass
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


# A lease holder on another machine (whose process cannot be probed here) that has not committed for this long
# is presumed dead. A search commits each chip as it finishes (seconds apart in benchmarks/bench_search.py);
# a writer slower than this on another machine would be taken over, which is why a multi-machine search runs
# from one driver (--backend ray): the driver alone writes the store and holds the lease.
LEASE_STALE_S = 600.0


@dataclass(frozen=True)
class Lease:
    """Who writes a store: one row ('lease') in its meta table, written with the parameters under SQLite's
    write lock (BEGIN IMMEDIATE), so two searches starting at once cannot both take it. Removed on close;
    after a crash its holder is gone (a dead or zombie process on this machine, or no commit for
    LEASE_STALE_S on another) and the next search takes it over."""

    pid: int
    host: str
    since: float
    heartbeat: float

    @classmethod
    def mine(cls) -> "Lease":
        now = time.time()
        return cls(os.getpid(), socket.gethostname(), now, now)

    @classmethod
    def read(cls, con: sqlite3.Connection) -> "Lease | None":
        row = con.execute("SELECT value FROM meta WHERE key='lease'").fetchone()
        if row is None:
            return None
        try:
            d = json.loads(row[0])
            return cls(int(d["pid"]), str(d["host"]), float(d["since"]), float(d["heartbeat"]))
        except (ValueError, KeyError, TypeError):
            return None  # an unreadable lease protects nothing

    def write(self, con: sqlite3.Connection) -> None:
        con.execute("INSERT OR REPLACE INTO meta VALUES ('lease', ?)", (json.dumps(self.__dict__, sort_keys=True),))

    @staticmethod
    def heartbeat(con: sqlite3.Connection) -> None:
        con.execute("UPDATE meta SET value=json_set(value, '$.heartbeat', ?) WHERE key='lease'", (time.time(),))

    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return time.time() - self.heartbeat < LEASE_STALE_S
        return self.pid == os.getpid() or _pid_alive(self.pid)  # this process: another Store still open

    def describe(self) -> str:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"process {self.pid} on {self.host} (since {started})"


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine and is not a zombie (killed, not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        return True


# How long opening a store waits for another process's write lock (SQLite's busy timeout); one chip's commit
# holds it for milliseconds.
BUSY_TIMEOUT_S = 30.0


def _when_free(step):
    """Run an SQLite step, retrying while the file is busy: switching a new file to WAL needs it alone, and
    SQLite reports that conflict at once instead of waiting (up to BUSY_TIMEOUT_S in all)."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return step()
        except sqlite3.OperationalError as err:
            if "locked" not in str(err) and "busy" not in str(err) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_sqlite_file(path: str) -> None:
    """Refuse, before SQLite opens it (and may create -wal/-shm files beside it), a file that is not an SQLite
    database or is shorter than its header says (a truncated copy). Header layout: sqlite.org/fileformat.html
    (bytes 16-17 page size, 1 meaning 65536; 24-27 change counter; 28-31 size in pages, valid when bytes 92-95
    equal the change counter)."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError as err:
        raise StoreError(f"cannot read store {path}: {err.strerror}; check the path") from None
    if not head.startswith(_SQLITE_MAGIC) or len(head) < 100:
        raise StoreError(f"{path} is not a phaze search store (not an SQLite file); pass a store written by "
                         f"`phaze search`, or another --store")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and size < page * pages:
        raise StoreError(f"store {path} is truncated ({size:,} of {page * pages:,} bytes); restore it or use another "
                         f"--store")


def _check_phaze_store(path: str) -> None:
    """An existing file given to --resume must be a phaze store (SQLite with our tables and a parameters row);
    read without writing anything into it."""
    from urllib.parse import quote

    _check_sqlite_file(path)
    try:
        con = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True, timeout=30)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            spec = con.execute("SELECT value FROM meta WHERE key='spec' OR key LIKE '%/spec' LIMIT 1").fetchone() \
                if "meta" in tables else None
        finally:
            con.close()
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{path} is not a phaze search store ({err}); pass a store written by `phaze search`, or "
                         f"another --store") from None
    if not tables:  # an SQLite file with nothing in it, e.g. a store another search is creating right now: the
        return      # locked open decides (it waits for that search, then names it)
    ok = spec is not None and any(t.startswith("results") for t in tables)
    if ok:
        try:
            ok = isinstance(json.loads(spec[0]), dict)
        except (TypeError, ValueError):
            ok = False
    if not ok:
        raise StoreError(f"{path} is an SQLite file but not a phaze search store (no search parameters in it); pass a "
                         f"store written by `phaze search`, or another --store")


# What a store holds, named by the command that writes it: `phaze search` keeps its one search under the plain
# meta key 'spec'; `phaze reproduce` keeps several namespaced ones ('reproduce/spec', 'cosearch/<model>/spec').
_SEARCH, _REPRODUCE = "`phaze search`", "`phaze reproduce`"


def _check_kind(con: sqlite3.Connection, path: str, namespace: str) -> None:
    """Refuse to open a search (``namespace`` "") in a store holding a reproduction's namespaced searches, and
    a namespaced search in a store holding a plain one: resuming there would write one kind into the other."""
    plain = con.execute("SELECT 1 FROM meta WHERE key='spec'").fetchone() is not None
    spaced = con.execute("SELECT 1 FROM meta WHERE key LIKE '%/spec'").fetchone() is not None
    if (plain and namespace) or (spaced and not namespace):
        held, opening = (_SEARCH, _REPRODUCE) if plain else (_REPRODUCE, _SEARCH)
        raise StoreError(f"store {path} holds a {held} run, not a {opening} one; continue it with "
                         f"{held[:-1]} --resume --store {path}`, or give {opening} another --store")


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

    def __init__(self, con: sqlite3.Connection, path: str, table: str = "results", meta_prefix: str = "",
                 lease: bool = False) -> None:
        self.con, self.path, self.table, self.meta_prefix, self.lease = con, path, table, meta_prefix, lease

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
        """Open a store to write a search into, taking its lease (one writer at a time; see ``Lease``).
        ``namespace``: one of several searches kept in one file (``phaze reproduce``: one per model), with
        its own results table and meta keys; "" is the file's only search."""
        path = str(path)
        exists = Path(path).exists() and Path(path).stat().st_size > 0
        if exists and not resume and not namespace:
            raise StoreError(f"store {path} already exists; continue it with --resume or choose another --store")
        if exists:
            _check_phaze_store(path)
        table, prefix = _namespaced(namespace)
        try:
            con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            _when_free(lambda: con.execute("PRAGMA journal_mode=WAL"))
            # the schema, the lease and the parameters are read and written under one write lock, taken first
            # (BEGIN IMMEDIATE waits for it), so two searches opening the same new file cannot interleave
            _when_free(lambda: con.execute("BEGIN IMMEDIATE"))
            try:
                for statement in (_SCHEMA + _TABLE.format(table=table)).split(";"):
                    if statement.strip():
                        con.execute(statement)
                holder = Lease.read(con)
                if holder is not None and holder.alive():
                    raise StoreError(f"store {path} is being written by {holder.describe()}; wait for it to end, or "
                                     f"use another --store")
                _check_kind(con, path, namespace)
                row = con.execute("SELECT value FROM meta WHERE key=?", (prefix + "spec",)).fetchone()
                if row is not None and namespace and not resume:
                    raise StoreError(f"store {path} already holds the search {namespace!r}; continue it with --resume "
                                     f"or choose another --store")
                if row is None:
                    con.execute("INSERT INTO meta VALUES (?, ?)", (prefix + "spec", json.dumps(fingerprint, sort_keys=True)))
                else:
                    stored = json.loads(row[0])
                    if stored != json.loads(json.dumps(fingerprint, sort_keys=True)):
                        raise StoreError(f"store {path} was written by a search with other parameters "
                                         f"({', '.join(_diff(stored, fingerprint))} differ); rerun with the same "
                                         f"parameters or use another --store")
                Lease.mine().write(con)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                con.close()
                raise
        except sqlite3.DatabaseError as err:
            raise StoreError(f"cannot read store {path}: {err}; pass another --store") from None
        con.isolation_level = ""  # back to Python's default: `with con:` is one transaction
        return cls(con, path, table, prefix, lease=True)

    @classmethod
    def open_existing(cls, path: str | Path) -> "Store":
        """Open for reading (``phaze results``)."""
        if not Path(path).is_file():
            raise StoreError(f"no store at {path}; run `phaze search --store {path}` first")
        _check_sqlite_file(str(path))
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
        """Store the results of one chip, or of a batch of chips, in one transaction (all or nothing)."""
        with self.con:
            Lease.heartbeat(self.con)
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
        """Release the lease (if this Store took it) and close the file."""
        if self.lease:
            try:
                with self.con:
                    self.con.execute("DELETE FROM meta WHERE key='lease' AND json_extract(value, '$.pid')=? AND "
                                     "json_extract(value, '$.host')=?", (os.getpid(), socket.gethostname()))
            except sqlite3.Error:
                pass  # the lease is recoverable anyway: its holder is gone once this process ends
            self.lease = False
        self.con.close()
