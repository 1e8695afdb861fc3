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
with the next step, and the merged step says so. The network: with a network axis (issue 34 item 5) every chip
step runs on the reference's own network (TPU v4's ICI) and the "network (cluster)" step then moves the winner's
chip onto the winner's network (a real speedup; its area and peak power with that network's PHY); without one,
every chip shares the search's cluster and the step is 1 by construction.
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
    ("GLB bandwidth (banks x port width, input staging)", ("glb_banks", "glb_bank_width_bytes", "input_staging")),
    ("on-chip network (kind, link width)", ("noc", "noc_link_bytes")),
    ("HBM capacity", ("hbm_bytes",)),
    ("HBM bandwidth", ("hbm_bandwidth_Bps",)),
)
_NAMED = {f for _, fs in STEPS for f in fs}
# every other field of the template (clock, element size, efficiencies, overheads): one last step, if any differs
REST = ("clock and the other chip constants",
        tuple(f.name for f in fields(Accelerator) if f.name != "name" and f.name not in _NAMED))
# steps that are not the chip's: the same for every chip of a search
NETWORK_STEP = "network (cluster)"
NOT_CHIP = ((NETWORK_STEP, "the same cluster network for every chip of the search (no per-chip network)"),
            ("plan space", "the same plan space (--plan-space) for every chip of the search"))


def _value(tputs: list[float], ref_tputs: list[float]) -> float:
    return sum(t / r for t, r in zip(tputs, ref_tputs)) / len(tputs)


def decompose(reference: Accelerator, winner: Accelerator, models, evaluate, networks=None) -> list[dict]:
    """The steps from ``reference`` to ``winner`` (module docstring). ``evaluate(model, chip)``: the chip's
    throughput (seq/s) under its best plan, InfeasibleError when no plan fits. Each step: resource, speedup,
    cumulative (product so far), changed ({field: [reference's, winner's]}), seq_per_s (per model, after the
    step), area_mm2 and peak_power_w of the chip after it, and a note where the step is merged or is 1 by
    construction. ``networks``: {"reference": ChipNetwork, "winner": ChipNetwork} when the chips have their own
    networks; ``evaluate(model, chip, which)`` then scores on the "reference" or "winner" network (module
    docstring)."""
    def run(chip, which: str = "reference") -> list[float]:
        return [float(evaluate(m, chip) if networks is None else evaluate(m, chip, which)) for m in models]

    phy = {} if networks is None else {k: _phy(n) for k, n in networks.items()}

    def step(*a, net: str = "reference") -> dict:
        return _step(*a, phy=phy.get(net))

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
                out.append(step(resource, 1.0, cum, {}, cur_t, cur, "the same in both chips"))
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
        out.append(step(label, v / cur_v, cum, every, tputs, chip, note))
        cur, cur_t, cur_v, pending, why_merged = chip, tputs, v, [], []
    if pending:
        raise InfeasibleError(f"the winner {winner.name} has no plan for every model; nothing to decompose")
    def fields_of(a) -> dict:
        return {k: v for k, v in asdict(a).items() if k != "name"}

    if fields_of(cur) != fields_of(winner):
        raise AssertionError("the decomposition did not end at the winner's chip")  # every field is in a step
    for resource, note in NOT_CHIP:
        if resource == NETWORK_STEP and networks is not None:
            ref_n, win_n = networks["reference"], networks["winner"]
            tputs = run(cur, "winner")
            if not all(t > 0 for t in tputs):
                raise InfeasibleError(f"the winner {winner.name} has no plan on its own network")
            v = _value(tputs, ref_t)
            cum *= v / cur_v
            changed = {"network": [ref_n.name, win_n.name]} if ref_n != win_n else {}
            out.append(step(resource, v / cur_v, cum, changed, tputs, cur,
                            "" if changed else "the same in both chips", net="winner"))
            cur_t, cur_v = tputs, v
            continue
        out.append(step(resource, 1.0, cum, {}, cur_t, cur, note, net="winner"))
    return out


def _phy(net) -> tuple[float, float]:
    from phaze.hardware.chip_network import network_power_w, phy_area_mm2

    return float(phy_area_mm2(net)), float(network_power_w(net))


