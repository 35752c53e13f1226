from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedprivacy.attacks import (
    ReconstructionResult,
    least_squares_reconstruction,
    simulate_aggregates,
)
from fedprivacy.errors import ParameterError
from fedprivacy.linalg import exact_rank

PAPER_EXAMPLE = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]])


def random_selection(rng: np.random.Generator, rounds: int, n: int, k: int) -> np.ndarray:
    p = np.zeros((rounds, n), dtype=np.uint8)
    for r in range(rounds):
        p[r, rng.choice(n, size=k, replace=False)] = 1
    return p


def batch_partition(rng: np.random.Generator, rounds: int, n: int, k: int, t: int) -> np.ndarray:
    """Rounds drawn uniformly from the batch-partitioning family (batches of consecutive users)."""
    family = list(itertools.combinations(range(n // t), k // t))
    p = np.zeros((rounds, n), dtype=np.uint8)
    for r, idx in enumerate(rng.integers(0, len(family), size=rounds)):
        for b in family[idx]:
            p[r, b * t : (b + 1) * t] = 1
    return p


def test_full_rank_random_selection_reconstructs_everything() -> None:
    rng = np.random.default_rng(0)
    p = random_selection(rng, 60, 20, 5)
    assert exact_rank(p) == 20
    x = rng.standard_normal((20, 50))
    res = least_squares_reconstruction(p, simulate_aggregates(p, x), x)
    assert isinstance(res, ReconstructionResult)
    assert res.estimates.shape == (20, 50)
    assert np.all(res.errors < 1e-10)
    assert res.mean_error < 1e-10
    assert res.identifiable.dtype == np.bool_
    assert res.identifiable.all()


def test_full_rank_equals_normal_equations_eq34() -> None:
    rng = np.random.default_rng(1)
    p = random_selection(rng, 40, 10, 3)
    x = rng.standard_normal((10, 4))
    agg = simulate_aggregates(p, x, noise_std=0.1, rng=2)
    pf = p.astype(float)
    expected = np.linalg.solve(pf.T @ pf, pf.T @ agg)
    res = least_squares_reconstruction(p, agg, x)
    np.testing.assert_allclose(res.estimates, expected, atol=1e-10)
    assert 0 < res.mean_error < 0.5


def test_batch_partition_gives_batch_mean() -> None:
    rng = np.random.default_rng(3)
    n, k, t, d = 20, 4, 2, 50
    p = batch_partition(rng, 60, n, k, t)
    # The batch sums are determined (10 batches, collapsed matrix of full column rank).
    assert exact_rank(p) == n // t
    x = rng.standard_normal((n, d))
    res = least_squares_reconstruction(p, simulate_aggregates(p, x), x)
    batch_mean = x.reshape(n // t, t, d).sum(axis=1) / t
    np.testing.assert_allclose(res.estimates, np.repeat(batch_mean, t, axis=0), atol=1e-10)
    assert not res.identifiable.any()
    # ||x_i - (x_i + x_j)/2||^2 / ||x_i||^2 = ||x_i - x_j||^2 / (4 ||x_i||^2), about 1/2.
    assert np.all(res.errors > 0.1)
    assert 0.35 < res.mean_error < 0.8
    expected = np.sum((x - np.repeat(batch_mean, t, axis=0)) ** 2, axis=1) / np.sum(x**2, axis=1)
    np.testing.assert_allclose(res.errors, expected, rtol=1e-8)


def test_min_norm_equal_share_with_larger_batches() -> None:
    rng = np.random.default_rng(4)
    n, k, t, d = 24, 8, 4, 3
    p = batch_partition(rng, 50, n, k, t)
    x = rng.standard_normal((n, d))
    res = least_squares_reconstruction(p, simulate_aggregates(p, x), x)
    shares = res.estimates.reshape(n // t, t, d)
    np.testing.assert_allclose(shares, np.broadcast_to(shares[:, :1], shares.shape), atol=1e-12)
    np.testing.assert_allclose(shares.sum(axis=1), x.reshape(n // t, t, d).sum(axis=1), atol=1e-10)


def test_paper_example() -> None:
    x = np.array([[1.0, -2.0], [3.0, 0.5], [-4.0, 2.0]])
    res = least_squares_reconstruction(PAPER_EXAMPLE, simulate_aggregates(PAPER_EXAMPLE, x), x)
    np.testing.assert_allclose(res.estimates, x, atol=1e-12)
    assert res.identifiable.tolist() == [True, True, True]
    batched = np.repeat(PAPER_EXAMPLE, 2, axis=1)
    x6 = np.arange(1.0, 13.0).reshape(6, 2)
    res6 = least_squares_reconstruction(batched, simulate_aggregates(batched, x6), x6)
    assert not res6.identifiable.any()
    np.testing.assert_allclose(res6.estimates[0], (x6[0] + x6[1]) / 2, atol=1e-12)


def test_partially_identifiable_and_zero_update() -> None:
    p = np.array([[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 1, 0]])
    x = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 0.0], [5.0, 5.0]])
    res = least_squares_reconstruction(p, simulate_aggregates(p, x), x)
    assert res.identifiable.tolist() == [False, False, True, False]
    np.testing.assert_allclose(res.estimates[:2], [[2.0, 0.0], [2.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(res.estimates[3], [0.0, 0.0], atol=1e-12)  # never aggregated
    assert np.isnan(res.errors[2])  # zero true update
    np.testing.assert_allclose(res.errors[[0, 1, 3]], [1.0, 1 / 9, 1.0])
    assert res.mean_error == pytest.approx((1.0 + 1 / 9 + 1.0) / 3)


def test_without_truth_errors_are_nan() -> None:
    res = least_squares_reconstruction(PAPER_EXAMPLE, np.ones((3, 2)))
    assert res.errors.shape == (3,)
    assert np.isnan(res.errors).all()
    assert np.isnan(res.mean_error)
    np.testing.assert_allclose(res.estimates, np.full((3, 2), 0.5))


def test_result_is_frozen() -> None:
    res = least_squares_reconstruction(PAPER_EXAMPLE, np.ones((3, 1)))
    with pytest.raises(AttributeError):
        res.errors = np.zeros(3)  # type: ignore[misc]


def test_simulate_aggregates_noise() -> None:
    p = np.ones((2000, 2), dtype=np.uint8)
    x = np.zeros((2, 3))
    clean = simulate_aggregates(p, x)
    assert clean.shape == (2000, 3) and not clean.any()
    noisy = simulate_aggregates(p, x, noise_std=2.0, rng=np.random.default_rng(0))
    assert noisy.std() == pytest.approx(2.0, rel=0.05)
    first = simulate_aggregates(p, x, 1.0, rng=5)
    np.testing.assert_array_equal(first, simulate_aggregates(p, x, 1.0, rng=5))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"aggregates": np.ones((2, 2))}, "aggregates"),  # wrong number of rounds
        ({"aggregates": np.ones(3)}, "aggregates"),  # not 2-D
        ({"aggregates": [[1.0], [np.nan], [1.0]]}, "aggregates"),
        ({"aggregates": [["a"], ["b"], ["c"]]}, "aggregates"),
        ({"true_updates": np.ones((3, 2))}, "true_updates"),  # wrong dimension d
        ({"true_updates": np.ones((2, 1))}, "true_updates"),  # wrong number of users
        ({"true_updates": np.ones(3)}, "true_updates"),
        ({"participation": [[1, 2, 0], [0, 1, 1], [1, 0, 1]]}, "participation"),
        ({"participation": np.zeros((0, 3))}, "participation"),
    ],
)
def test_reconstruction_validation(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {"participation": PAPER_EXAMPLE, "aggregates": np.ones((3, 1))}
    args.update(kwargs)
    with pytest.raises(ParameterError) as info:
        least_squares_reconstruction(**args)  # type: ignore[arg-type]
    assert info.value.name == name


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"updates": np.ones((2, 1))}, "updates"),
        ({"updates": np.ones(3)}, "updates"),
        ({"noise_std": -1.0}, "noise_std"),
        ({"noise_std": float("inf")}, "noise_std"),
        ({"noise_std": "1"}, "noise_std"),
        ({"participation": [[0.5, 1, 0]]}, "participation"),
    ],
)
def test_simulate_validation(kwargs: dict[str, object], name: str) -> None:
    args: dict[str, object] = {"participation": PAPER_EXAMPLE, "updates": np.ones((3, 1))}
    args.update(kwargs)
    with pytest.raises(ParameterError) as info:
        simulate_aggregates(**args)  # type: ignore[arg-type]
    assert info.value.name == name
