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
