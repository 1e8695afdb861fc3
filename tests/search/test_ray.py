"""The Ray backend on a local Ray instance (ray is in the dev set-up, so this runs in `make test`): the same
answer as the local process pool on a reduced space, the same answer when a Ray worker is killed mid-run
(Ray retries the task), and the store is written by the driver alone, which holds its lease."""
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from phaze.errors import StoreError
from phaze.search import Store, run_search
from test_search import spec

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow  # a local Ray cluster per module; test_search_cli.py runs one Ray search in the inner loop


@pytest.fixture(scope="module")
def local_ray():
    if not ray.is_initialized():
        # two CPUs: the reduced space needs no more; no dashboard (nothing listens on a port beyond Ray's own)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def pool_result(tmp_path_factory):
    d = tmp_path_factory.mktemp("pool")
    return run_search(spec(), str(d / "pool.db"), workers=2, quiet=True, prune=False)


def _answer(res) -> tuple:
    rows = Store.open_existing(res.store).rows(status=None)
    return ((res.best.chip, res.best.hbm_gib, res.best.score),
            sorted((r["chip"], r["hbm_gib"], r["status"], round(r["score"], 12)) for r in rows))


def _ray_task_pids() -> list[int]:
    """PIDs of Ray workers running one of our tasks (Ray titles a busy worker "ray::<function>")."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            except OSError:
                continue
            if cmd.startswith(b"ray::_call"):
                out.append(int(d))
    return out


def test_ray_gives_the_local_pool_answer(local_ray, pool_result, tmp_path):
    res = run_search(spec(), str(tmp_path / "ray.db"), workers=2, backend="ray", quiet=True, prune=False)
    assert _answer(res) == _answer(pool_result)
    assert res.counts["exact"] == pool_result.counts["exact"] > 0


def _leased(path: Path) -> bool:
    """Whether the store at ``path`` has a committed lease (its writer's ``Store.open`` has finished); read-only,
    so a missing file is not created."""
    if not path.exists():
        return False
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT 1 FROM meta WHERE key='lease'").fetchone() is not None
        finally:
            con.close()
    except sqlite3.Error:  # not created yet, or its schema not yet committed
        return False


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds Ray workers through /proc")
def test_a_ray_worker_killed_mid_run_does_not_change_the_answer(local_ray, pool_result, tmp_path):
    path = tmp_path / "ray-killed.db"
    killed, refused = [], []
    stop = threading.Event()

    def killer():
        while not stop.is_set() and not killed:
            pids = _ray_task_pids()
            # only once the driver holds the store: a Ray worker of the previous test may still be titled as
            # running a task, and opening the store before the driver would take the lease from it
            if pids and _leased(path):
                try:  # a second writer is refused while the driver (this process) writes
                    Store.open(path, spec().fingerprint(), True)
                except StoreError as err:
                    refused.append(str(err))
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    try:
        res = run_search(spec(), str(path), workers=2, backend="ray", quiet=True, prune=False)
    finally:
        stop.set()
        t.join()
    assert killed, "no Ray worker was caught running a task"
    assert _answer(res) == _answer(pool_result)
    assert refused and f"process {os.getpid()}" in refused[0]


# Ray's own processes notice a dead driver by a health check: measured here, its workers were gone 3 s after
# the SIGKILL and the last of its processes 61 s after (gcs, raylet, agents); this bound allows for load.
RAY_LINGER_S = 180


def _descendants(pid: int) -> set[int]:
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    out, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in parent.items() if p in frontier} - out
        out |= frontier
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="follows processes through /proc")
def test_a_local_ray_ends_with_a_sigkilled_search(tmp_path):
    """The local Ray a search starts (GCS, raylet, workers) shares the search's fate: after a SIGKILL of the
    search no Ray process is left (Ray's own driver-death handling; the store keeps every committed chip)."""
    import subprocess
    import sys

    phaze = str(Path(sys.executable).parent / "phaze")
    # the paper's default co-search of gpt2-xl: minutes long, so it is caught with Ray workers running
    p = subprocess.Popen([phaze, "search", "--model", "gpt2-xl", "--backend", "ray", "--workers", "2", "--store",
                          str(tmp_path / "s.db"), "--quiet", "--json"],
                         cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, family = time.time() + 120, set()
    while time.time() < deadline and p.poll() is None:
        family = _descendants(p.pid)
        if any(_cmdline(k).startswith(b"ray::") for k in family):
            break
        time.sleep(0.2)
    assert p.poll() is None, "the search ended before a Ray worker ran"
    family = _descendants(p.pid)
    p.kill()
    p.wait()
    t0 = time.time()
    while time.time() < t0 + RAY_LINGER_S and any(_alive(k) for k in family):
        time.sleep(0.5)
    left = {k: _cmdline(k)[:40] for k in family if _alive(k)}
    assert left == {}, f"{len(left)} Ray processes outlived the search by {time.time() - t0:.0f} s: {left}"
