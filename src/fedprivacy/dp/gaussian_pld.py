"""The privacy-loss distribution of composed Gaussian mechanisms, in closed form.

A Gaussian mechanism of noise multiplier ``z`` (noise standard deviation over the L2
sensitivity) is ``mu``-GDP with ``mu = 1/z``, and Gaussian mechanisms compose exactly:
``z_1 .. z_k`` (each chosen before its round, on anything public) compose to ``mu`` with
``mu^2 = sum_i z_i^-2`` (Dong, Roth and Su 2019, Cor. 3.3; for adaptively chosen ``z_i``
under a bound on ``mu^2``, Smith and Thakurta 2022, fully adaptive composition). Its
privacy-loss distribution is ``N(mu^2/2, mu^2)``, which gives the exact privacy profile

    delta(eps) = Phi(mu/2 - eps/mu) - exp(eps) Phi(-mu/2 - eps/mu)

(Balle and Wang 2018, Thm. 8). :func:`gaussian_epsilon` inverts it: the smallest epsilon at a
delta, with no discretisation and no RDP conversion. It is what dp-accounting's
``PLDAccountant`` approximates from above on its grid, and at most the RDP bound.

Epsilon is exactly 0 when ``delta >= delta(0) = 2 Phi(mu/2) - 1``, the total variation
distance between the two output distributions (:func:`total_variation`): such a mechanism is
(0, delta)-DP, and no conversion underflows to it. Everything here is vectorised over ``mu``.

Examples
--------
>>> round(float(gaussian_epsilon(1 / 5.0, 1e-5)), 4)  # one release, z = 5
0.7255
>>> float(gaussian_epsilon(1 / 1e6 * 2**0.5, 1e-5))  # z = 1e6, twice: TV 5.6e-7 < delta
0.0
>>> round(float(mu_for_epsilon(1.0, 1e-5)), 4)
0.2681
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import log_ndtr, ndtr

from fedprivacy.dp._checks import require_delta, require_positive
from fedprivacy.errors import ParameterError

__all__ = ["gaussian_delta", "gaussian_epsilon", "mu_for_epsilon", "total_variation"]

#: Bisection steps: each halves the bracket, so 200 reach float64's resolution from 1e300.
_STEPS = 200


def _mu(mu: ArrayLike) -> NDArray[np.float64]:
    m = np.asarray(mu, dtype=np.float64)
    if np.any(~np.isfinite(m)) or np.any(m < 0):
        raise ParameterError("mu", "must be finite and >= 0 (mu = 1 / noise multiplier)")
    return m


def total_variation(mu: ArrayLike) -> NDArray[np.float64]:
    """``2 Phi(mu/2) - 1``: delta at epsilon 0, below which epsilon is positive.

    Examples
    --------
    >>> float(total_variation(0.0))
    0.0
    """
    return np.asarray(2.0 * ndtr(_mu(mu) / 2.0) - 1.0, dtype=np.float64)


def _log_delta(mu: NDArray[np.float64], eps: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log delta(eps)`` for ``mu > 0``, without cancellation (log-sum of the two terms)."""
    a = log_ndtr(mu / 2.0 - eps / mu)
    b = eps + log_ndtr(-mu / 2.0 - eps / mu)
    with np.errstate(divide="ignore"):
        return np.asarray(a + np.log(-np.expm1(np.minimum(b - a, 0.0))), dtype=np.float64)


def gaussian_delta(mu: ArrayLike, epsilon: ArrayLike) -> NDArray[np.float64]:
    """The exact delta of a ``mu``-GDP mechanism at ``epsilon`` (>= 0).

    Examples
    --------
    >>> d = gaussian_delta(0.2, gaussian_epsilon(0.2, 1e-5))
    >>> bool(abs(d - 1e-5) < 1e-9)
    True
    """
    m = _mu(mu)
    e = np.asarray(epsilon, dtype=np.float64)
    if np.any(~(e >= 0)):
        raise ParameterError("epsilon", "must be >= 0")
    m, e = np.broadcast_arrays(m, e)
    safe = np.where(m > 0, m, 1.0)
    return np.where(m > 0, np.exp(_log_delta(safe, e)), 0.0)


def gaussian_epsilon(mu: ArrayLike, delta: float) -> NDArray[np.float64]:
    """The smallest epsilon at which a ``mu``-GDP mechanism is (epsilon, delta)-DP.

    Parameters
    ----------
    mu : array_like of float
        ``(sum over the composed releases of z^-2) ** 0.5``, >= 0 (0: nothing released).
    delta : float
        In (0, 1).

    Returns
    -------
    ndarray of float64
        Shaped like ``mu``; rounded up to float64's resolution (never below the exact value).

    Examples
    --------
    >>> gaussian_epsilon([0.0, 0.5], 1e-5).round(4).tolist()
    [0.0, 1.9931]
    """
    m = _mu(mu)
    log_d = np.log(require_delta("delta", delta))
    positive = total_variation(m) > np.exp(log_d)
    safe = np.where(positive, m, 1.0)
    lo = np.zeros_like(safe)
    hi = safe**2 / 2.0 + safe * np.sqrt(-2.0 * log_d) + 1.0  # delta(hi) < delta (Gaussian tail)
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        above = _log_delta(safe, mid) > log_d
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    return np.where(positive, hi, 0.0)


def mu_for_epsilon(epsilon: float, delta: float) -> float:
    """The largest ``mu`` whose epsilon at ``delta`` is at most ``epsilon`` (> 0).

    A user may be in further releases while its ``sum z^-2`` stays at most this squared: the
    budget of a privacy filter (:mod:`fedprivacy.dp.budget`).

    Examples
    --------
    >>> mu = mu_for_epsilon(2.0, 1e-5)
    >>> bool(gaussian_epsilon(mu, 1e-5) <= 2.0 < gaussian_epsilon(mu * 1.0001, 1e-5))
    True
    """
    eps = np.float64(require_positive("epsilon", epsilon))
    d = require_delta("delta", delta)
    log_d = np.log(d)

    def within(mu: float) -> bool:  # delta grows with mu at a fixed epsilon
        return bool(_log_delta(np.array(mu), np.array(eps)) <= log_d)

    lo, hi = 0.0, 1.0
    while within(hi):
        lo, hi = hi, hi * 2.0
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if within(mid) else (lo, mid)
    while float(gaussian_epsilon(lo, d)) > eps:  # its rounding up
        lo *= 1.0 - 1e-12
    return lo
