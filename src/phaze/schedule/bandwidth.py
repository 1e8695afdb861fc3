"""Shared GLB and HBM bandwidth in a layer schedule (issue 34 item 1e).

Every op is costed as if it ran alone (``phaze.cost.onchip``: the whole GLB supply, at most one network
link per core, and all of HBM), and the solvers schedule those durations. Ops that then run at the same
time share the supply. ``share_bandwidth`` re-times a schedule so they never draw more than it:

- An op runs at a speed s(t) in (0, 1]: at full speed it draws its ``rates`` (``SchedOp.rates``: the GLB
  and HBM bytes per second at which the cost model gives it its full-bandwidth duration d), at speed s
  a fraction s of them, and it ends once the integral of s over its run reaches d.
- Safe: every time term of an op's cost is a sum or max of pieces ``a + b / bandwidth`` with a, b >= 0
  (cycles, bytes; a tile's max(cycles, bytes / bandwidth)), so at s times the bandwidth each piece takes at
  most 1/s times as long: an op given a fraction s of its rates progresses at least at rate s. The cost
  model is not asked to interpolate: ``phaze.schedule.build`` checks by costing each op at its rates that
  they give its full-bandwidth duration.
- Sharing: at any moment the ops drawing bandwidth run at one speed, s = min(1, GLB supply / their GLB
  rates, HBM supply / their HBM rates) (an op alone runs at full speed, with all it needs); ops that draw
  nothing (collectives) run at full speed.
- Order: each core keeps its ops in the solver's order, and an op starts as soon as its predecessors and
  the previous op on each of its cores have ended (the solver's core assignment is kept).

``serial_schedule`` is the other schedule ``solve`` considers: every op on its fastest mode, tensor and
vector ops one after another (never two drawing bandwidth at once), collectives on the network port as the
dependencies allow. ``solve`` returns the shorter: the re-timed schedule is never worse than running the
layer's ops one at a time, and the vectorized upper bound (``phaze.schedule.vector_bounds``) is that
serial schedule with every op on all of its cores.

``phaze.schedule.bounds.bandwidth_bound_s`` adds to the lower bound: the layer's bytes over the supply.

What this gives up. The solvers optimize durations that ignore contention, so their optimum is a lower
bound on the optimum under shared bandwidth, and the re-timed schedule an upper bound: the layer time
reported is feasible under shared bandwidth and lies within ``Schedule.gap`` of the lower bound, but it is
no longer proven optimal for the shared problem when the re-timing stretched it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from phaze.schedule.problem import ScheduledOp, ScheduleProblem, topo_order

FINISH_RTOL = 1e-12  # an op whose remaining full-speed time is below this share of its duration has ended


@dataclass(frozen=True)
class Segment:
    """An interval of the re-timed schedule with the same ops running: (op index, speed) of each."""

    start_s: float
    end_s: float
    speeds: tuple[tuple[int, float], ...]


def full_speed(problem: ScheduleProblem, ops: Sequence[ScheduledOp]) -> tuple[list[float], list[tuple[float, float]]]:
    """Per op: its duration at full speed on the cores it was given (its mode's) and its (GLB, HBM) rates."""
    dur, rate = [], []
    for op, so in zip(problem.ops, ops):
        k = len(so.cores)
        ds = [d for kk, d in op.modes if kk == k]
        if not ds:
            raise ValueError(f"op {op.name!r} runs on {k} cores, not one of its modes {op.modes}")
        dur.append(ds[0])
        rate.append(op.rate(k))
    return dur, rate


def _core_order_deps(problem: ScheduleProblem, ops: Sequence[ScheduledOp]) -> list[set[int]]:
    """Per op: its predecessors and, on each of its cores, the op before it there (by start in ``ops``)."""
    deps = [set(p) for p in problem.preds()]
    last: dict[str, int] = {}
    for i in sorted(range(len(ops)), key=lambda i: (ops[i].start_s, ops[i].end_s, i)):
        for c in ops[i].cores:
            if c in last:
                deps[i].add(last[c])
            last[c] = i
    return deps


def share_bandwidth(problem: ScheduleProblem, ops: Sequence[ScheduledOp]
                    ) -> tuple[tuple[ScheduledOp, ...], tuple[Segment, ...]]:
    """``ops`` (a schedule of ``problem`` at full bandwidth) re-timed under shared bandwidth (module
    docstring), and the segments that show each running op's speed."""
    n = len(problem.ops)
    dur, rate = full_speed(problem, ops)
    deps = _core_order_deps(problem, ops)
    succ: list[list[int]] = [[] for _ in range(n)]
    for i, ds in enumerate(deps):
        for p in ds:
            succ[p].append(i)
    waiting = [len(d) for d in deps]
    remaining = list(dur)
    start, end = [0.0] * n, [0.0] * n
    ready = [i for i in range(n) if waiting[i] == 0]
    running: list[int] = []
    segments: list[Segment] = []
    t = 0.0
    G, H = problem.glb_supply_Bps, problem.hbm_supply_Bps
    while ready or running:
        for i in ready:
            start[i] = t
            running.append(i)
        ready = []
        g = sum(rate[i][0] for i in running)
        h = sum(rate[i][1] for i in running)
        s = min(1.0, G / g if g > G else 1.0, H / h if h > H else 1.0)
        speed = {i: (s if rate[i][0] > 0 or rate[i][1] > 0 else 1.0) for i in running}
        first = min(running, key=lambda i: (remaining[i] / speed[i], i))
        dt = remaining[first] / speed[first]
        t1 = t + dt
        segments.append(Segment(t, t1, tuple((i, speed[i]) for i in sorted(running))))
        done = []
        for i in running:
            remaining[i] = 0.0 if i == first else remaining[i] - speed[i] * dt
            if remaining[i] <= FINISH_RTOL * dur[i]:
                done.append(i)
        for i in done:
            end[i] = t1
            running.remove(i)
            for j in succ[i]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    ready.append(j)
        ready.sort()
        t = t1
    out = tuple(ScheduledOp(so.name, so.kind, start[i], end[i], so.cores) for i, so in enumerate(ops))
    return out, tuple(segments)


def serial_schedule(problem: ScheduleProblem) -> tuple[ScheduledOp, ...]:
    """Every op on its fastest mode, tensor and vector ops one at a time in topological order, collectives on
    the network port as the dependencies allow (module docstring): no two ops ever draw bandwidth at once."""
    n = len(problem.ops)
    preds = problem.preds()
    start, end = [0.0] * n, [0.0] * n
    free = {"core": 0.0, "net": 0.0}
    for i in topo_order(n, problem.edges):
        op = problem.ops[i]
        lane = "net" if op.kind == "net" else "core"
        k, d = min(op.modes, key=lambda m: (m[1], m[0]))
        start[i] = max([free[lane]] + [end[p] for p in preds[i]])
        end[i] = start[i] + d
        free[lane] = end[i]
    return tuple(ScheduledOp(op.name, op.kind, start[i], end[i],
                             tuple(f"{op.kind}{c}" for c in range(min(op.modes, key=lambda m: (m[1], m[0]))[0])))
                 for i, op in enumerate(problem.ops))


def concurrent_draw(problem: ScheduleProblem, ops: Sequence[ScheduledOp], segments: Sequence[Segment]
                    ) -> list[tuple[float, float, float, float]]:
    """(start, end, GLB bytes/s, HBM bytes/s) drawn in each segment: the sum over its running ops of speed x
    rates (what ``validate`` and the tests hold against the supply)."""
    _, rate = full_speed(problem, ops)
    return [(sg.start_s, sg.end_s, sum(s * rate[i][0] for i, s in sg.speeds),
             sum(s * rate[i][1] for i, s in sg.speeds)) for sg in segments]
