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
- Sharing: at any moment the running ops get max-min fair speeds (``fair_speeds``: all speeds rise together
  until a resource is used up, the ops drawing it stop there and the rest go on, up to full speed). An op alone
  runs at full speed, with all it needs; ops that draw nothing (collectives) run at full speed.
- Order: each core keeps its ops in the solver's order, and an op starts as soon as its predecessors and
  the previous op on each of its cores have ended (the solver's core assignment is kept).

``best_shared`` is what ``solve`` returns: the shortest of the solvers' schedules (the branch and bound's best
and each schedule it improved on, from the heuristic's) re-timed under two sharing policies (max-min fair,
first come first served in the solver's order), ``rigid_schedule`` (list scheduling
with the GLB and HBM rates as two more cumulative resources: no op slowed, none over the supply) and
``serial_schedule`` (every op on its fastest mode, tensor and vector ops one after another, so never two
drawing bandwidth at once; collectives on the network port as the dependencies allow). So a layer is never
slower than running its ops one at a time, and the vectorized upper bound (``phaze.schedule.vector_bounds``,
the serial schedule with every op on all of its cores) holds.

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


def fair_speeds(rates: dict[int, tuple[float, float]], supply: tuple[float, float]) -> dict[int, float]:
    """Max-min fair speeds (progressive filling): every op's speed rises together from 0; when a resource (GLB,
    HBM) is used up, the ops drawing it stop at that speed and the others go on, up to full speed (1). An op
    that draws nothing runs at full speed. The speeds times the rates never sum above the supply."""
    speed: dict[int, float] = {}
    free = [i for i in sorted(rates) if rates[i][0] > 0 or rates[i][1] > 0]
    for i in rates:
        if i not in free:
            speed[i] = 1.0
    used = [0.0, 0.0]
    while free:
        # the speed at which the next resource runs out (1 if none does before full speed)
        level, tight = 1.0, None
        for r in (0, 1):
            want = sum(rates[i][r] for i in free)
            if want > 0 and (supply[r] - used[r]) < level * want:
                level, tight = max(supply[r] - used[r], 0.0) / want, r
        stop = free if tight is None else [i for i in free if rates[i][tight] > 0]
        for i in stop:
            speed[i] = level
            used[0] += level * rates[i][0]
            used[1] += level * rates[i][1]
        free = [i for i in free if i not in speed]
    return speed


def first_come_speeds(rates: dict[int, tuple[float, float]], supply: tuple[float, float],
                      order: Sequence[int]) -> dict[int, float]:
    """Speeds by priority: in ``order``, each op takes the largest speed (at most 1) that what the ops before it
    left of the supply allows; an op that draws nothing runs at full speed. The first op drawing anything runs
    at full speed (its rates are within the supply)."""
    left = [supply[0], supply[1]]
    speed: dict[int, float] = {}
    for i in order:
        g, h = rates[i]
        s = 1.0
        if g > 0:
            s = min(s, max(left[0], 0.0) / g)
        if h > 0:
            s = min(s, max(left[1], 0.0) / h)
        speed[i] = s
        left[0] -= s * g
        left[1] -= s * h
    return speed


POLICIES = ("fair", "first")  # fair_speeds, first_come_speeds (in the solver's start order)


def share_bandwidth(problem: ScheduleProblem, ops: Sequence[ScheduledOp], policy: str = "fair"
                    ) -> tuple[tuple[ScheduledOp, ...], tuple[Segment, ...]]:
    """``ops`` (a schedule of ``problem`` at full bandwidth) re-timed under shared bandwidth (module
    docstring), and the segments that show each running op's speed. ``policy``: how concurrent ops share
    (``POLICIES``): max-min fair, or first come first served in the order of ``ops``' starts."""
    if policy not in POLICIES:
        raise ValueError(f"bandwidth sharing policy {policy!r}: use one of {POLICIES}")
    rank = {i: r for r, i in enumerate(sorted(range(len(ops)), key=lambda i: (ops[i].start_s, ops[i].end_s, i)))}
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
        if policy == "fair":
            speed = fair_speeds({i: rate[i] for i in running}, (G, H))
        else:
            speed = first_come_speeds({i: rate[i] for i in running}, (G, H), sorted(running, key=rank.get))
        moving = [i for i in running if speed[i] > 0]  # never empty: the first op drawing anything runs
        first = min(moving, key=lambda i: (remaining[i] / speed[i], i))
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


