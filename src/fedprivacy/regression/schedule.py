"""Iteration count of Appendix C.2 and the learning-rate schedules of the NA-FGD algorithms."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_nonnegative, require_positive

__all__ = [
    "PAPER_ITERATION_CONSTANT",
    "PAPER_REAL_DATA_LR",
    "iteration_count",
    "learning_rates",
]

#: The constant ``c`` of ``T = c N^(3/4) / alpha`` used in Appendix C.2.
PAPER_ITERATION_CONSTANT = 0.25

#: The learning rate ``alpha`` of Appendix C.2 (the NIO application).
PAPER_REAL_DATA_LR = 0.01


def iteration_count(
    total_samples: int, lr: float = PAPER_REAL_DATA_LR, c: float = PAPER_ITERATION_CONSTANT
) -> int:
    """Number of iterations ``T = ceil(c N^(3/4) / alpha)`` of Appendix C.2.

    Theorem 3 needs ``alpha T / sqrt(N) -> infinity`` (the averaged estimator forgets its start)
    and ``alpha / n -> 0``; Appendix C.2 meets the first with ``T = c N^(3/4) / alpha`` and uses
    ``alpha = 0.01``, ``c = 0.25`` in the real-data application.

    Parameters
    ----------
    total_samples : int
        The total sample size ``N = sum_k n_k`` (>= 1).
    lr : float
        The (initial) learning rate ``alpha`` (> 0).
    c : float
        The constant ``c`` (> 0).

    Returns
    -------
    int
        ``T``, at least 1.

    Raises
    ------
    ParameterError
        If an argument is out of range.

    Examples
    --------
    >>> iteration_count(10_000)  # 0.25 * 10000**0.75 / 0.01
    25000
    """
    n = require_int("total_samples", total_samples, minimum=1)
    a = require_positive("lr", lr)
    cc = require_positive("c", c)
    # round before the ceiling so that exact products (such as 25000.000000000004) stay exact
    return max(1, int(math.ceil(round(cc * n**0.75 / a, 9))))


def learning_rates(steps: int, lr: float, gamma: float = 0.0) -> NDArray[np.float64]:
    """Learning rate of every iteration: ``alpha_t = alpha_0 t^(-gamma)``, ``t = 1 .. T``.

    ``gamma = 0`` is the constant rate of Theorems 1-3; ``gamma > 0`` the polynomial decay of
    Appendix B.3 (which uses ``alpha_0 = 1`` and ``gamma`` in {0.2, 0.5, 0.8}).

    Parameters
    ----------
    steps : int
        ``T`` (>= 1).
    lr : float
        ``alpha_0`` (> 0).
    gamma : float
        Decay exponent (>= 0).

    Returns
    -------
    ndarray of float64, shape (T,)
        ``alpha_1, ..., alpha_T``.

    Raises
    ------
    ParameterError
        If an argument is out of range.
    """
    t = require_int("steps", steps, minimum=1)
    a = require_positive("lr", lr)
    g = require_nonnegative("gamma", gamma)
    if g == 0.0:
        return np.full(t, a, dtype=np.float64)
    return a * np.arange(1, t + 1, dtype=np.float64) ** (-g)
