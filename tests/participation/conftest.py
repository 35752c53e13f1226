"""Shared helpers of the participation tests: the brute-force ``T_weak`` reference."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest

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
