"""What every selection takes, checked: the sizes ``(N, K, T)`` and the per-user vectors.

``validate_batch_parameters`` is the one check of batch partitioning's ``(N, K, T)`` (used by
every configuration with batches and by the selectors); :func:`check_available` and
:func:`check_frequency` check the round's availability and participation counts.

Examples
--------
>>> validate_batch_parameters(12, 4, 2)
(12, 4, 2)
>>> check_available([1, 0, 1], 3).tolist()
[True, False, True]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError

__all__ = ["check_available", "check_frequency", "check_sizes", "validate_batch_parameters"]


def validate_batch_parameters(
    num_users: object, per_round: object, target_privacy: object
) -> tuple[int, int, int]:
    """Check the batch-partitioning parameters ``(N, K, T)`` and return them as ints.

    Requires ``N >= 1``, ``1 <= K <= N``, ``1 <= T <= K``, ``K % T == 0`` and ``N % T == 0``.

    Raises
    ------
    ParameterError
        Naming the first parameter that violates a condition.

    """
    n, k = check_sizes(num_users, per_round)
    t = require_int("target_privacy", target_privacy, minimum=1)
    if t > k:
        raise ParameterError("target_privacy", f"must lie in [1, per_round] = [1, {k}], got {t}")
    if k % t:
        raise ParameterError(
            "target_privacy", f"must divide per_round = {k} (K/T must be an integer), got {t}"
        )
    if n % t:
        raise ParameterError(
            "target_privacy", f"must divide num_users = {n} (N/T must be an integer), got {t}"
        )
    return n, k, t


def check_sizes(num_users: object, per_round: object) -> tuple[int, int]:
    """``(N, K)`` as ints: ``N >= 1`` and ``1 <= K <= N``."""
    n = require_int("num_users", num_users, minimum=1)
    k = require_int("per_round", per_round, minimum=1)
    if k > n:
        raise ParameterError(
            "per_round",
            f"must lie in [1, num_users] = [1, {n}] (must not exceed num_users), got {k}",
        )
    return n, k


def _user_vector(name: str, value: ArrayLike, num_users: int) -> NDArray[Any]:
    arr = np.asarray(value)
    if arr.shape != (num_users,):
        raise ParameterError(
            name, f"must be a vector of length num_users = {num_users}, got shape {arr.shape}"
        )
    return arr


def check_available(available: ArrayLike, num_users: int) -> NDArray[np.bool_]:
    """``available`` as a boolean vector of ``num_users`` (0/1 accepted)."""
    arr = _user_vector("available", available, num_users)
    if arr.dtype != np.bool_:
        if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise ParameterError("available", f"must hold booleans or 0/1, got dtype {arr.dtype}")
        if not np.all((arr == 0) | (arr == 1)):
            raise ParameterError("available", "entries must be True/False or 0/1")
        arr = arr != 0
    return arr


def check_frequency(frequency: ArrayLike, num_users: int) -> NDArray[np.int64]:
    """``frequency`` as a numeric vector of ``num_users`` (how often each user was aggregated)."""
    arr = _user_vector("frequency", frequency, num_users)
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise ParameterError("frequency", f"must hold numbers, got dtype {arr.dtype}")
    return arr
