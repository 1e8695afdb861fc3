"""An independent checker of a schedule against its problem (shares no code with the solvers)."""
from __future__ import annotations

from phaze.schedule.problem import Schedule, ScheduleProblem


class ScheduleViolation(AssertionError):
    """A schedule breaks a rule of its problem; the message names the ops involved."""


def validate(problem: ScheduleProblem, schedule: Schedule, rtol: float = 1e-9) -> None:
    """Raise ScheduleViolation on: wrong op list, a duration matching no mode for the cores used (with shared
    bandwidth: shorter than its mode, or needing more bandwidth than the supply, ``_check_bandwidth``), an
    unknown or repeated core, two ops overlapping on one core, more cores in use than exist, a dependency
    started before its predecessor ended, a makespan other than the last end, or a lower bound above it."""
    scale = max([schedule.makespan_s] + [d for op in problem.ops for _, d in op.modes] + [1e-300])
    tol = rtol * scale
    if len(schedule.ops) != len(problem.ops):
        raise ScheduleViolation(f"{len(schedule.ops)} scheduled ops for {len(problem.ops)} problem ops")
    busy: dict[str, list[tuple[float, float, str]]] = {}
    for op, so in zip(problem.ops, schedule.ops):
        if so.name != op.name or so.kind != op.kind:
            raise ScheduleViolation(f"scheduled op {so.name!r}/{so.kind} is not problem op {op.name!r}/{op.kind}")
        if not so.start_s >= -tol:
            raise ScheduleViolation(f"op {op.name!r} starts before time 0 ({so.start_s})")
        k = len(so.cores)
        if len(set(so.cores)) != k:
            raise ScheduleViolation(f"op {op.name!r} lists a core twice: {so.cores}")
        cap = problem.capacity(op.kind)
        valid = {f"{op.kind}{c}" for c in range(cap)}
        bad = [c for c in so.cores if c not in valid]
        if bad:
            raise ScheduleViolation(f"op {op.name!r} uses cores {bad} not among the {cap} {op.kind} cores")
        durs = [d for kk, d in op.modes if kk == k]
        if not durs:
            raise ScheduleViolation(f"op {op.name!r} runs on {k} cores, not one of its modes {op.modes}")
        lasts = so.end_s - so.start_s
        # under shared bandwidth an op may run slower than its mode (never faster); else exactly its mode
        if (lasts < durs[0] - tol) or (not problem.shares_bandwidth and lasts > durs[0] + tol):
            raise ScheduleViolation(f"op {op.name!r} lasts {lasts} s on {k} cores; its mode says {durs[0]} s")
        for c in so.cores:
            busy.setdefault(c, []).append((so.start_s, so.end_s, op.name))
    for core, items in busy.items():
        items.sort()
        for (s1, e1, n1), (s2, e2, n2) in zip(items, items[1:]):
            if s2 < e1 - tol:
                raise ScheduleViolation(f"ops {n1!r} and {n2!r} overlap on core {core}")
    for kind in ("tc", "vc", "net"):
        events = sorted((t, delta) for op, so in zip(problem.ops, schedule.ops) if op.kind == kind
                        for t, delta in ((so.start_s + tol, len(so.cores)), (so.end_s - tol, -len(so.cores)))
                        if so.end_s - so.start_s > 2 * tol)
        level = 0
        for t, delta in sorted(events, key=lambda e: (e[0], e[1])):
            level += delta
            if level > problem.capacity(kind):
                raise ScheduleViolation(f"{level} {kind} cores in use at {t} s, only {problem.capacity(kind)} exist")
    for a, b in problem.edges:
        if schedule.ops[b].start_s < schedule.ops[a].end_s - tol:
            raise ScheduleViolation(f"op {problem.ops[b].name!r} starts before its predecessor "
                                    f"{problem.ops[a].name!r} ends")
    if problem.shares_bandwidth:
        _check_bandwidth(problem, schedule, rtol)
    last = max((so.end_s for so in schedule.ops), default=0.0)
    if abs(schedule.makespan_s - last) > tol:
        raise ScheduleViolation(f"makespan {schedule.makespan_s} s is not the last end {last} s")
    if schedule.lower_bound_s > schedule.makespan_s + tol:
        raise ScheduleViolation(f"lower bound {schedule.lower_bound_s} s exceeds makespan {schedule.makespan_s} s")


def _check_bandwidth(problem: ScheduleProblem, schedule: Schedule, rtol: float) -> None:
    """A necessary condition for the ops to fit the shared GLB and HBM supply: over every window [a, b]
    between two of the schedule's start/end times, the bytes of the ops that run entirely inside it (each
    op's full-speed duration x its rates) fit the supply x (b - a)."""
    need = []
    for op, so in zip(problem.ops, schedule.ops):
        k = len(so.cores)
        d = next(d for kk, d in op.modes if kk == k)
        g, h = op.rate(k)
        if g > 0 or h > 0:
            need.append((so.start_s, so.end_s, g * d, h * d, op.name))
    times = sorted({t for s, e, *_ in need for t in (s, e)})
    for i, a in enumerate(times):
        for b in times[i + 1:]:
            inside = [x for x in need if x[0] >= a and x[1] <= b]
            for j, supply, what in ((2, problem.glb_supply_Bps, "GLB"), (3, problem.hbm_supply_Bps, "HBM")):
                total = sum(x[j] for x in inside)
                if total > supply * (b - a) * (1 + rtol) + rtol * total:
                    raise ScheduleViolation(
                        f"ops {', '.join(repr(x[4]) for x in inside)} move {total:.6g} B of {what} within "
                        f"[{a}, {b}] s, more than its {supply:.6g} B/s supply delivers")
