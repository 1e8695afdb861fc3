"""Why the winner wins: a counterfactual decomposition of its gain over a reference chip, one resource at a time.

Starting from the reference chip, the resources of STEPS are set to the winner's one group at a time, in that
order; each intermediate chip is a real chip evaluated with the search's own machinery (its best plan searched
again in the search's plan space and runtime, ``phaze.search.run.fixed_chip_plan``), never an interpolation.
A step's speedup is value(after) / value(before), value = mean over the search's models of throughput /
the reference's throughput, so the steps multiply to value(winner) / value(reference) = the winner's
throughput ratio (one model) or its throughput score (several). The order matters (a step is measured with
every earlier resource already the winner's); it is stated with the result. The plan-space step is 1 because
every chip of a search, the references included, is scored in the same plan space (the full one or the paper's,
``SearchSpec.plan_space_name``): the gain of the full plan space over the paper's is the same chip's in both
(``benchmarks/bench_plan_space.py`` reports it), not a difference between two chips.

A step whose intermediate chip cannot be built (the template refuses it) or on which no plan fits is merged
with the next step, and the merged step says so. The cluster network and the plan space are the same for every
chip of a search, so their steps are 1 by construction and are listed as such.
"""
from __future__ import annotations

from dataclasses import asdict, fields, replace

from phaze.errors import ConfigError, InfeasibleError
from phaze.hardware.accelerator import Accelerator

# (resource, the Accelerator fields it sets to the winner's), in the order they are changed
STEPS = (
    ("MACs (tensor cores: count, array shape, their operand buffer and accumulator)",
     ("num_tc", "tc_rows", "tc_cols", "tc_operand_bytes", "tc_acc_bytes")),
    ("vector lanes (vector cores x lanes)", ("num_vc", "vc_width")),
    ("GLB size", ("glb_bytes",)),
    ("GLB bandwidth (banks x port width)", ("glb_banks", "glb_bank_width_bytes")),
    ("on-chip network (kind, link width)", ("noc", "noc_link_bytes")),
    ("HBM capacity", ("hbm_bytes",)),
    ("HBM bandwidth", ("hbm_bandwidth_Bps",)),
)
_NAMED = {f for _, fs in STEPS for f in fs}
# every other field of the template (clock, element size, efficiencies, overheads): one last step, if any differs
REST = ("clock and the other chip constants",
        tuple(f.name for f in fields(Accelerator) if f.name != "name" and f.name not in _NAMED))
# steps that are not the chip's: the same for every chip of a search
NOT_CHIP = (("network (cluster)", "the same cluster network for every chip of the search (no per-chip network)"),
            ("plan space", "the same plan space (--plan-space) for every chip of the search"))


def _value(tputs: list[float], ref_tputs: list[float]) -> float:
    return sum(t / r for t, r in zip(tputs, ref_tputs)) / len(tputs)


def decompose(reference: Accelerator, winner: Accelerator, models, evaluate) -> list[dict]:
    """The steps from ``reference`` to ``winner`` (module docstring). ``evaluate(model, chip)``: the chip's
    throughput (seq/s) under its best plan, InfeasibleError when no plan fits. Each step: resource, speedup,
    cumulative (product so far), changed ({field: [reference's, winner's]}), seq_per_s (per model, after the
    step), area_mm2 and peak_power_w of the chip after it, and a note where the step is merged or is 1 by
    construction."""
    def run(chip) -> list[float]:
        return [float(evaluate(m, chip)) for m in models]

    ref_t = run(reference)
    if not all(t > 0 for t in ref_t):
        raise InfeasibleError(f"the reference chip {reference.name} has no plan for every model; nothing to decompose")
    cur, cur_t, cur_v, cum = reference, ref_t, 1.0, 1.0
    out: list[dict] = []
    pending: list[tuple[str, tuple[str, ...]]] = []  # steps merged into the next one
    why_merged: list[str] = []
    for resource, names in list(STEPS) + [REST]:
        changed = {f: [getattr(reference, f), getattr(winner, f)] for f in names
                   if getattr(cur, f) != getattr(winner, f)}
        if not changed and not pending:
            if resource != REST[0]:
                out.append(_step(resource, 1.0, cum, {}, cur_t, cur, "the same in both chips"))
            continue
        want = {f: getattr(winner, f) for _, fs in pending + [(resource, names)] for f in fs}
        try:
            chip = replace(cur, name=f"{reference.name} -> {winner.name}: {resource}", **want)
            tputs = run(chip)
            if not all(t > 0 for t in tputs):
                raise InfeasibleError("no plan fits it")
        except (ConfigError, InfeasibleError) as err:
            pending.append((resource, names))
            why_merged.append(f"the chip after the {resource} step is not evaluable ({err})")
            continue
        v = _value(tputs, ref_t)
        cum *= v / cur_v
        label = " + ".join([r for r, _ in pending] + [resource])
        every = {f: [getattr(reference, f), getattr(winner, f)] for f in want if getattr(cur, f) != want[f]}
        note = "merged: " + "; ".join(why_merged) if pending else ""
        out.append(_step(label, v / cur_v, cum, every, tputs, chip, note))
        cur, cur_t, cur_v, pending, why_merged = chip, tputs, v, [], []
    if pending:
        raise InfeasibleError(f"the winner {winner.name} has no plan for every model; nothing to decompose")
    def fields_of(a) -> dict:
        return {k: v for k, v in asdict(a).items() if k != "name"}

    if fields_of(cur) != fields_of(winner):
        raise AssertionError("the decomposition did not end at the winner's chip")  # every field is in a step
    for resource, note in NOT_CHIP:
        out.append(_step(resource, 1.0, cum, {}, cur_t, cur, note))
    return out


