"""Executors for the exact per-chip evaluations: a local process pool, or Ray behind the same
``concurrent.futures.Executor`` interface (``ObjectRef.future()``)."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import threading
import time

from phaze.errors import PhazeError


class InlineExecutor(cf.Executor):
    """Runs each task at submit time in this process (workers=1: no pickling, easy to profile)."""

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        fut: cf.Future = cf.Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as err:  # surfaced by fut.result()
            fut.set_exception(err)
        return fut


def _call(fn, args, kwargs):
    """Run ``fn(*args, **kwargs)`` (a Ray task; builtins and bound methods included)."""
    return fn(*args, **kwargs)


class RayExecutor(cf.Executor):
    """Submits tasks as Ray remote functions; ``address=None`` starts a local Ray instance."""

    def __init__(self, address: str | None = None, num_cpus: int | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise PhazeError("--backend ray needs Ray: pip install 'phaze[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, num_cpus=num_cpus if address is None else None, include_dashboard=False,
                     log_to_driver=False)
        self._call = None

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        if self._call is None:
            # one remote trampoline: Ray decorates Python functions only, and fn travels by reference
            self._call = self._ray.remote(_call)
        return self._call.remote(fn, args, kwargs).future()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass  # the Ray instance outlives one search (a local one ends with the process)


# How often a worker checks that its parent is alive (where the kernel cannot end it with its parent, below):
# after a SIGKILL of the search, workers exit within this many seconds (plus the end of the numpy call they
# are in) instead of living on as orphans.
PARENT_POLL_S = 1.0

# prctl(2) options (<linux/prctl.h>): the signal this process gets when its parent dies; the name of the
# calling thread (what ps, top and /proc/PID/task/TID/comm show).
_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
# The OS name of a worker's parent-watch thread: once a worker has it, the worker is past its start-up (its
# imports, which take seconds on a busy machine) and will not outlive its parent.
WATCH_THREAD_NAME = "phaze-watch"


def _prctl(option: int, arg) -> bool:
    """prctl(2) through libc on Linux; False elsewhere or when it fails."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no libc prctl
        return False


def _watch_parent(parent_pid: int) -> None:
    """Worker initializer: end this worker once its parent is gone. On Linux the kernel SIGKILLs it the moment
    the parent dies (PR_SET_PDEATHSIG), which needs no GIL (a long C call in the worker holds it, and the
    polling thread would wait it out); everywhere a daemon thread also polls ``os.getppid()``, which changes
    when the parent's death reparents the worker. Neither acts before the worker's imports are done (seconds
    on a busy machine): a worker whose parent died meanwhile exits here. Linux's "parent" is the thread that
    started the worker: the pool's owner submits from its own thread."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent died while this worker was starting
        os._exit(1)

    def watch() -> None:
        _prctl(_PR_SET_NAME, WATCH_THREAD_NAME.encode())
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name=WATCH_THREAD_NAME, daemon=True).start()


class _RecordingSpawnContext(mp.context.SpawnContext):
    """The spawn start method, remembering every process it creates: ``ProcessPoolExecutor`` launches its
    workers through the ``mp_context`` it is given, so the pool's owner knows them without reading the
    pool's private state."""

    def __init__(self) -> None:
        self.processes: list[mp.process.BaseProcess] = []

    def Process(self, *args, **kwargs):  # noqa: N802 (the context's factory name)
        p = mp.context.SpawnProcess(*args, **kwargs)
        self.processes.append(p)
        return p


# How long ``LocalPool.abort`` waits for one terminated worker to exit, and then for the pool's manager thread
# to settle the tasks it handed out (it fails them with BrokenProcessPool or cancels them). Measured by
# benchmarks/bench_pool_abort.py: a whole abort takes 20 ms median, 190 ms at most in 150 rounds at a load
# average of ~8; the bound only keeps a wedged interpreter from hanging an abort.
ABORT_WAIT_S = 5.0


def _has_exited(p: mp.process.BaseProcess) -> bool:
    """Whether a started worker has exited, read from its sentinel (a pipe that closes when it exits). Unlike
    ``is_alive`` this never calls ``waitpid``: the pool's manager thread reaps the workers concurrently, and
    a ``waitpid`` that loses that race gets ECHILD, which multiprocessing reads as "still running"."""
    return bool(mp.connection.wait([p.sentinel], timeout=0))


class LocalPool(cf.ProcessPoolExecutor):
    """The local process pool (spawn start method). Its workers watch their parent; ``abort`` ends them at
    once, including one still starting, through the ``Process`` objects its context recorded."""

    def __init__(self, workers: int) -> None:
        self._context = _RecordingSpawnContext()
        self._unsettled: set[cf.Future] = set()  # handed out and not done yet (the pool's thread settles them)
        super().__init__(max_workers=workers, mp_context=self._context, initializer=_watch_parent,
                         initargs=(os.getpid(),))

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        fut = super().submit(fn, *args, **kwargs)
        self._unsettled.add(fut)
        fut.add_done_callback(self._unsettled.discard)
        return fut

    def worker_pids(self) -> set[int]:
        """PIDs of the workers alive now (started and not exited)."""
        pids = set()
        for p in list(self._context.processes):
            try:
                if not _has_exited(p):
                    pids.add(p.pid)
            except ValueError:  # not started yet, or closed
                pass
        return pids

    def abort(self) -> None:
        """Cancel queued tasks and end the workers now (their running tasks are lost). On return every worker
        has exited and every task handed out is done (cancelled, or failed with BrokenProcessPool)."""
        procs = list(self._context.processes)
        unsettled = list(self._unsettled)
        self.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            try:
                p.terminate()
            except (OSError, AttributeError, ValueError):  # already reaped / never started / closed
                pass
        for p in procs:
            try:
                p.join(timeout=ABORT_WAIT_S)
            except (AssertionError, ValueError):  # never started / closed
                pass
        # The futures are settled by the pool's manager thread once it sees the workers gone (or, for a task
        # still queued, the shutdown); it runs concurrently, so without this wait a caller could find a task
        # of a dead pool still "running". Not ``cf.wait``: it misses a future cancelled by ``cancel()``
        # (the pool cancels queued tasks that way) and would sit out its whole timeout.
        deadline = time.monotonic() + ABORT_WAIT_S
        for fut in unsettled:
            try:
                fut.exception(timeout=max(0.0, deadline - time.monotonic()))
            except (cf.CancelledError, cf.TimeoutError):
                pass


def abort(executor: cf.Executor) -> None:
    """Stop now: cancel queued tasks and, for the local pool, end its worker processes (on Ctrl-C the
    terminal signals them too, but a SIGTERM or an error reaches only this process)."""
    if isinstance(executor, LocalPool):
        executor.abort()
    else:
        executor.shutdown(wait=False, cancel_futures=True)


def make_executor(backend: str, workers: int, address: str | None = None) -> cf.Executor:
    if workers < 1:
        raise PhazeError(f"--workers must be at least 1, got {workers}")
    if backend == "ray":
        return RayExecutor(address, workers)
    if backend != "local":
        raise PhazeError(f"unknown --backend {backend!r}; use local or ray")
    if workers == 1:
        return InlineExecutor()
    return LocalPool(workers)


def cpu_time_s(executor: cf.Executor | None = None) -> float:
    """CPU seconds (user + system) used so far by this process, its finished children and the live workers
    of a local pool (read from /proc on Linux). For benchmarks: the machine may be shared, so wall time
    alone does not say what a run cost."""
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for pid in (executor.worker_pids() if isinstance(executor, LocalPool) else ()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15 of proc(5))
        except (OSError, IndexError, ValueError):
            pass
    return total
