"""Explain a search's answer: each reported chip's on-chip hierarchy, GLB bandwidth, peak power, and per
model the average power of its best plan and what bounds its time (``phaze.placement.power``)."""
from __future__ import annotations

from phaze.hardware.accelerator import Accelerator


def chip_facts(acc: Accelerator) -> dict:
    """Hierarchy fields, GLB bandwidth (B/s; null when not modelled) and peak power (W) of one chip."""
    from phaze.cost.onchip import glb_supply_bytes_per_cycle
    from phaze.hardware.power import peak_power_w

    if not acc.has_hierarchy:
        return {"glb_banks": 0, "glb_bank_width_bytes": 0, "noc": acc.noc, "glb_bandwidth_Bps": None,
                "peak_power_w": None}
    a = acc.as_arrays()
    return {"glb_banks": acc.glb_banks, "glb_bank_width_bytes": acc.glb_bank_width_bytes,
            "tc_operand_bytes": acc.tc_operand_bytes, "tc_acc_bytes": acc.tc_acc_bytes, "noc": acc.noc,
            "noc_link_bytes": acc.noc_link_bytes, "input_staging": bool(acc.input_staging),
            "glb_bandwidth_Bps": float(glb_supply_bytes_per_cycle(a)[0] * acc.freq_hz),
            "peak_power_w": float(peak_power_w(acc))}


def outcome_facts(model, acc: Accelerator, plan_json: dict | None, cluster, global_batch: int, runtime) -> dict:
    """power_w, energy_j, bound and time_by_bound_s of one model's best plan on ``acc`` (empty if none), the
    plan under the runtime it was found with (its stored fields; ``runtime`` for fields a store lacks)."""
    if not plan_json:
        return {}
    from phaze.placement.evaluation import evaluate
    from phaze.placement.plan import Plan
    from phaze.placement.power import plan_power

    plan = Plan.from_dict(plan_json, runtime_default=runtime)
    ev = evaluate(plan, model, acc, cluster, global_batch)
    tier = cluster.tier_for_group(plan.tp) if plan.tp > 1 else None
    p = plan_power(model, acc, ev, tier)
    return {"power_w": p["power_w"], "energy_j": p["energy_j"], "glb_demand_Bps": p["glb_demand_Bps"],
            "bound_by": p["bound"],
            "time_by_bound_s": p["time_by_bound_s"]}


def enrich_row(row, acc: Accelerator, spec, cluster):
    """``row`` (a ``phaze.search.results.ChipRow``) explained: with chip_facts and, per outcome that has a plan of
    one of ``spec``'s models, outcome_facts; its power_w is the mean over the outcomes that have one."""
    from dataclasses import replace

    models = {m.name: m for m in spec.models}
    outs = []
    for o in row.outcomes:
        m = models.get(o.model)
        facts = outcome_facts(m, acc, o.plan_json, cluster, spec.global_batch, spec.runtime) if m else {}
        outs.append(replace(o, explained=True, **facts) if facts else o)
    pw = [o.power_w for o in outs if o.power_w is not None]
    return replace(row, outcomes=tuple(outs), explained=True, **chip_facts(acc),
                   power_w=sum(pw) / len(pw) if pw else None)