def _step(resource: str, speedup: float, cum: float, changed: dict, tputs: list[float], chip, note: str) -> dict:
    from phaze.hardware.area import area_mm2
    from phaze.hardware.power import peak_power_w

    p = float(peak_power_w(chip))
    return {"resource": resource, "speedup": float(speedup), "cumulative": float(cum),
            "changed": {k: [_plain(a), _plain(b)] for k, (a, b) in changed.items()},
            "seq_per_s": [float(t) for t in tputs], "area_mm2": float(area_mm2(chip)),
            "peak_power_w": p if p == p else None, "note": note}


def _plain(v):
    return v if isinstance(v, (str, bool)) else (int(v) if float(v).is_integer() else float(v))


def _chip_key(chip: Accelerator) -> tuple:
    return tuple((k, v) for k, v in asdict(chip).items() if k != "name")


def step_chips(reference: Accelerator, winner: Accelerator) -> list[Accelerator]:
    """The intermediate chips ``decompose`` evaluates when every step can be built, in order (the last is the
    winner's design): what ``wins_because`` hands to the workers ahead of the decomposition."""
    cur, out = reference, []
    for resource, names in list(STEPS) + [REST]:
        want = {f: getattr(winner, f) for f in names if getattr(cur, f) != getattr(winner, f)}
        if want:
            try:
                cur = replace(cur, name=f"{reference.name} -> {winner.name}: {resource}", **want)
            except ConfigError:
                return out  # decompose merges this step with the next: evaluated there, one at a time
            out.append(cur)
    return out


def chip_throughput(model, chip: Accelerator, spec, cluster) -> float | None:
    """The chip's throughput (seq/s) for ``model`` under its best plan (``fixed_chip_plan``), None when no plan
    fits (a worker task: ``decompose`` then meets the error itself)."""
    from phaze.search.fixed_plan import fixed_chip_plan

    try:
        return float(fixed_chip_plan(model, chip, spec, cluster).best.throughput_seq_per_s)
    except (ConfigError, InfeasibleError):
        return None


def wins_because(spec, cluster, winner: Accelerator, references: dict[str, Accelerator],
                 known: list[tuple[Accelerator, list[float]]] = (), executor=None) -> dict[str, list[dict]]:
    """{reference name: its steps to ``winner``} with the search's plan machinery (``fixed_chip_plan``: the
    search's plan space and runtime); each chip evaluated once, a reference with no plan for every model (or a
    winner without) left out. ``known``: (chip, per-model throughput) the search already found by the same
    machinery (the reference's best plan, the winner's), not searched again. ``executor``: the search's pool;
    the intermediate chips of every reference (``step_chips``) are evaluated on it at once, otherwise one after
    another here with one schedule cache."""
    from phaze.schedule import ScheduleCache
    from phaze.search.fixed_plan import fixed_chip_plan

    cache = ScheduleCache()
    memo = {(m.name, _chip_key(chip)): float(t) for chip, tputs in known for m, t in zip(spec.models, tputs)
            if t > 0}
    if executor is not None:
        jobs = {}
        for ref in references.values():
            for chip in [ref, *step_chips(ref, winner)]:
                for m in spec.models:
                    key = (m.name, _chip_key(chip))
                    if key not in memo and key not in jobs:
                        jobs[key] = executor.submit(chip_throughput, m, chip, spec, cluster)
        memo.update({key: t for key, job in jobs.items() if (t := job.result()) is not None})

    def evaluate(model, chip) -> float:
        key = (model.name, _chip_key(chip))
        if key not in memo:
            memo[key] = fixed_chip_plan(model, chip, spec, cluster, schedule_cache=cache).best.throughput_seq_per_s
        return memo[key]

    out = {}
    for name, ref in references.items():
        try:
            out[name] = decompose(ref, winner, spec.models, evaluate)
        except InfeasibleError:  # no ratio to decompose
            continue
    return out
