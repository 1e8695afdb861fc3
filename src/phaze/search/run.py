"""The co-search loop: vectorized bounds for every chip, then exact evaluation in bound order until no
remaining candidate can beat the incumbent (branch and bound; the answer equals brute force)."""
from __future__ import annotations

import concurrent.futures as cf
import time
from dataclasses import replace

import numpy as np

from phaze.errors import InfeasibleError
from phaze.hardware.presets import get_cluster
from phaze.progress import Progress
from phaze.search.bounds import model_bounds
from phaze.search.candidate_columns import NetworkCandidates
from phaze.search.branch import BranchAndBound, chip_fields
from phaze.search.exact import ChipResult, evaluate_chips
from phaze.search.fixed_plan import fixed_chip_plan
from phaze.search.objective import chip_weights, search_candidates
from phaze.search.results import AtHbm, ChipRow, ReferenceRow, SearchResult, chip_rows, reference_rows
from phaze.search.executor import abort, make_executor
from phaze.search.spec import SCHEDULE_TIME_LIMIT_S, SearchSpec
from phaze.search.store import Store
from phaze.units import GiB


def reference_cluster(spec: SearchSpec, cluster):
    """The cluster the references are scored on: their own network's (TPU v4's ICI, which both the TPUv4-like chip
    and the real TPU v4 have) when the space has a network axis (every candidate then has its own network), else
    the search's ``cluster``."""
    from phaze.hardware.chip_network import network_cluster

    net = spec.space.reference_network
    return cluster if net is None else network_cluster(net, spec.devices)


def candidate_clusters(spec: SearchSpec, cands) -> tuple:
    """Each network choice's cluster (``phaze.hardware.chip_network.network_cluster``; empty without an axis)."""
    from phaze.hardware.chip_network import network_cluster

    return tuple(network_cluster(n, spec.devices) for n in cands.networks)


def reference_at_hbm(spec: SearchSpec, cluster, refs: list[ReferenceRow], hbm_gib: float,
                     chip=None) -> list[ReferenceRow]:
    """``refs`` with, per model, the reference chip's (default: the space's TPUv4-like ``reference``) best plan at
    ``hbm_gib`` (``at_best_hbm``: hbm_gib, best_seq_per_s, best_plan; 0 and the reason when nothing fits) where
    that is not its own HBM size: the co-search sweeps HBM sizes outside the area budget, so a winner with more
    HBM than the reference is also compared with the reference given the same (the winner's gain at equal HBM)."""
    chip = chip or spec.space.reference
    if float(hbm_gib) == chip.hbm_bytes / GiB:
        return refs
    bigger = replace(chip, hbm_bytes=int(hbm_gib * GiB))
    out = []
    for m, ref in zip(spec.models, refs):
        try:
            res = fixed_chip_plan(m, bigger, spec, cluster)
            at = AtHbm(hbm_gib, res.best.throughput_seq_per_s, res.best.plan.describe())
        except InfeasibleError as err:
            at = AtHbm(hbm_gib, 0.0, f"none fits: {err}")
        out.append(replace(ref, at_best_hbm=at))
    return out


def references_at_sizes(spec: SearchSpec, cluster, chip=None) -> tuple[list[ReferenceRow], dict]:
    """``references`` and, per other HBM size of the search, the same chip's best plan there ({hbm GiB: [at_best_hbm
    dict per model]}, ``reference_at_hbm``), in one task: no layer time depends on the capacity, so the second
    part reuses the first's layer schedules in this process's cache. As a task of its own after the exact
    phase it scheduled them again on a worker that had not (the demo: about 1.7 s of both workers, against
    0.4 s each here)."""
    rows = references(spec, cluster, chip)
    own = (chip or spec.space.reference).hbm_bytes / GiB
    return rows, {float(g): [r.at_best_hbm.to_dict() for r in reference_at_hbm(spec, cluster, rows, g, chip)]
                  for g in spec.hbm_gib if float(g) != own}


def _at_sizes(refs: list[ReferenceRow], at_sizes: dict | None, hbm_gib: float) -> list[ReferenceRow] | None:
    """``refs`` at ``hbm_gib`` from a stored ``references_at_sizes`` result (None when it has no such size)."""
    found = (at_sizes or {}).get(str(float(hbm_gib)))
    if found is None or len(found) != len(refs):
        return None
    return [replace(r, at_best_hbm=AtHbm.from_dict(d, "stored reference at_best_hbm")) for r, d in zip(refs, found)]


