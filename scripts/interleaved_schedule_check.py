"""How far is phaze's closed-form interleaved pipeline time from Megatron's schedule played op by op?

``phaze.placement.stage.iteration_s`` prices an interleaved plan as sum_i T_i / v + (m - 1/v) max_i T_i (T_i:
device i's fwd + bwd + sends per microbatch), exact when every model chunk takes T_i / v. Real chunks differ:
the first holds the embedding, the last the LM head and its loss (with a 128k-256k vocabulary as heavy as a
block or more). This replays Megatron-Core's interleaved schedule (megatron/core/pipeline_parallel/
schedules.py, forward_backward_pipelining_with_interleaving, r0.10+: per device the warmup forwards, then one
forward and one backward per step, then the remaining backwards; forward k runs chunk (k mod pv) // p) with
each chunk's own times, every op starting when its device is free and its input is ready (the previous
virtual stage's forward, the next one's backward), and compares the two on the validation runs with v > 1.

    python scripts/interleaved_schedule_check.py

Analysis only; nothing here is part of the model. ``tests/validation/test_interleaved_schedule.py`` checks the
replay against the closed form on alike chunks (where both are exact) and keeps the runs' gap in bounds.
"""
from __future__ import annotations


def device_program(i: int, p: int, m: int, v: int) -> list[tuple[str, int, int]]:
    """Device ``i``'s ops in Megatron's interleaved order: (kind "F"/"B", chunk, microbatch)."""
    n = m * v
    warm = min((p - i - 1) * 2 + (v - 1) * p, n)

    def op(kind: str, k: int) -> tuple[str, int, int]:
        c = (k % (p * v)) // p
        mb = (k // (p * v)) * p + k % p
        return (kind, c if kind == "F" else v - 1 - c, mb)

    prog = [op("F", k) for k in range(warm)]
    for j in range(n - warm):
        prog += [op("F", warm + j), op("B", j)]
    prog += [op("B", j) for j in range(n - warm, n)]
    return prog


def replay(fwd_s: list[list[float]], bwd_s: list[list[float]], m: int) -> float:
    """Makespan of the interleaved schedule for per-device, per-chunk op times ``fwd_s[i][j]`` / ``bwd_s[i][j]``
    (p devices, v chunks each; virtual stage j * p + i). Each op starts when its device has finished the op
    before it and its input is ready; raises if the order deadlocks."""
    p, v = len(fwd_s), len(fwd_s[0])
    progs = [device_program(i, p, m, v) for i in range(p)]
    pos = [0] * p
    free = [0.0] * p
    done: dict[tuple[str, int, int], float] = {}  # (kind, virtual stage, microbatch) -> end time
    last = p * v - 1
    remaining = sum(len(x) for x in progs)
    while remaining:
        moved = False
        for i in range(p):
            while pos[i] < len(progs[i]):
                kind, c, mb = progs[i][pos[i]]
                vs = c * p + i
                if kind == "F":
                    dep = ("F", vs - 1, mb) if vs > 0 else None
                    dur = fwd_s[i][c]
                else:
                    dep = ("B", vs + 1, mb) if vs < last else ("F", vs, mb)
                    dur = bwd_s[i][c]
                if dep is not None and dep not in done:
                    break
                start = max(free[i], done[dep] if dep is not None else 0.0)
                free[i] = start + dur
                done[(kind, vs, mb)] = free[i]
                pos[i] += 1
                remaining -= 1
                moved = True
        if not moved:
            raise RuntimeError("the schedule deadlocked")
    return max(free)


def closed_form(fwd_s: list[list[float]], bwd_s: list[list[float]], m: int) -> float:
    """phaze's pipeline time for the same ops: sum_i T_i / v + (m - 1/v) max_i T_i."""
    from phaze.placement.stage import pipeline_time_s

    v = len(fwd_s[0])
    T = [sum(f) + sum(b) for f, b in zip(fwd_s, bwd_s)]
    return pipeline_time_s(T, m, v)


def chunk_times(case) -> tuple[list[list[float]], list[list[float]], int]:
    """Per-device, per-chunk (fwd + its forward send, bwd + its backward send) of a validation case, from the
    LayerCosts ``evaluate`` builds for it and the send formulas ``evaluate_costs`` sums into T_i."""
    import phaze.placement.evaluation as ev_mod
    from phaze.placement import stage as st
    import importlib

    vmod = importlib.import_module("phaze.validation.validate")
    seen = {}
    orig = ev_mod.evaluate_costs

    def spy(plan, costs, cluster, *a, **k):
        seen.update(plan=plan, costs=costs, cluster=cluster)
        return orig(plan, costs, cluster, *a, **k)

    ev_mod.evaluate_costs = spy
    try:
        vmod._plan_evaluation(case)
    finally:
        ev_mod.evaluate_costs = orig
    plan, costs, cluster = seen["plan"], seen["costs"], seen["cluster"]
    p, v, n_layers = plan.pp, plan.interleave, plan.num_layers
    topo = st.Topology.of(cluster, plan.tp, plan.grad_sync_ranks, p)
    F, B = [], []
    for i in range(p):
        c = costs[plan.recompute_of(i)]
        fi, bi = [], []
        for j, (a, b) in enumerate(plan.chunks_of(i)):
            k = i + j * p
            e, h = int(a == 0), int(b == n_layers)
            nb = b - a - e - h
            s = st.stage_sums(c, e, nb, h)
            out = float(st.send_s(c, st.boundary_out_bytes(c, nb, h), topo.pp_tier, topo.tp_tier)) \
                if k < p * v - 1 else 0.0
            back = float(st.send_s(c, st.boundary_in_bytes(c, e, nb), topo.pp_tier, topo.tp_tier)) if k > 0 else 0.0
            fi.append(float(s.fwd_s) + out)
            bi.append(float(s.bwd_s) + back)
        F.append(fi)
        B.append(bi)
    return F, B, plan.num_microbatches


def interleaved_cases():
    from phaze.validation.cases import RUNS_FILE, packaged_cases

    for name in (RUNS_FILE, "held_out_runs.json", "held_out2_runs.json", "held_out3_runs.json", "held_out4_runs.json"):
        for case in packaged_cases(name).time:
            if case.interleave > 1 and case.measured_s is not None:  # the runs whose time is compared
                yield case


def main() -> None:
    print(f"{'run':45s} {'p':>3s} {'v':>3s} {'m':>4s} {'closed form':>12s} {'replay':>10s} {'gap':>7s}")
    for case in interleaved_cases():
        F, B, m = chunk_times(case)
        cf, rp = closed_form(F, B, m), replay(F, B, m)
        print(f"{case.label[:45]:45s} {len(F):3d} {len(F[0]):3d} {m:4d} {cf:11.3f}s {rp:9.3f}s {100 * (cf / rp - 1):+6.2f}%")


if __name__ == "__main__":
    main()
