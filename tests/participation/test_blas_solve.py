"""The float64 BLAS elimination modulo a prime against exact integer arithmetic and FLINT."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedprivacy.participation import modular
from fedprivacy.participation.blas_solve import MAX_PRIME, solve_mod_p
from fedprivacy.participation.exposure import analyse_exposure
from fedprivacy.participation.metrics import exposed_users

P = 1048573  # the exposure analysis's prime, just below MAX_PRIME


def exact_residual(m: np.ndarray, y: np.ndarray, b: np.ndarray, p: int) -> np.ndarray:
    """``(m y - b) mod p`` in Python integers (no float or int64 rounding)."""
    return np.asarray((m.astype(object) @ y.astype(object) - b.astype(object)) % p)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 70), block=st.integers(1, 32), seed=st.integers(0, 2**32 - 1))
def test_solutions_are_exact(n: int, block: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.integers(0, P, size=(n, n))
    b = rng.integers(0, P, size=(n, 2))
    y = solve_mod_p(m, b, P, block=block)
    if y is not None:  # a singular diagonal block (rare) is the caller's fallback
        assert not exact_residual(m, y, b, P).any()


def test_largest_values_stay_exact() -> None:
    """Every entry p - 1 in the dense part: the float64 sums at their largest."""
    n = 1100
    rng = np.random.default_rng(3)
    m = np.full((n, n), P - 1, dtype=np.int64)
    m[np.arange(n), np.arange(n)] = rng.integers(0, P, size=n)  # nonsingular, likely
    b = rng.integers(0, P, size=(n, 1))
    y = solve_mod_p(m, b, P)
    assert y is not None and not exact_residual(m, y, b, P).any()


def test_a_singular_block_is_none_and_the_caller_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = np.array([[0, 1], [1, 0]])  # the 1 x 1 leading block is singular; the matrix is not
    assert solve_mod_p(m, np.array([[1], [2]]), P, block=1) is None
    monkeypatch.setattr(modular, "BLAS_ROWS", 1)
    from scipy import sparse

    y = modular._solve(sparse.csr_array(m), np.array([[1], [2]]), P)
    assert y is not None and y.ravel().tolist() == [2, 1]


@pytest.mark.parametrize(("p", "block"), [(MAX_PRIME + 3, 8), (P, 0), (P, 513)])
def test_sizes_that_break_exactness_are_refused(p: int, block: int) -> None:
    with pytest.raises(ValueError, match="must lie"):
        solve_mod_p(np.eye(2), np.ones((2, 1)), p, block=block)


@pytest.mark.parametrize("density", [0.1, 0.3])
def test_the_exposure_analysis_through_the_blas_path(
    monkeypatch: pytest.MonkeyPatch, density: float
) -> None:
    """The preconditioner ``D Aᵀ`` and the BLAS solve give the exact exposed users."""
    monkeypatch.setattr(modular, "BLAS_ROWS", 2)
    rng = np.random.default_rng(int(density * 10))
    for _ in range(5):
        p = (rng.random((12, 30)) < density).astype(np.uint8)
        assert analyse_exposure(p).exposed.tolist() == exposed_users(p).tolist()
