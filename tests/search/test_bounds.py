"""The vectorized bottleneck bound equals brute force over every stage split."""
import itertools

import numpy as np
from hypothesis import given, settings, strategies as st

from phaze.search.bounds import min_bottleneck_s


@settings(max_examples=150, deadline=None)
@given(L=st.integers(1, 7), p=st.integers(1, 6), e=st.floats(0.01, 3), b=st.floats(0.01, 3), h=st.floats(0.01, 3))
def test_min_bottleneck_equals_brute_force(L, p, e, b, h):
    p = min(p, L + 2)
    got = float(min_bottleneck_s(np.array([e]), np.array([b]), np.array([h]), L, p)[0])
    if p == 1:
        brute = e + L * b + h
    else:
        brute = min(max(n[i] * b + (e if i == 0 else 0.0) + (h if i == p - 1 else 0.0) for i in range(p))
                    for n in itertools.product(range(L + 1), repeat=p) if sum(n) == L)
    assert got <= brute * (1 + 1e-9) and got >= brute * (1 - 1e-9)


def test_min_bottleneck_vectorized_matches_scalar():
    rng = np.random.default_rng(0)
    e, b, h = rng.uniform(0.01, 2, (3, 50))
    vec = min_bottleneck_s(e, b, h, 10, 4)
    one = [float(min_bottleneck_s(e[i:i + 1], b[i:i + 1], h[i:i + 1], 10, 4)[0]) for i in range(50)]
    assert np.allclose(vec, one, rtol=0, atol=0)


def test_plan_floor_hand_cases():
    """The one plan bound placement and search share, against values worked by hand."""
    from phaze.placement.bounds import plan_floor_s
    # 1F1B, no sync: sum T + (m - 1) max T + opt = 10 + 2*4 + 1
    assert plan_floor_s(10.0, 4.0, 1.0, 0.0, 3) == 19.0
    # a sync of 7 exposed beyond one backward: 10 + (3 - 2)*4 + 7 + 1 = 22 > 19
    assert plan_floor_s(10.0, 4.0, 1.0, 7.0, 3) == 22.0
    # m = 1: max(10 + 0*4 + 1, 7 + 1) = 11; with a sync of 20: 20 + 1 = 21
    assert plan_floor_s(10.0, 4.0, 1.0, 7.0, 1) == 11.0
    assert plan_floor_s(10.0, 4.0, 1.0, 20.0, 1) == 21.0
    # interleaved v = 2, m = 4: 10/2 + (4 - 0.5)*4 + 1 = 20; with sync 9: 5 + 2.5*4 + 9 + 1 = 25
    assert plan_floor_s(10.0, 4.0, 1.0, 0.0, 4, 2) == 20.0
    assert plan_floor_s(10.0, 4.0, 1.0, 9.0, 4, 2) == 25.0
    # arrays give the scalar answer element by element
    got = plan_floor_s(np.array([10.0, 10.0]), np.array([4.0, 5.0]), 1.0, 7.0, 3)
    assert got.tolist() == [22.0, 23.0]


def test_search_bound_is_placement_bound_with_tighter_max_stage():
    """search's per-chip bound is plan_floor_s row by row (max T >= max(S'/p, U*_p))."""
    from phaze.placement.bounds import plan_floor_s
    from phaze.search.bounds import _Row, iteration_lower_bound_s
    rows = [_Row(1, 8, 0.0, 0.5, None), _Row(2, 4, 0.2, 0.25, 3.0), _Row(4, 2, 0.6, 0.125, 1.0)]
    S = np.array([4.0, 8.0, 1.0])
    U = {1: S.copy(), 2: np.array([2.5, 3.0, 0.9]), 4: np.array([1.5, 2.0, 0.3])}
    got = iteration_lower_bound_s(rows, S, U)
    for j in range(3):
        want = min(plan_floor_s(S[j] + r.send_s, max((S[j] + r.send_s) / r.p, U[r.p][j]), r.opt_s,
                                r.sync_s or 0.0, r.m) for r in rows)
        assert got[j] == want
    # by hand, chip 0: p=1: 4 + 7*4 + 0.5 = 32.5; p=2: S'=4.2, M=2.5: max(4.2+3*2.5+.25, 4.2+2*2.5+3+.25) = 12.45;
    # p=4: S'=4.6, M=1.5: max(4.6+1.5+.125, 4.6+0+1+.125) = 6.225
    assert abs(got[0] - 6.225) < 1e-12


def test_min_bottleneck_closed_form_equals_binary_search():
    """The closed form with its rounding steps gives the binary search's answer bit for bit, on random
    times and on times at the breakpoints (e, h exact multiples of b, where float rounding decides)."""
    from phaze.search.bounds import _min_bottleneck_bisect_s
    rng = np.random.default_rng(1)
    n = 4000
    b = rng.uniform(1e-6, 1e-3, n)
    e = np.where(rng.random(n) < 0.5, rng.uniform(0, 0.05, n), rng.integers(0, 60, n) * b)
    h = np.where(rng.random(n) < 0.5, rng.uniform(0, 0.05, n), rng.integers(0, 60, n) * b)
    e[:50], h[50:100] = 0.0, 0.0
    for L in (1, 2, 7, 24, 96):
        for p in (1, 2, 3, 4, 8, 17, L + 2):
            got, want = min_bottleneck_s(e, b, h, L, p), _min_bottleneck_bisect_s(e, b, h, L, p)
            assert np.array_equal(got, want), (L, p, np.flatnonzero(got != want)[:5])
