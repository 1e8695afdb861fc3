"""One store, one writer: the lease is taken under SQLite's write lock, names its holder, is released on close
and recovered after a crash; a refused search creates no store. Tested with real processes, by PID."""
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from phaze.errors import ConfigError, StoreError
from phaze.search import Store, run_search
from phaze.search.store import LEASE_STALE_S
from test_search import spec

FP = {"models": ["x"], "devices": 8}

# A process that opens the store and holds it for a while, and prints what happened. With start = "stdin" it
# first says "ready" (its imports done), opens when a line arrives on stdin and holds until stdin closes, so the
# test can start two of them at the same instant however slow the machine is.
OPENER = """
import sys, time
from phaze.errors import StoreError
from phaze.search import Store
path, start, hold = sys.argv[1], sys.argv[2], float(sys.argv[3])
if start == "stdin":
    print("ready", flush=True)
    sys.stdin.readline()
try:
    s = Store.open(path, {"models": ["x"], "devices": 8}, True)
except StoreError as err:
    print("refused:", err, flush=True)
    sys.exit(3)
print("opened", flush=True)
if start == "stdin":
    sys.stdin.read()
else:
    time.sleep(hold)
s.close()
"""


def _opener(path, start, hold: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", OPENER, str(path), str(start), str(hold)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_two_searches_started_at_the_same_instant_one_writes(tmp_path):
    path = tmp_path / "new.db"
    a, b = _opener(path, "stdin", 0), _opener(path, "stdin", 0)
    for p in (a, b):
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    for p in (a, b):  # both are past their imports: release them together
        p.stdin.write("go\n")
        p.stdin.flush()
    first = {p.pid: p.stdout.readline().strip() for p in (a, b)}  # each has opened or been refused
    outs = {p.pid: p.communicate(timeout=120) for p in (a, b)}  # closes stdin: the holder lets go
    codes = sorted([a.returncode, b.returncode])
    assert codes == [0, 3], (first, outs)
    winner, loser = (a, b) if a.returncode == 0 else (b, a)
    assert f"being written by process {winner.pid} on {socket.gethostname()}" in first[loser.pid]


def test_a_busy_store_is_refused_naming_its_holder_and_released_on_close(tmp_path):
    path = tmp_path / "s.db"
    s = Store.open(path, FP, False)
    p = _opener(path, 0, 0)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3 and f"process {os.getpid()} on {socket.gethostname()}" in out
    s.close()
    p = _opener(path, 0, 0)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0 and out.strip() == "opened", err
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM meta WHERE key='lease'").fetchone()[0] == 0  # released by the child
    con.close()


def _set_lease(path, **lease):
    con = sqlite3.connect(path)
    con.execute("INSERT OR REPLACE INTO meta VALUES ('lease', ?)", (json.dumps(lease),))
    con.commit()
    con.close()


def test_the_lease_of_a_dead_process_is_taken_over(tmp_path):
    path = tmp_path / "s.db"
    Store.open(path, FP, False).close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    now = time.time()
    _set_lease(path, pid=dead.pid, host=socket.gethostname(), since=now, heartbeat=now)
    Store.open(path, FP, True).close()  # recovered: no error


def test_a_sigkilled_holder_is_recovered(tmp_path):
    path = tmp_path / "s.db"
    p = _opener(path, 0, 600)
    assert p.stdout.readline().strip() == "opened"
    with pytest.raises(StoreError, match=f"process {p.pid}"):
        Store.open(path, FP, True)
    p.kill()
    p.wait()
    Store.open(path, FP, True).close()


def test_a_lease_from_another_machine_holds_until_stale(tmp_path):
    path = tmp_path / "s.db"
    Store.open(path, FP, False).close()
    now = time.time()
    _set_lease(path, pid=1, host="elsewhere", since=now, heartbeat=now)
    with pytest.raises(StoreError, match="process 1 on elsewhere"):
        Store.open(path, FP, True)
    _set_lease(path, pid=1, host="elsewhere", since=now, heartbeat=now - LEASE_STALE_S - 1)
    Store.open(path, FP, True).close()


def test_resume_refuses_an_sqlite_file_that_is_not_a_phaze_store_and_leaves_it_alone(tmp_path):
    path = tmp_path / "other.db"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (x)")
    con.commit()
    con.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a phaze search store"):
        Store.open(path, FP, True)
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["other.db"]


def test_a_refused_search_creates_no_store_so_the_corrected_one_runs(tmp_path):
    path = tmp_path / "run.db"
    with pytest.raises(ConfigError, match="unknown cluster"):
        run_search(spec(cluster="nope"), str(path), workers=1, quiet=True)
    with pytest.raises(ConfigError, match="tp"):
        run_search(spec(tp_values=(3,)), str(path), workers=1, quiet=True)
    assert not path.exists()
    res = run_search(spec(), str(path), workers=1, quiet=True)
    assert res.best is not None
    con = sqlite3.connect(path)
    assert con.execute("SELECT count(*) FROM meta WHERE key='lease'").fetchone()[0] == 0
    con.close()