def _step(resource: str, speedup: float, cum: float, changed: dict, tputs: list[float], chip, note: str,
          phy: tuple[float, float] | None = None) -> dict:
    """One step's row; ``phy``: (area, power) of the network the chip is on, added to the chip's."""
    from phaze.hardware.area import area_mm2
    from phaze.hardware.power import peak_power_w

    a_net, p_net = phy or (0.0, 0.0)
    p = float(peak_power_w(chip)) + p_net
    return {"resource": resource, "speedup": float(speedup), "cumulative": float(cum),
            "changed": {k: [_plain(a), _plain(b)] for k, (a, b) in changed.items()},
            "seq_per_s": [float(t) for t in tputs], "area_mm2": float(area_mm2(chip)) + a_net,
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


def chips_throughput(model, chips: tuple[Accelerator, ...], spec, cluster) -> list[float | None]:
    """``chip_throughput`` of several chips in one worker task, in order: chips that differ only in HBM capacity
    (no layer time depends on it) then reuse the first one's layer schedules (``fixed_plan``'s per-process
    cache)."""
    return [chip_throughput(model, c, spec, cluster) for c in chips]


def submit_steps(spec, cluster, winner: Accelerator, references: dict[str, Accelerator], known: list[tuple] = (),
                 executor=None, networks: dict | None = None) -> dict:
    """Hand every chip ``wins_because`` will evaluate (each reference, its ``step_chips``, the winner on its own
    network) to ``executor`` at once, leaving out what ``known`` holds: {(model name, network, chip key): (future,
    position in its task's list)} ({} without an executor); chips that differ only in HBM capacity share a task
    (``chips_throughput``). A search submits them before its other explanation work, so the workers start at
    once; ``wins_because(..., jobs=...)`` collects them."""
    if executor is None:
        return {}
    clusters = _clusters(cluster, networks)
    memo = _known(spec, known, networks)
    wanted: dict = {}  # key -> (model, chip, network)
    for ref in references.values():
        for chip in [ref, *step_chips(ref, winner)]:
            for m in spec.models:
                wanted.setdefault((m.name, "reference", _chip_key(chip)), (m, chip, "reference"))
    if networks is not None:  # the network step: the winner's chip on its own network
        for m in spec.models:
            wanted.setdefault((m.name, "winner", _chip_key(winner)), (m, winner, "winner"))
    groups: dict = {}  # (model, network, chip but its HBM capacity) -> keys
    for key, (m, chip, which) in wanted.items():
        if key not in memo:
            design = tuple(kv for kv in _chip_key(chip) if kv[0] != "hbm_bytes")
            groups.setdefault((m.name, which, design), []).append(key)
    jobs = {}
    # the tasks of two chips first (the longest: a pool that takes the longest first ends its queue more evenly)
    for keys in sorted(groups.values(), key=lambda keys: -len(keys)):
        m, _, which = wanted[keys[0]]
        f = executor.submit(chips_throughput, m, tuple(wanted[k][1] for k in keys), spec, clusters[which])
        jobs.update({k: (f, i) for i, k in enumerate(keys)})
    return jobs


def _clusters(cluster, networks) -> dict:
    """{"reference": Cluster, "winner": Cluster}: ``cluster`` for both without networks, else each network's."""
    return {"reference": cluster, "winner": cluster} if networks is None else {k: v[1] for k, v in networks.items()}


def _on(which: str, networks) -> str:
    """The network a chip is scored on: ``which``, or "reference" without networks (every chip on one cluster)."""
    return which if networks is not None else "reference"


def _known(spec, known, networks) -> dict:
    """{(model name, network, chip key): throughput} of ``known`` (``wins_because``)."""
    return {(m.name, _on(k[2] if len(k) > 2 else "reference", networks), _chip_key(k[0])): float(t)
            for k in known for m, t in zip(spec.models, k[1]) if t > 0}


def wins_because(spec, cluster, winner: Accelerator, references: dict[str, Accelerator],
                 known: list[tuple] = (), executor=None, networks: dict | None = None,
                 jobs: dict | None = None) -> dict[str, list[dict]]:
    """{reference name: its steps to ``winner``} with the search's plan machinery (``fixed_chip_plan``: the
    search's plan space and runtime); each chip evaluated once, a reference with no plan for every model (or a
    winner without) left out. ``known``: (chip, per-model throughput[, "reference" or "winner": the network it
    was found on, default "reference"]) the search already found by the same machinery (the reference's best
    plan, the winner's), not searched again. ``executor``: the search's pool; the intermediate chips of every
    reference (``step_chips``) are evaluated on it at once (``submit_steps``; ``jobs``: what it already
    returned), otherwise one after another here with one schedule cache. ``networks``: {"reference":
    (ChipNetwork, Cluster), "winner": (ChipNetwork, Cluster)} when the chips have their own networks
    (``cluster`` then unused): every chip step on the reference's, the network step onto the winner's
    (``decompose``)."""
    from phaze.schedule import ScheduleCache
    from phaze.search.fixed_plan import fixed_chip_plan

    cache = ScheduleCache()
    clusters = _clusters(cluster, networks)

    def on(which: str) -> str:
        return _on(which, networks)

    memo = _known(spec, known, networks)
    if jobs is None:
        jobs = submit_steps(spec, cluster, winner, references, known, executor, networks)
    memo.update({key: t for key, (job, i) in jobs.items() if (t := job.result()[i]) is not None})

    def evaluate(model, chip, which: str = "reference") -> float:
        key = (model.name, on(which), _chip_key(chip))
        if key not in memo:
            memo[key] = fixed_chip_plan(model, chip, spec, clusters[on(which)],
                                        schedule_cache=cache).best.throughput_seq_per_s
        return memo[key]

    nets = None if networks is None else {k: v[0] for k, v in networks.items()}
    out = {}
    for name, ref in references.items():
        try:
            out[name] = decompose(ref, winner, spec.models, evaluate, nets)
        except InfeasibleError:  # no ratio to decompose
            continue
    return out
