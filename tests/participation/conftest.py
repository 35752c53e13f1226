"""Shared helpers of the participation tests: the brute-force ``T_weak`` reference."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import strategies as st

from fedprivacy.linalg import exact_rank


def brute_force_t_weak(p: np.ndarray) -> int | None:
    """Smallest set S of users whose removal drops the rank: a support of a row-space vector."""
    n = p.shape[1]
    rank = exact_rank(p)
    if rank == 0:
        return None
    for size in range(1, n + 1):
        for s in itertools.combinations(range(n), size):
            rest = [j for j in range(n) if j not in s]
            if exact_rank(p[:, rest]) < rank:
                return size
    raise AssertionError("unreachable: removing every column drops the rank")


@pytest.fixture(name="brute_force_t_weak", scope="session")
def _brute_force_t_weak() -> Callable[[np.ndarray], int | None]:
    """:func:`brute_force_t_weak`, for tests to take as a fixture."""
    return brute_force_t_weak


def batch_log(
    batches: int, size: int, per_round: int, rounds: int, seed: int, *, alone: int | None = None
) -> np.ndarray:
    """Rounds of ``per_round`` random whole batches of ``size`` users (Multi-RoundSecAgg's shape);
    with ``alone``, one more round aggregates batch ``alone`` by itself (its sum is exposed)."""
    rng = np.random.default_rng(seed)
    p = np.zeros((rounds + (alone is not None), batches * size), dtype=np.uint8)
    for r in range(rounds):
        for b in rng.choice(batches, per_round, replace=False).tolist():
            p[r, b * size : (b + 1) * size] = 1
    if alone is not None:
        p[rounds, alone * size : (alone + 1) * size] = 1
    return p


@st.composite
def small_logs(draw: st.DrawFn) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):  # batch-structured: whole batches of equal size
        size = draw(st.integers(1, 3))
        batches = draw(st.integers(2, max(2, 9 // size)))
        per_round = draw(st.integers(1, batches))
        rounds = draw(st.integers(1, 8))
        alone = draw(st.one_of(st.none(), st.integers(0, batches - 1)))
        return batch_log(batches, size, per_round, rounds, int(rng.integers(2**31)), alone=alone)
    rounds, users = draw(st.integers(1, 8)), draw(st.integers(1, 9))
    return (rng.random((rounds, users)) < draw(st.sampled_from([0.2, 0.5, 0.8]))).astype(np.uint8)


@pytest.fixture(name="batch_log", scope="session")
def _batch_log() -> Callable[..., np.ndarray]:
    """:func:`batch_log`, for tests to take as a fixture."""
    return batch_log


@pytest.fixture(name="small_logs", scope="session")
def _small_logs() -> st.SearchStrategy[np.ndarray]:
    """Random and batch-structured logs of at most 9 users and 9 rounds (hypothesis)."""
    return small_logs()
