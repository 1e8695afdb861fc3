"""Plain-number fixtures for placement tests: LayerCosts, clusters, and a brute-force optimizer."""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

from phaze.hardware.cluster import Cluster, NetworkTier
from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.layer_costs import LayerCost
from phaze.placement.plan import Plan
from phaze.placement.recompute import Recompute
from phaze.workload.runtime import PAPER_RUNTIME

# the runtime the old Plan defaults meant (standard attention, fp16, no DP overlap)
PLAN_RUNTIME = PAPER_RUNTIME.with_(dp_overlap=False)


def lc(fwd, bwd, params=0, act=0.0, bf=0.0, bb=0.0, working=0.0, tied=0, bytes_per_param=(2, 4, 12)):
    w, g, o = bytes_per_param
    return LayerCost(fwd_s=fwd, bwd_s=bwd, params=params, weight_bytes=w * params, grad_bytes=g * params,
                     optimizer_bytes=o * params, activation_bytes=act, boundary_fwd_bytes=bf,
                     boundary_bwd_bytes=bb, working_bytes=working, tied_params=tied)


def two_tier_cluster(n=64, fast=4, bw_fast=100e9, bw_slow=10e9, lat=1e-6):
    return Cluster("test", n, (NetworkTier("fast", fast, bw_fast, lat), NetworkTier("slow", n, bw_slow, lat)))


def compositions(L: int, p: int):
    """Block counts per stage: first/last >= 0, middle >= 1, summing to L."""
    if p == 1:
        yield (L,)
        return
    def rec(i, left):
        if i == p - 1:
            yield (left,)
            return
        low = 1 if i > 0 else 0
        need_after = p - 2 - i  # middle stages after this one need a block each
        for c in range(low, left - need_after + 1):
            for rest in rec(i + 1, left - c):
                yield (c,) + rest
    yield from rec(0, L)


def plan_of(blocks, **kw) -> Plan:
    kw.setdefault("runtime", PLAN_RUNTIME)
    ranges, pos = [], 0
    for i, b in enumerate(blocks):
        a = pos
        pos += b + (i == 0) + (i == len(blocks) - 1)
        ranges.append((a, pos))
    return Plan(tuple(ranges), **kw)


def brute_force(costs_by_setting, L, cluster, B, device: DeviceSpec, *, devices, interleave_values=(1,),
                zero=(False,), overlap=True):
    """min iteration time over every plan (every partition, every t/p/d/v/zero), evaluated by evaluate."""
    best = math.inf
    for s, c in costs_by_setting.items():
        for d, m, p, z in plan_shapes(s, L, B, devices, zero):
            kw = dict(tp=s.tp, dp=d, microbatch_size=s.microbatch_size, num_microbatches=m,
                      recompute=Recompute.uniform(s.recompute),
                      sequence_parallel=s.sequence_parallel, zero=z, runtime=PLAN_RUNTIME)
            plans = []
            for v in interleave_values:
                if v == 1:
                    plans += [plan_of(bl, **kw) for bl in compositions(L, p)]
                elif p >= 2 and L % (p * v) == 0 and m % p == 0:
                    plans.append(Plan.balanced(L, p, interleave=v, **kw))
            for plan in plans:
                ev = evaluate_costs(plan, c, cluster, B, device, num_blocks=L, overlap_dp=overlap)
                if ev.fits:
                    best = min(best, ev.iteration_time_s)
    return best


def plan_shapes(s, L, B, devices, zero):
    """Every (d, m, p, zero) of a setting: d divides B / mbs, p * t * d <= devices."""
    mbs, t = s.microbatch_size, s.tp
    if B % mbs:
        return
    for d in range(1, B // mbs + 1):
        if (B // mbs) % d or t * d > devices:
            continue
        for p in range(1, L + 3):
            if p * t * d > devices:
                break
            for z in zero:
                yield d, B // (mbs * d), p, z


def mode_vectors(modes, p: int):
    """Every per-stage recompute assignment (equal modes collapse to one, as the optimizer reports)."""
    for vec in itertools.product(modes, repeat=p):
        yield Recompute(vec)


def brute_force_mixed(costs_by_setting, L, cluster, B, device: DeviceSpec, *, devices, interleave_values=(1,),
                      zero=(False,), overlap=True):
    """min iteration time over every plan where each pipeline stage picks its own recompute mode among
    the settings that differ only in recompute (interleaved plans too), by evaluate."""
    groups: dict = {}
    for s, c in costs_by_setting.items():
        groups.setdefault(replace(s, recompute="none"), {})[s.recompute] = c
    best = math.inf
    for s, group in groups.items():
        for d, m, p, z in plan_shapes(s, L, B, devices, zero):
            kw = dict(tp=s.tp, dp=d, microbatch_size=s.microbatch_size, num_microbatches=m,
                      sequence_parallel=s.sequence_parallel, zero=z, runtime=PLAN_RUNTIME)
            plans = []
            for v in interleave_values:
                if v == 1:
                    plans += [plan_of(bl, recompute=rc, **kw) for bl in compositions(L, p)
                              for rc in mode_vectors(list(group), p)]
                elif p >= 2 and L % (p * v) == 0 and m % p == 0:
                    plans += [Plan.balanced(L, p, interleave=v, recompute=rc, **kw)
                              for rc in mode_vectors(list(group), p)]
            for plan in plans:
                ev = evaluate_costs(plan, group, cluster, B, device, num_blocks=L, overlap_dp=overlap)
                if ev.fits:
                    best = min(best, ev.iteration_time_s)
    return best
