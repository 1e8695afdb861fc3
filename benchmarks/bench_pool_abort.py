"""Aborting the local process pool, repeated: what ``abort`` leaves behind at the moment it returns.

Each round starts a 2-worker ``LocalPool``, runs 6 tiny tasks on it, queues a 60 s task and aborts it (the
steps of tests/search/test_signals.py). At the return of ``abort`` it reads: the wall time of the abort,
whether the 60 s task is settled (cancelled or failed), the workers ``worker_pids`` still lists, and the
workers multiprocessing's own ``active_children()`` still lists (it asks ``waitpid``, which races the pool's
manager thread reaping the same workers: losing that race reads a dead worker as running). Goal: every task
settled and no worker listed by ``worker_pids`` in every round; the last column only shows the race exists.

    .venv/bin/python benchmarks/bench_pool_abort.py [--rounds N]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

from phaze.search.executor import LocalPool, abort


def one_round() -> tuple[float, bool, int, int]:
    pool = LocalPool(2)
    for f in [pool.submit(os.getpid) for _ in range(6)]:
        f.result(timeout=120)
    pids = pool.worker_pids()
    busy = pool.submit(time.sleep, 60)
    t0 = time.perf_counter()
    abort(pool)
    wall_s = time.perf_counter() - t0
    settled = busy.done()
    listed = len(pool.worker_pids())
    mp_listed = len(pids & {p.pid for p in mp.active_children()})
    return wall_s, settled, listed, mp_listed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    n = ap.parse_args().rounds
    rows = [one_round() for _ in range(n)]
    walls = [r[0] for r in rows]
    print(f"{n} rounds, load average {os.getloadavg()[0]:.1f}")
    print(f"abort wall time: median {statistics.median(walls) * 1e3:.1f} ms, max {max(walls) * 1e3:.1f} ms")
    print(f"60 s task settled when abort returned: {sum(r[1] for r in rows)} of {n} rounds")
    print(f"rounds with a worker still listed by worker_pids: {sum(r[2] > 0 for r in rows)} of {n}")
    print(f"rounds with a dead worker listed by multiprocessing's active_children (waitpid race): "
          f"{sum(r[3] > 0 for r in rows)} of {n}")


if __name__ == "__main__":
    main()
