"""GF(p) Brouwer-Zimmermann bounds: never above the true T_weak, tight where they should be."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedprivacy.linalg import exact_rank, pivot_rows
from fedprivacy.participation import min_distance
from fedprivacy.participation.min_distance import modular_lower_bound
from fedprivacy.participation.privacy import t_weak


def hyperplane_t_weak(p: np.ndarray) -> int:
    """Independent computation: users outside the largest hyperplane of the column matroid.

    A minimal support of a row-space vector is the complement of a hyperplane (a flat of rank
    ``r - 1``), and every hyperplane is spanned by ``r - 1`` of the columns.
    """
    rank = exact_rank(p)
    cols = p.shape[1]
    best = 0
    for subset in itertools.combinations(range(cols), rank - 1):
        if rank > 1 and exact_rank(p[:, list(subset)]) < rank - 1:
            continue
        flat = [c for c in range(cols) if exact_rank(p[:, [*subset, c]]) == rank - 1]
        best = max(best, len(flat))
    return int(cols - best)


def sparse_rounds(rng: np.random.Generator, rank: int, users: int, per_round: int) -> np.ndarray:
    """Random rounds of ``per_round`` users, kept to independent rows."""
    rows = np.zeros((rank, users), dtype=np.uint8)
    k = 0
    while k < rank:
        row = np.zeros(users, dtype=np.uint8)
        row[rng.choice(users, per_round, replace=False)] = 1
        rows[k] = row
        if exact_rank(rows[: k + 1]) == k + 1:
            k += 1
    return rows


def bound(p: np.ndarray, upper: int, max_level: int = 3) -> min_distance.ModularBound:
    basis = p[pivot_rows(p)].astype(np.int64)
    return modular_lower_bound(
        basis,
        np.ones(p.shape[1], dtype=np.int64),
        upper=lambda: upper,
        offer=lambda support: None,
        deadline=float("inf"),
        max_level=max_level,
    )


@pytest.mark.parametrize("seed", range(4))
def test_never_above_the_true_value(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(6):
        rank = int(rng.integers(2, 5))
        users = int(rng.integers(rank + 2, 15))
        p = sparse_rounds(rng, rank, users, int(rng.integers(2, users)))
        truth = hyperplane_t_weak(p)
        result = bound(p, upper=users + 1)
        assert result.lower <= truth, (p.tolist(), result)


def test_level_three_proves_the_round_size_with_four_information_sets() -> None:
    # 5 rounds of 6 users out of 24: four disjoint information sets, so the level-3 bound is
    # 4 x 4 = 16 >= 6 unless a lighter vector exists; the rounds themselves weigh 6
    rng = np.random.default_rng(11)
    p = sparse_rounds(rng, 5, 24, 6)
    truth = hyperplane_t_weak(p)
    result = bound(p, upper=int(p.sum(axis=1).min()))
    assert result.level >= 1 and result.prime is not None
    assert result.lower == truth


def test_a_small_prime_lowers_the_bound_but_never_past_the_truth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # over GF(3) a combination of these rounds vanishes on every user but one (found by brute
    # force over the 80 combinations); over the rationals the lightest vector has two users
    p = np.array(
        [[0, 1, 1, 0, 1, 1], [1, 0, 1, 0, 1, 1], [1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 1, 0]],
        dtype=np.uint8,
    )
    truth = hyperplane_t_weak(p)
    assert truth == 2
    monkeypatch.setattr(min_distance, "PRIMES", (3,))
    offered: list[np.ndarray] = []
    result = modular_lower_bound(
        p.astype(np.int64),
        np.ones(6, dtype=np.int64),
        upper=lambda: truth,
        offer=offered.append,
        deadline=float("inf"),
    )
    assert result.prime == 3
    assert result.lightest_modular == 1 and result.lower == 1  # not confirmed, bound lowered
    assert offered  # the light GF(3) codeword was sent for the exact check


def test_no_prime_with_the_rational_rank_gives_no_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(min_distance, "PRIMES", (2,))
    p = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=np.int64)  # rank 3, rank 2 mod 2
    result = modular_lower_bound(
        p, np.ones(3, np.int64), upper=lambda: 1, offer=lambda s: None, deadline=float("inf")
    )
    assert result.prime is None and result.lower == 0


def test_random_selection_in_the_formerly_open_region_is_exact() -> None:
    # 120 users, 12 per round, 30 independent rounds: the MILP alone ended in [4, 12] here
    rng = np.random.default_rng(2)
    p = sparse_rounds(rng, 30, 120, 12)
    result = t_weak(p, time_limit=30.0)
    assert result.exact and result.lower == 12
