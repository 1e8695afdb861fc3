"""Stashed activations under Megatron's interleaved schedule, chunk by chunk.

``interleaved_peak_activation_bytes`` is a closed form (prefix sums) of the running sum; these tests check it
against hand-worked schedules, against a replay of the schedule that tracks every (chunk, microbatch) it holds,
against the uniform-chunk count ``in_flight_microbatches``, and through ``evaluate``.
"""
from __future__ import annotations

import random

import pytest
from helpers import lc
from helpers import PLAN_RUNTIME

from phaze.placement import Plan
from phaze.placement import stage as st
from phaze.placement.evaluation import DeviceSpec, evaluate_costs
from phaze.placement.layer_costs import LayerCosts
from phaze.hardware.cluster import Cluster, NetworkTier

FLAT = Cluster("flat", 64, (NetworkTier("flat", 64, 1e9, 0.0),))


def replay_peak(stage: int, p: int, m: int, chunk_bytes: list[float]) -> float:
    """The schedule played op by op with explicit microbatch ids (Megatron-Core r0.10+,
    forward_backward_pipelining_with_interleaving): forward k runs chunk (k mod pv) // p on microbatch
    (k // pv) * p + k mod p; backward k the mirrored chunk v-1-(k mod pv)//p on the same microbatch; the
    warmup forwards, then forward/backward pairs, then the remaining backwards. Every backward must free a
    (chunk, microbatch) a forward stashed."""
    v = len(chunk_bytes)
    n = m * v
    warm = min((p - stage - 1) * 2 + (v - 1) * p, n)

    def fwd(k):
        return (k % (p * v)) // p, (k // (p * v)) * p + k % p

    def bwd(k):
        c, mb = fwd(k)
        return v - 1 - c, mb

    live: set[tuple[int, int]] = set()
    peak = 0.0

    def add(key):
        nonlocal peak
        assert key not in live
        live.add(key)
        peak = max(peak, sum(chunk_bytes[c] for c, _ in live))

    def free(key):
        assert key in live, f"backward of {key} before its forward"
        live.remove(key)

    for k in range(warm):
        add(fwd(k))
    for j in range(n - warm):
        add(fwd(warm + j))
        free(bwd(j))
    for j in range(n - warm, n):
        free(bwd(j))
    assert not live
    return peak


def test_hand_worked_two_stages():
    # p=2, v=2, m=4, chunk 0 stashes 1 and chunk 1 (say the LM head's logits) 10 per microbatch.
    # Last stage (warmup 2): F c0, F c0 | F c1 (12) B c1 | F c1 (12) B c1 | F c0 (3) B c0 | ... -> 12.
    # First stage (warmup 4): c0 c0 c1 c1 (22) | F c0 (23) B c1 | F c0 (14) B c1 | F c1 (14) B c0 | F c1 (23) -> 23.
    assert st.interleaved_peak_activation_bytes(1, 2, 4, [1.0, 10.0]) == 12.0
    assert st.interleaved_peak_activation_bytes(0, 2, 4, [1.0, 10.0]) == 23.0
    # the uniform-chunk count would charge (warmup + 1) / v x 11: 16.5 and 27.5
    assert st.in_flight_microbatches(1, 2, 4, 2) * 11 == 16.5
    assert st.in_flight_microbatches(0, 2, 4, 2) * 11 == 27.5


def test_matches_replay_of_the_schedule():
    rng = random.Random(7)
    for _ in range(300):
        p = rng.randint(2, 6)
        v = rng.randint(2, 5)
        m = p * rng.randint(1, 4)
        a = [float(rng.randint(0, 50)) for _ in range(v)]
        i = rng.randrange(p)
        assert st.interleaved_peak_activation_bytes(i, p, m, a) == replay_peak(i, p, m, a), (i, p, m, a)


@pytest.mark.parametrize("p,m,v", [(4, 8, 2), (4, 16, 3), (8, 16, 12), (3, 9, 4)])
def test_alike_chunks_give_the_in_flight_count(p, m, v):
    for i in range(p):
        peak = st.interleaved_peak_activation_bytes(i, p, m, [5.0] * v)
        assert peak == pytest.approx(st.in_flight_microbatches(i, p, m, v) * 5.0 * v)


def test_m_equal_p_first_stage_runs_every_forward_first():
    # p = 4, v = 3, m = 4, chunks stashing 1, 2, 3 per microbatch. Stage 0's warmup, 6 + 8 = 14 forwards, covers
    # all 12: it stashes everything, 4 x 6. The last stage's warmup is 8 (chunks 0 and 1 for microbatches 0-3:
    # 4 + 8), then each step adds a chunk-2 forward (15) and frees it: 15 = 4 x 1 + 4 x 2 + 1 x 3.
    assert st.in_flight_microbatches(0, 4, 4, 3) == 4.0
    assert st.interleaved_peak_activation_bytes(0, 4, 4, [1.0, 2.0, 3.0]) == 24.0
    assert st.in_flight_microbatches(3, 4, 4, 3) == 3.0
    assert st.interleaved_peak_activation_bytes(3, 4, 4, [1.0, 2.0, 3.0]) == 15.0


def test_evaluate_charges_the_head_chunk_once_on_the_last_stage():
    # 8 blocks, p=2, v=2: the last stage's second chunk holds the head, whose activations dwarf a block's
    E = lc(1.0, 2.0, params=100, act=10)
    B = lc(1.0, 2.0, params=100, act=100)
    H = lc(1.0, 2.0, params=100, act=10_000)
    c = LayerCosts(E, B, H)
    dev = DeviceSpec(hbm_bytes=1e18, hbm_Bps=1e12, peak_matrix_flops=1e15)
    plan = Plan.balanced(8, 2, 1, 1, 1, 4, interleave=2, runtime=PLAN_RUNTIME)
    ev = evaluate_costs(plan, c, FLAT, 4, dev, num_blocks=8)
    chunks = [[float(st.stage_sums(c, *_counts(r)).activation_bytes) for r in plan.chunks_of(i)] for i in range(2)]
    assert chunks[1][1] == 2 * 100 + 10_000  # blocks 7-8 and the head
    for i, s in enumerate(ev.stages):
        assert s.activation_bytes == st.interleaved_peak_activation_bytes(i, 2, 4, chunks[i])
    # the last stage holds its head chunk for one microbatch at a time, so less than the averaged count
    last = ev.stages[1]
    assert last.activation_bytes < st.in_flight_microbatches(1, 2, 4, 2) * sum(chunks[1])
    assert last.activation_bytes == 2 * chunks[1][0] + chunks[1][1]


def _counts(r):
    a, b = r
    n_layers = 10  # embedding, 8 blocks, head
    e = int(a == 0)
    h = int(b == n_layers)
    return e, b - a - e - h, h
