"""Arithmetic modulo a prime on int64 arrays: exact where float64 would round."""

from __future__ import annotations

import numpy as np

from fedprivacy.linalg import cross3_mod, dot3_mod, inverse_mod, mulmod

P = 2_147_483_647  # the largest prime the minimum-distance search uses


def test_products_of_large_residues_are_exact() -> None:
    a = np.array([P - 1, P - 2, 123_456_789], dtype=np.int64)
    b = np.array([P - 1, 2, 987_654_321], dtype=np.int64)
    expected = [int(x) * int(y) % P for x, y in zip(a, b, strict=True)]
    assert mulmod(a, b, P).tolist() == expected


def test_inverses_and_the_cross_product_are_those_of_the_field() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(1, P, size=50)
    assert np.all(mulmod(x, inverse_mod(x, P), P) == 1)
    assert inverse_mod(np.array([0, P]), P).tolist() == [0, 0]
    a, b = rng.integers(0, P, size=(2, 20, 3))
    c = cross3_mod(a, b, P)
    assert np.all(dot3_mod(a, c, P) == 0) and np.all(dot3_mod(b, c, P) == 0)
