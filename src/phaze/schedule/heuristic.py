"""List scheduling (serial schedule generation with backfilling) and the helpers that turn start times
into a concrete schedule: core assignment and the forward re-timing pass."""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from phaze.schedule.bounds import heads_tails
from phaze.schedule.problem import ScheduledOp, ScheduleProblem


@dataclass(frozen=True)
class Timing:
    """Start, end and chosen mode index of every op (problem order); internal to the solver."""

    starts: tuple[float, ...]
    ends: tuple[float, ...]
    modes: tuple[int, ...]

    @property
    def makespan(self) -> float:
        return max(self.ends, default=0.0)


def _earliest_start(placed: list[tuple[float, float, int]], ready: float, dur: float, need: int,
                    cap: int) -> float:
    """Earliest t >= ready with at most cap - need cores in use over [t, t + dur) (cumulative profile)."""
    limit = cap - need
    cands = sorted({ready} | {e for _, e, _ in placed if e > ready})
    for t in cands:
        end = t + dur
        points = [t] + [s for s, _, _ in placed if t < s < end]
        if all(sum(k for s, e, k in placed if s <= p < e) <= limit for p in points):
            return t
    raise AssertionError("unreachable: after the last end every core is free")


def serial_sgs(problem: ScheduleProblem, priority: list[float], place) -> Timing:
    """The serial schedule-generation scheme: repeatedly take the eligible op (all predecessors placed) of highest
    priority and let ``place(i, ready_s)`` choose and record its start and mode, returning ``(start_s, mode)``."""
    n = len(problem.ops)
    preds, succs = problem.preds(), problem.succs()
    missing = [len(p) for p in preds]
    eligible = [(-priority[i], i) for i in range(n) if missing[i] == 0]
    heapq.heapify(eligible)
    starts, ends, modes = [0.0] * n, [0.0] * n, [0] * n
    while eligible:
        _, i = heapq.heappop(eligible)
        t, m = place(i, max((ends[p] for p in preds[i]), default=0.0))
        starts[i], ends[i], modes[i] = t, t + problem.ops[i].modes[m][1], m
        for j in succs[i]:
            missing[j] -= 1
            if missing[j] == 0:
                heapq.heappush(eligible, (-priority[j], j))
    return Timing(tuple(starts), tuple(ends), tuple(modes))


def list_schedule(problem: ScheduleProblem, priority: list[float], forced_mode: str | None = None) -> Timing:
    """Serial SGS: repeatedly take the eligible op of highest priority and give it the mode that finishes
    earliest (ties: fewer cores), at its earliest resource-feasible start. ``forced_mode="max"`` puts every
    op on all of its allowed cores (largest mode)."""
    placed: dict[str, list[tuple[float, float, int]]] = {"tc": [], "vc": [], "net": []}

    def place(i: int, ready: float) -> tuple[float, int]:
        op = problem.ops[i]
        cap = problem.capacity(op.kind)
        choices = [len(op.modes) - 1] if forced_mode == "max" else range(len(op.modes))
        best = None
        for m in choices:
            k, d = op.modes[m]
            t = _earliest_start(placed[op.kind], ready, d, k, cap)
            key = (t + d, k)
            if best is None or key < best[0]:
                best = (key, m, t)
        _, m, t = best
        placed[op.kind].append((t, t + op.modes[m][1], op.modes[m][0]))
        return t, m

    return serial_sgs(problem, priority, place)


def heuristic_timing(problem: ScheduleProblem) -> Timing:
    """Best of a few priority rules (longest tail, longest head+tail, index order, all-cores)."""
    n = len(problem.ops)
    d = [op.min_duration_s for op in problem.ops]
    head, tail = heads_tails(problem, d)
    rules = [
        [tail[i] + d[i] for i in range(n)],
        [head[i] + d[i] + tail[i] + 1e-9 * (tail[i] + d[i]) for i in range(n)],
        [float(n - i) for i in range(n)],
    ]
    runs = [list_schedule(problem, r) for r in rules]
    runs.append(list_schedule(problem, rules[0], forced_mode="max"))
    return min(runs, key=lambda t: t.makespan)  # min keeps the first on ties: deterministic


def assign_cores(problem: ScheduleProblem, timing: Timing) -> list[tuple[int, ...]]:
    """Concrete core indices per op: in order of start, take the earliest-free cores. Possible whenever
    the cumulative capacity holds, since cores need not be contiguous. Cores freed at the same time are
    kept together in one bucket, so the cost grows with the number of ops, not of cores."""
    heaps = {kind: [(float("-inf"), -1, list(range(problem.capacity(kind))))] for kind in ("tc", "vc", "net")}
    out: list[tuple[int, ...]] = [()] * len(problem.ops)
    for i in sorted(range(len(problem.ops)), key=lambda i: (timing.starts[i], timing.ends[i], i)):
        op = problem.ops[i]
        k = op.modes[timing.modes[i]][0]
        h = heaps[op.kind]
        got: list[int] = []
        while len(got) < k:
            if not h:
                raise AssertionError(f"op {op.name!r}: fewer than {k} {op.kind} cores exist")
            free, seq, cores = heapq.heappop(h)
            if free > timing.starts[i]:
                raise AssertionError(f"op {op.name!r}: fewer than {k} free {op.kind} cores at its start")
            take = k - len(got)
            got.extend(cores[:take])
            if len(cores) > take:
                heapq.heappush(h, (free, seq, cores[take:]))
        heapq.heappush(h, (timing.ends[i], i, got))
        out[i] = tuple(sorted(got))
    return out


def retime(problem: ScheduleProblem, timing: Timing, cores: list[tuple[int, ...]],
           durations: list[float]) -> Timing:
    """Forward pass keeping each core's op order and every dependency, with new ``durations``: each op
    starts when its predecessors and its cores' previous ops have ended. Shorter durations never delay."""
    n = len(problem.ops)
    preds = problem.preds()
    core_free: dict[tuple[str, int], float] = {}
    starts, ends = [0.0] * n, [0.0] * n
    for i in sorted(range(n), key=lambda i: (timing.starts[i], timing.ends[i], i)):
        kind = problem.ops[i].kind
        t = max([ends[p] for p in preds[i]] + [core_free.get((kind, c), 0.0) for c in cores[i]], default=0.0)
        starts[i], ends[i] = t, t + durations[i]
        for c in cores[i]:
            core_free[(kind, c)] = ends[i]
    return Timing(tuple(starts), tuple(ends), timing.modes)


def to_scheduled_ops(problem: ScheduleProblem, timing: Timing,
                     cores: list[tuple[int, ...]]) -> tuple[ScheduledOp, ...]:
    return tuple(
        ScheduledOp(op.name, op.kind, float(timing.starts[i]), float(timing.ends[i]),
                    tuple(f"{op.kind}{c}" for c in cores[i]))
        for i, op in enumerate(problem.ops))