def references(spec: SearchSpec, cluster, chip=None) -> list[ReferenceRow]:
    """A reference chip (default: the space's TPUv4-like chip; ``spec.space.real_reference`` is the second, the
    real TPU v4), its own 32 GiB HBM, under its best plan and under the paper's fixed plan. Its best plan comes
    from the same plan space and runtime as every candidate's (``spec.plan_space``, the paper's or the full
    one), so the scores compare like with like."""
    from phaze.placement.baseline_plans import paper_baseline
    from phaze.hardware.area import area_mm2

    out = []
    # the TPUv4-like chip of the space's template (with or without the hierarchy) unless another is given
    chip = chip or spec.space.reference
    for m in spec.models:
        from phaze.search.explain import chip_facts
        try:
            res = fixed_chip_plan(m, chip, spec, cluster)
            from phaze.placement.power import plan_power
            tier = cluster.tier_for_group(res.best.plan.tp) if res.best.plan.tp > 1 else None
            pw = plan_power(m, chip, res.best, tier)
            best = dict(best_seq_per_s=res.best.throughput_seq_per_s, best_plan=res.best.plan.describe(),
                        best_mfu=res.best.mfu, explained=True, power_w=pw["power_w"], bound_by=pw["bound"],
                        time_by_bound_s=pw["time_by_bound_s"], glb_demand_Bps=pw["glb_demand_Bps"])
        except InfeasibleError as err:
            best = dict(best_seq_per_s=0.0, best_plan=f"none fits: {err}", best_mfu=0.0)
        b = paper_baseline(m, chip, cluster, spec.global_batch, spec.paper_plan_runtime)
        ev = b.evaluation
        facts = chip_facts(chip)
        net = spec.space.reference_network
        if net is not None and facts.get("peak_power_w") is not None:  # its own network's PHY (TPU v4's ICI)
            from phaze.hardware.chip_network import network_power_w
            facts["peak_power_w"] += float(network_power_w(net))
        out.append(ReferenceRow(model=m.name, area_mm2=float(area_mm2(chip)) + spec.space.reference_phy_mm2, hbm_gib=chip.hbm_bytes / GiB,
                                chip_name=chip.name, **facts, **best,
                                paper_seq_per_s=ev.throughput_seq_per_s if b.fits else 0.0,
                                paper_plan=b.plan.describe() if b.plan is not None else b.reason,
                                paper_fits=b.fits, paper_reason=b.reason))
    return out


def pareto_front(rows: list[ChipRow]) -> list[ChipRow]:
    """Rows no smaller-or-equal-area row beats in score."""
    out, best = [], -np.inf
    for row in sorted(rows, key=lambda r: (r.area_mm2, -r.score, r.hbm_gib, r.chip)):
        if row.score > best:
            out.append(row)
            best = row.score
    return out


# Chips per worker call: a batch doubles (up to this) while every chip of the last batch back was ruled out
# (deep in the bound order chips take milliseconds each, less than a round trip to a loaded pool), and is one
# chip again as soon as a chip comes back exact (near the incumbent, where the exact plans are worth waiting
# for). 32 chips take ~0.2 s in one worker (OPT-350M's bounded chips, benchmarks/bench_reproduce.py).
MAX_BATCH = 32


def _explore(bb: BranchAndBound, store: Store, executor, prog: Progress, workers: int) -> None:
    """Evaluate chips in the order ``bb`` gives until none can matter; each batch's results are committed as
    it lands (one transaction per batch)."""
    pending: dict[cf.Future, list[int]] = {}
    batch = 1
    back = False  # a result came back: until then one chip at a time (it sets the incumbent the rest prune by)
    try:
        while True:
            while len(pending) < (max(2, 2 * workers) if back or bb.incumbent > 0 else 1):
                tasks = bb.next_tasks(store, batch)
                if not tasks:
                    break
                pending[executor.submit(evaluate_chips, tuple(tasks))] = [t.index for t in tasks]
            if not pending:
                return
            finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
            for f in sorted(finished, key=lambda f: pending[f][0]):
                chips = pending.pop(f)
                results = f.result()
                back = True
                bb.absorb_many(list(zip(chips, results)), store)
                ruled_out = all(r.status == "bounded" for rs in results for r in rs)
                batch = min(MAX_BATCH, 2 * batch) if ruled_out else 1
            prog.update(bb.resolved(), f"exact {bb.n_exact}, best {bb.incumbent:.4g}")
    except BaseException:
        for f in pending:
            f.cancel()
        raise


