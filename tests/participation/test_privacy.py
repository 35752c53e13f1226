"""T_weak: exact against brute force, witnesses verified, curves monotone and consistent."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.curve import t_weak_curve
from fedprivacy.participation.privacy import t_weak

BruteForce = Callable[[np.ndarray], int | None]


def random_matrix(
    rng: np.random.Generator, max_users: int = 10, max_rounds: int = 10
) -> np.ndarray:
    n = int(rng.integers(1, max_users + 1))
    t = int(rng.integers(1, max_rounds + 1))
    density = rng.uniform(0.1, 0.9)
    return (rng.random((t, n)) < density).astype(np.uint8)


def check_witness(p: np.ndarray, result) -> None:  # type: ignore[no-untyped-def]
    z = np.array(result.witness, dtype=object)
    assert z.shape == (p.shape[0],)
    combo = z @ p.astype(object)
    support = tuple(int(i) for i in np.flatnonzero(combo != 0))
    assert support == result.support
    assert len(support) == result.upper


@pytest.mark.parametrize("seed", range(6))
def test_matches_brute_force_on_small_matrices(seed: int, brute_force_t_weak: BruteForce) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        p = random_matrix(rng)
        expected = brute_force_t_weak(p)
        result = t_weak(p)
        if expected is None:
            assert result.lower is None and result.upper is None
            continue
        assert result.exact, (p.tolist(), result)
        assert result.lower == result.upper == expected, p.tolist()
        check_witness(p, result)
        assert result.official_upper is not None and result.official_upper >= result.upper


def test_batch_structured_small_matrices_match_brute_force(brute_force_t_weak: BruteForce) -> None:
    # rows are unions of batches of size 2 among 5 batches (N = 10): T_weak >= 2 always
    rng = np.random.default_rng(7)
    for _ in range(80):
        rows = (rng.random((int(rng.integers(1, 9)), 5)) < 0.5).astype(np.uint8)
        p = np.repeat(rows, 2, axis=1)
        expected = brute_force_t_weak(p)
        result = t_weak(p)
        assert result.lower == result.upper == expected
        if expected is not None:
            assert expected >= 2 and expected % 2 == 0


def test_paper_three_round_example_exposes_everyone() -> None:
    p = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    result = t_weak(p)
    assert (result.lower, result.upper) == (1, 1)
    check_witness(p, result)


def test_official_rref_bound_can_overestimate(brute_force_t_weak: BruteForce) -> None:
    # rref rows of this matrix all have support 3, but row1 - row2 has support 2
    p = np.array([[1, 1, 1, 0], [0, 1, 1, 1]])
    result = t_weak(p)
    assert result.upper == 2 and result.exact
    found = False
    rng = np.random.default_rng(3)
    for _ in range(300):
        q = random_matrix(rng, 8, 6)
        r = t_weak(q)
        if r.upper is not None and r.official_upper is not None and r.official_upper > r.upper:
            found = True
            assert r.upper == brute_force_t_weak(q)
            break
    assert found, "expected at least one small random matrix where rref overestimates"


def test_nothing_aggregated_is_infinite_privacy() -> None:
    result = t_weak(np.zeros((4, 5), dtype=np.uint8))
    assert result.lower is None and result.upper is None and result.witness == ()


def test_identical_columns_are_weighted() -> None:
    # users 0..2 always together, 3 alone but never separable from nothing: T = 1 via row diff
    p = np.array([[1, 1, 1, 1, 0], [1, 1, 1, 0, 0]])
    result = t_weak(p)
    assert (result.lower, result.upper) == (1, 1)
    assert result.support == (3,)


def test_curve_matches_prefix_evaluations_and_is_monotone(brute_force_t_weak: BruteForce) -> None:
    rng = np.random.default_rng(11)
    n, k = 10, 3
    rows = []
    for _ in range(14):
        r = np.zeros(n, np.uint8)
        r[rng.choice(n, k, replace=False)] = 1
        rows.append(r)
    p = np.array(rows)
    curve = t_weak_curve(p)
    assert curve.exact
    for t in range(p.shape[0]):
        assert curve.upper[t] == brute_force_t_weak(p[: t + 1])
    assert np.all(np.diff(curve.upper) <= 0)
    assert np.all(curve.official_upper >= curve.upper)


def test_curve_nan_before_first_aggregate() -> None:
    p = np.array([[0, 0, 0], [1, 1, 0], [0, 0, 0], [0, 1, 0]])
    curve = t_weak_curve(p)
    assert np.isnan(curve.lower[0]) and np.isnan(curve.upper[0])
    assert curve.upper[1] == 2 and curve.upper[3] == 1
    assert curve.change_rounds == [1, 3]


def test_interval_is_valid_when_time_runs_out() -> None:
    # a larger random matrix with a tiny budget: the interval must still contain the truth
    rng = np.random.default_rng(5)
    p = np.zeros((40, 60), np.uint8)
    for row in p:
        row[rng.choice(60, 6, replace=False)] = 1
    result = t_weak(p, time_limit=0.01)
    assert result.lower is not None and result.upper is not None
    assert 1 <= result.lower <= result.upper <= 6
    check_witness(p, result)


def test_bad_input() -> None:
    with pytest.raises(ParameterError, match="participation"):
        t_weak(np.array([[0, 2]]))
    with pytest.raises(ParameterError, match="participation"):
        t_weak(np.array([1, 0, 1]))
    with pytest.raises(ParameterError, match="time_limit"):
        t_weak(np.eye(3), time_limit=0)


def test_coloops_cost_one_exact_solve_not_one_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # 60 users, each alone in a round and all 60 in one more: every user is a coloop. Only a
    # candidate lighter than the best so far is solved exactly (before: one exact solve per
    # coloop, which took 528 s on 800 of them).
    from fedprivacy.participation import t_weak_search

    calls = []
    real = t_weak_search.left_null_vector
    monkeypatch.setattr(t_weak_search, "left_null_vector", lambda m: calls.append(1) or real(m))
    p = np.vstack([np.eye(60, dtype=np.uint8), np.ones((1, 60), dtype=np.uint8)])
    r = t_weak(p, time_limit=30)
    assert (r.lower, r.upper) == (1, 1)
    assert len(calls) <= 3


def test_dependent_set_tests_stop_at_the_deadline() -> None:
    from fedprivacy.participation import t_weak_search

    p = np.vstack([np.eye(6, dtype=np.uint8), np.ones((1, 6), dtype=np.uint8)])
    red = t_weak_search.reduce_ledger(p)
    search = t_weak_search.Search(red)
    assert t_weak_search._smallest_dependent_sets(red, search, 3, deadline=0.0) == 0
    assert search.upper is None  # nothing was solved after the deadline
