"""profiles.vector: the sum of products that replaces np.dot in the profile's statistics."""

from __future__ import annotations

import math

import numpy as np

from profiles.vector import dot


def test_dot_is_the_exact_sum_of_products_where_floats_hold_it() -> None:
    # Integers below 2^20 squared and summed over 3e5 values stay below 2^53: every partial
    # sum is exact, so any summation order gives the true value.
    rng = np.random.default_rng(1)
    a = rng.integers(0, 1 << 20, size=300_000)
    b = rng.integers(0, 1 << 10, size=300_000)
    want = sum(int(x) * int(y) for x, y in zip(a.tolist(), b.tolist(), strict=True))
    assert dot(a.astype(np.float64), b.astype(np.float64)) == float(want)
    assert dot(a, b) == float(want)  # integer arrays too


def test_dot_of_long_float_vectors_matches_a_correctly_rounded_sum() -> None:
    gaps = np.random.default_rng(2).exponential(0.01, size=500_000)
    exact = math.fsum((gaps * gaps).tolist())  # each square rounded once, then summed exactly
    assert math.isclose(dot(gaps, gaps), exact, rel_tol=1e-12)
    assert dot(gaps[:0], gaps[:0]) == 0.0