def _seed_from_joint(joint: dict, k: int, ref_seq_per_s: float, sub: Store, cands, weights, hbm_gib) -> None:
    """A joint "exact" result holds every model's exact best throughput on its chip (a model is only cut
    short when the chip falls below the incumbent, and then the result is "bounded"): record model k's as
    its own result (never overwriting what the model's store already holds)."""
    by_chip: dict[int, list[ChipResult]] = {}
    hbm_row = {g: h for h, g in enumerate(hbm_gib)}  # weights are [HBM size, chip]
    for r in joint.values():
        if r.status == "exact" and r.outcomes[k].throughput_seq_per_s > 0:
            o = r.outcomes[k]
            by_chip.setdefault(r.index, []).append(ChipResult(
                r.index, r.hbm_gib, "exact",
                o.throughput_seq_per_s / (ref_seq_per_s * weights[hbm_row[r.hbm_gib], r.index]), (o,), 0, 0))
    for c, results in sorted(by_chip.items()):
        sub.add(results, {c: chip_fields(cands, c)})


def run_search(spec: SearchSpec, store_path: str = "phaze-results.db", *, workers: int = 2, backend: str = "local",
               address: str | None = None, resume: bool = False, prune: bool = True, quiet: bool = False,
               namespace: str = "", executor=None,
               why: bool = True) -> SearchResult:
    """Search ``spec``; every finished chip is committed to ``store_path`` as it completes (under
    ``namespace`` when the file holds several searches, see ``Store.open``). ``executor``: a pool to use
    (and leave running; its owner stops it) instead of one of its own, so several searches share its
    workers' schedule caches. ``why``: also explain the winner (``wins_because``, ``tco``, ``fronts``; the
    reproduce table, which shows none of them, leaves it out)."""
    t0 = time.perf_counter()
    cluster = get_cluster(spec.cluster, spec.devices)  # every input checked before the store is created
    cands = search_candidates(spec.space, spec.tdp_w, spec.objective)
    clusters = candidate_clusters(spec, cands)
    net = None
    if clusters:
        from phaze.hardware.chip_network import fastest, network_cluster
        net = NetworkCandidates(cands.base, cands.chip_index, cands.network_index, clusters,
                                network_cluster(fastest(cands.networks), spec.devices))
    ref_cluster = reference_cluster(spec, cluster)
    weights = chip_weights(spec.objective, cands, spec.space.reference, spec.hbm_gib)
    for m in spec.models:
        spec.settings(m)
    own = executor is None
    if own:
        executor = make_executor(backend, workers, address)  # a missing Ray fails here, before the store exists
    try:
        store = Store.open(store_path, spec.fingerprint(), resume, namespace)
    except BaseException:
        if own:
            abort(executor)
        raise
    prog = Progress(quiet, prefix="phaze search")
    finished = False
    try:
        refs = store.get_meta("references")
        refs = None if refs is None else list(reference_rows(refs))
        real = spec.space.real_reference  # the second reference, the real TPU v4 (None: the paper's space)
        reals = store.get_meta("real_references") if real is not None else []
        reals = None if reals is None else list(reference_rows(reals))
        refs_job = reals_job = None
        if refs is None:  # on a worker while the others bound the chips (its exact layer schedules take seconds)
            prog.note("evaluating the TPUv4-like reference chip (on a worker, alongside the bounds)")
            refs_job = executor.submit(references_at_sizes, spec, ref_cluster)
        if reals is None:
            prog.note("evaluating the TPU v4 reference chip (on a worker, alongside the bounds)")
            reals_job = executor.submit(references_at_sizes, spec, ref_cluster, real)
        total = len(cands) * len(spec.hbm_gib)
        per_model = []
        bounds = []
        for m in spec.models:
            prog.note(f"bounding {m.name} on {len(cands)} chips (vectorized; settings over {workers} "
                      f"worker{'s' if workers > 1 else ''})")
            prog.stage(f"bounding {m.name}", len(spec.settings(m)), "settings")
            bounds.append(model_bounds(m, spec, cands.arch if net is None else None, cluster, executor, prog.advance,
                                       net))
        prog.done()
        for key, job in (("references", refs_job), ("real_references", reals_job)):
            if job is not None:
                found, at_sizes = job.result()
                store.put_meta(f"{key}_at_sizes", {str(g): v for g, v in at_sizes.items()})
                store.put_meta(key, [r.to_dict() for r in found])
                if key == "references":
                    refs = found
                else:
                    reals = found
        ref_tput = [r.best_seq_per_s or 1.0 for r in refs]
        bb = BranchAndBound(spec, cands, bounds, ref_tput, cluster, store.load(), prune, SCHEDULE_TIME_LIMIT_S,
                            weights, clusters)
        prog.note(f"exact evaluation in bound order ({workers} worker{'s' if workers > 1 else ''}); candidates "
                  f"the bounds rule out are counted as they go")
        prog.stage("exact evaluation", total, "candidates")
        prog.update(bb.resolved())
        _explore(bb, store, executor, prog, workers)
        counts = bb.counts()
        prog.done(f"{counts['exact']} exact, {counts['bounded']} bounded, {counts['pruned']} pruned")
        if len(spec.models) > 1:
            joint = store.load()
            counts["per_model"] = {}
            for k, (m, b) in enumerate(zip(spec.models, bounds)):
                sub = store.scoped(k)
                _seed_from_joint(joint, k, ref_tput[k], sub, cands, weights, spec.hbm_gib)
                bb_k = BranchAndBound(replace(spec, models=(m,)), cands, [b], [ref_tput[k]], cluster, sub.load(),
                                      prune, SCHEDULE_TIME_LIMIT_S, weights, clusters)
                prog.note(f"best chip for {m.name} alone (the same exact search; joint results reused)")
                prog.stage(f"{m.name} alone", total, "candidates")
                prog.update(bb_k.resolved())
                _explore(bb_k, sub, executor, prog, workers)
                prog.done()
                counts["per_model"][m.name] = bb_k.counts()
                top = sub.rows(top=1)
                if top:
                    per_model.append(replace(ChipRow.from_dict(top[0]), model=m.name))
        rows = list(chip_rows(store.rows(status="exact")))
        front = pareto_front(rows)
        if rows:
            t_explain = time.perf_counter()
            g = rows[0].hbm_gib
            at_hbm = {}  # both references at the winner's HBM: found with the references, else on the workers
            for key, chip, ref_rows, name in (("references", spec.space.reference, refs, "TPUv4-like"),
                                              ("real_references", real, reals, "TPU v4")):
                if chip is None or g == chip.hbm_bytes / GiB or all(
                        (r.at_best_hbm.hbm_gib if r.at_best_hbm else None) == g for r in ref_rows):
                    continue
                done = _at_sizes(ref_rows, store.get_meta(f"{key}_at_sizes"), g)
                if done is None:  # a store from before the references' other sizes were kept
                    prog.note(f"the {name} reference at the best chip's HBM ({g} GiB), on a worker")
                    at_hbm[key] = executor.submit(reference_at_hbm, spec, ref_cluster, ref_rows, g, chip)
                else:
                    at_hbm[key] = cf.Future()
                    at_hbm[key].set_result(done)
            why_jobs = {}
            if why:  # the decomposition's chips go to the workers now, behind the references at the winner's HBM
                prog.note("why the winner wins: the reference chip changed into it one resource at a time, each "
                          "chip's best plan searched again (on the workers); TCO and the Pareto fronts")
                why_jobs = _why(rows, refs, reals, spec, cands, cluster, ref_cluster, executor, submit_only=True)
            prog.note("explaining the answer: power and what bounds each reported chip's time")
            rows[0] = _explain(rows[0], spec, cands, cluster)
            front = [rows[0] if (r.chip, r.hbm_gib) == (rows[0].chip, rows[0].hbm_gib)
                     else _explain(r, spec, cands, cluster) for r in front]
            per_model = [_explain(r, replace(spec, models=tuple(m for m in spec.models if m.name == r.model)),
                                  cands, cluster) for r in per_model]
            store.put_meta("explained", {"best": rows[0].to_dict(), "pareto": [r.to_dict() for r in front],
                                         "per_model": [r.to_dict() for r in per_model]})
            for key, job in at_hbm.items():
                done = job.result()
                store.put_meta(key, [r.to_dict() for r in done])
                if key == "references":
                    refs = done
                else:
                    reals = done
            explained_why = {}
            if why:
                explained_why = _why(rows, refs, reals, spec, cands, cluster, ref_cluster, executor, jobs=why_jobs)
                for k, v in explained_why.items():
                    store.put_meta(k, v)
            prog.note(f"explained in {time.perf_counter() - t_explain:.1f} s")
        if own:
            executor.shutdown(wait=True)
        finished = True
    finally:
        if not finished and own:  # an error, Ctrl-C or SIGTERM: stop the workers now (finished chips are committed)
            abort(executor)
        prog.close()
        store.close()
    nets = {"network": cands.network(rows[0].chip).to_dict() if rows and clusters else None,
            "reference_network": spec.space.reference_network.to_dict() if clusters else None}
    return SearchResult(store_path, spec.fingerprint(), counts, rows[0] if rows else None, tuple(refs),
                        tuple(front), time.perf_counter() - t0, tuple(per_model), real_references=tuple(reals),
                        **(explained_why if rows else {}), **nets)