def _makespan(ops: Sequence[ScheduledOp]) -> float:
    return max((so.end_s for so in ops), default=0.0)


def best_shared(problem: ScheduleProblem, schedules: Sequence[Sequence[ScheduledOp]]) -> tuple[ScheduledOp, ...]:
    """The shortest of the schedules that keep the shared supply (module docstring): each of the solvers'
    ``schedules`` (full bandwidth) re-timed under each sharing policy, the serial schedule and the rigid list
    schedule; the first of equal makespans in that order. (Solving again with each op as long as sharing made
    it was tried and gained nothing on GPT-2 XL's layers.)"""
    cands = ([share_bandwidth(problem, ops, policy)[0] for ops in schedules for policy in POLICIES]
             + [serial_schedule(problem)] + [rigid_schedule(problem)])
    return tuple(min(cands, key=_makespan))  # the first of equals


def _fits(placed: list, t: float, end: float, need: tuple, cap: tuple) -> bool:
    """Whether ``need`` (cores, GLB, HBM) fits beside the ``placed`` (start, end, cores, GLB, HBM) over [t, end)."""
    points = [t] + [p[0] for p in placed if t < p[0] < end]
    for x in points:
        use = [0.0, 0.0, 0.0]
        for p in placed:
            if p[0] <= x < p[1]:
                use[0] += p[2]
                use[1] += p[3]
                use[2] += p[4]
        if any(use[r] + need[r] > cap[r] * (1 + 1e-12) for r in range(3)):
            return False
    return True


def rigid_schedule(problem: ScheduleProblem) -> tuple[ScheduledOp, ...]:
    """List scheduling in which every op runs at full speed and starts only where its cores and its GLB and HBM
    rates fit beside the ops already placed (the bandwidth as two more cumulative resources): a schedule that
    keeps the supply without slowing any op. Ops in order of their longest path to the end (fastest modes),
    each in the mode that ends earliest (ties: fewer cores)."""
    from phaze.schedule.bounds import heads_tails
    from phaze.schedule.heuristic import assign_cores, serial_sgs, to_scheduled_ops

    d_min = [op.min_duration_s for op in problem.ops]
    _, tail = heads_tails(problem, d_min)
    placed: dict[str, list] = {"tc": [], "vc": [], "net": []}
    bw: list = []  # (start, end, 0, GLB, HBM) of every op drawing bandwidth
    G, H = problem.glb_supply_Bps, problem.hbm_supply_Bps

    def place(i: int, ready: float) -> tuple[float, int]:
        op = problem.ops[i]
        cap = problem.capacity(op.kind)
        best = None
        for m, (k, d) in enumerate(op.modes):
            g, h = op.rates[m] if op.rates else (0.0, 0.0)
            mine = [(s0, e0, c, 0.0, 0.0) for s0, e0, c in placed[op.kind]]
            times = sorted({ready} | {p[1] for p in mine + bw if p[1] > ready})
            t = next(t for t in times if _fits(mine, t, t + d, (k, 0.0, 0.0), (cap, 1.0, 1.0))
                     and _fits(bw, t, t + d, (0.0, g, h), (1.0, G, H)))
            if best is None or (t + d, k) < best[0]:
                best = ((t + d, k), m, t, d, g, h)
        _, m, t, d, g, h = best
        placed[op.kind].append((t, t + d, op.modes[m][0]))
        if g > 0 or h > 0:
            bw.append((t, t + d, 0.0, g, h))
        return t, m

    timing = serial_sgs(problem, [tail[i] + d_min[i] for i in range(len(problem.ops))], place)
    return to_scheduled_ops(problem, timing, assign_cores(problem, timing))


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
