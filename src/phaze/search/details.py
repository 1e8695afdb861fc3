"""The winner of a search as a report draws it: its chip rebuilt from the stored design space and, per model,
its best plan evaluated again with the block's schedules (``phaze.placement.detail``).

A search store keeps each candidate's chip fields and its best plan (``plan_json``); the winner's chip is rebuilt
by enumerating the stored design space (so every chip constant is what the search used), and the plan is
evaluated again by ``phaze.placement.evaluate`` under the runtime it was found with. The report shows both
throughputs so a mismatch would be visible (the test suite checks they agree).
"""
from __future__ import annotations

from dataclasses import fields, replace

from phaze.errors import PhazeError
from phaze.hardware.accelerator import Accelerator
from phaze.placement.detail import PlanDetail, plan_detail
from phaze.placement.plan import Plan
from phaze.units import GiB


def model_from(d: dict):
    """A stored model description (``SearchSpec.fingerprint()``'s) as a ModelConfig."""
    from phaze.workload.config import ModelConfig
    known = {f.name for f in fields(ModelConfig)}
    return ModelConfig(**{k: v for k, v in d.items() if k in known})


def stored_candidates(spec: dict):
    """The candidate chips a stored search numbered: its design space (with its networks), less the chips over its
    power cap (``phaze.search.objective.search_candidates``, as ``run_search`` numbers them)."""
    from phaze.hardware.space import stored_design_space
    from phaze.search.objective import search_candidates

    return search_candidates(stored_design_space(spec["space"]), spec.get("tdp_w"), spec.get("objective", "throughput"))


def stored_cluster(spec: dict, chip: int | None = None, cands=None):
    """The cluster stored candidate ``chip`` was evaluated on: its network's (a space with a network axis), else
    the search's ``cluster``."""
    from phaze.hardware.chip_network import network_cluster
    from phaze.hardware.presets import get_cluster

    net = None
    if chip is not None:
        cands = cands if cands is not None else stored_candidates(spec)
        net = cands.network(int(chip))
    return get_cluster(spec["cluster"], spec["devices"]) if net is None else network_cluster(net, spec["devices"])


def winner_chip(spec: dict, row) -> Accelerator:
    """The stored candidate ``row`` (a ``ChipRow``) as the Accelerator the search evaluated (its HBM size set). Chip numbers
    index the candidates the search ran over (the power cap applied), as ``run_search`` numbers them."""
    cands = stored_candidates(spec)
    acc = cands.accelerator(int(row.chip), name=f"winner (chip {row.chip})")
    for f, v in row.chip_fields().items():
        if v is not None and getattr(acc, f) != v:
            raise PhazeError(f"store chip {row.chip} has {f}={v} but the stored space gives "
                             f"{getattr(acc, f)}; the store comes from another phaze version, rerun the search")
    return replace(acc, hbm_bytes=int(row.hbm_gib) * GiB)


def search_details(spec: dict, best) -> list[PlanDetail]:
    """Per model: the search winner's plan, evaluated again on the rebuilt chip under the runtime it was found
    with (empty when there is no winner)."""
    from phaze.search.spec import search_runtime

    if best is None:
        return []
    acc = winner_chip(spec, best)
    cluster = stored_cluster(spec, best.chip)
    # SearchSpec.runtime (a store without "plan_space" searched the paper's)
    runtime = search_runtime(spec.get("plan_space", "paper"), spec.get("optimizer", "adam"))
    out = []
    for m, o in zip(spec["models"], best.outcomes):
        if not o.plan_json:
            continue
        out.append(plan_detail(model_from(m), acc, cluster, spec["global_batch"],
                               Plan.from_dict(o.plan_json, runtime_default=runtime),
                               devices_given=spec["devices"], stored_seq_per_s=o.throughput_seq_per_s))
    return out