def own_cluster(spec: SearchSpec, cands, chip: int, cluster):
    """Candidate ``chip``'s cluster: its network's, or the search's ``cluster`` without a network axis."""
    from phaze.hardware.chip_network import network_cluster

    net = cands.network(int(chip))
    return cluster if net is None else network_cluster(net, spec.devices)


def _explain(row: ChipRow, spec: SearchSpec, cands, cluster) -> ChipRow:
    from phaze.search.explain import enrich_row

    acc = replace(cands.accelerator(int(row.chip)), hbm_bytes=int(row.hbm_gib) * GiB, name=f"cand{row.chip}")
    out = enrich_row(row, acc, spec, own_cluster(spec, cands, row.chip, cluster))
    net = cands.network(int(row.chip))
    if net is not None and out.peak_power_w is not None:  # the chip's peak with its network's PHY
        from phaze.hardware.chip_network import network_power_w
        out = replace(out, peak_power_w=out.peak_power_w + float(network_power_w(net)))
    return out


def _why(rows: list[ChipRow], refs, reals, spec: SearchSpec, cands, cluster, ref_cluster, executor=None, *,
         submit_only: bool = False, jobs: dict | None = None) -> dict:
    """wins_because, tco and fronts of a finished search (``phaze.search.why``, ``phaze.search.fronts``);
    ``executor``: the search's pool, for the decomposition's chips; ``ref_cluster``: the references' network's
    (``reference_cluster``). ``submit_only``: only hand the decomposition's chips to ``executor`` and return
    their jobs (``why.submit_steps``), which a later call takes as ``jobs``."""
    from phaze.search.fronts import fronts, point_rows, tco_table
    from phaze.search.why import submit_steps, wins_because

    best = rows[0]
    acc = replace(cands.accelerator(int(best.chip)), hbm_bytes=int(best.hbm_gib) * GiB,
                  name=f"winner (chip {best.chip})")
    ref_accs = {spec.space.reference.name: spec.space.reference}
    real = spec.space.real_reference
    win_net, ref_net = cands.network(int(best.chip)), spec.space.reference_network
    networks = None if win_net is None else {"reference": (ref_net, ref_cluster),
                                             "winner": (win_net, own_cluster(spec, cands, best.chip, cluster))}
    # the search's own throughputs of each reference (its best plan at its own HBM, on the references' network)
    # and of the winner (on its own network)
    known = [(spec.space.reference, [r.best_seq_per_s for r in refs], "reference"),
             (acc, [o.throughput_seq_per_s for o in best.outcomes], "winner")]
    if real is not None and reals:
        ref_accs[real.name] = real
        known.append((real, [r.best_seq_per_s for r in reals], "reference"))
    if submit_only:
        return submit_steps(spec, cluster, acc, ref_accs, known, executor, networks)
    why = wins_because(spec, cluster, acc, ref_accs, known, executor, networks, jobs)
    nets = None if win_net is None else {"winner": win_net, **{name: ref_net for name in ref_accs}}
    return {"wins_because": why, "tco": tco_table(best, acc, [*refs, *(reals or [])], ref_accs, nets),
            "fronts": fronts(point_rows(rows, refs, cands))}
