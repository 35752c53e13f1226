"""RDP accounting and calibration of the Gaussian and Laplace releases of the regression estimators.

Gaussian releases (NA-FGD, DP-SGD, NbAFL's uplink)
    :func:`gaussian_epsilon` is the DP core's RDP accountant (:mod:`fedprivacy.dp.accounting`):
    :func:`~fedprivacy.dp.accounting.epsilon_for` at sampling rate 1, and the Poisson-sub-sampled
    Gaussian on the orders :data:`SUBSAMPLED_ORDERS` otherwise. The ``accountant`` calibration of
    a Gaussian multiplier is :func:`fedprivacy.dp.calibration.noise_multiplier_for`.

Laplace releases (Appendix B.2)
    The RDP of the Laplace mechanism (Mironov 2017, Prop. 6; the RDP of a p-dimensional Laplace
    mechanism with L1-bounded shift is at most the one-dimensional value, because the
    per-coordinate RDP is a convex function of the shift that vanishes at 0), composed over ``T``
    iterations and converted by the DP core's :func:`~fedprivacy.dp.rdp.rdp_to_epsilon`;
    :func:`laplace_noise_multiplier_for` solves for the smallest multiplier that meets a target.

Every epsilon and multiplier here is memoised per process (the simulations ask for the same ones
for every replication and setting).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_budget, require_positive
from fedprivacy.dp.accounting import PrivacyAccountant, epsilon_for, quiet_accounting
from fedprivacy.dp.calibration import noise_multiplier_for
from fedprivacy.dp.rdp import DEFAULT_ORDERS, rdp_to_epsilon
from fedprivacy.errors import ParameterError

__all__ = [
    "SUBSAMPLED_ORDERS",
    "gaussian_epsilon",
    "laplace_epsilon",
    "laplace_noise_multiplier_for",
    "laplace_rdp",
]

#: RDP orders for sub-sampled Gaussian accounting (DP-SGD): 63 of the DP core's DEFAULT_ORDERS.
#: The sub-sampled RDP costs about 10 ms per order, so the full 485-order grid would cost seconds
#: per (noise, rate) pair; this subset gives epsilons at most a few percent above the full grid's.
SUBSAMPLED_ORDERS: Final = tuple(
    [1.1 + 0.1 * i for i in range(9)]
    + [2.0 + 0.5 * i for i in range(13)]
    + [float(v) for v in range(9, 33)]
    + [float(v) for v in range(36, 65, 4)]
    + [80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 256.0, 512.0, 1024.0]
)


@functools.lru_cache(maxsize=1024)
def gaussian_epsilon(
    noise_multiplier: float, steps: int, delta: float, sampling_rate: float = 1.0
) -> float:
    """RDP-accountant epsilon of ``steps`` (sub-sampled) Gaussian releases (cached).

    :func:`fedprivacy.dp.accounting.epsilon_for` for sampling rate 1; with sub-sampling the DP
    core's accountant on the orders :data:`SUBSAMPLED_ORDERS`.
    """
    if sampling_rate == 1.0:
        return float(epsilon_for(noise_multiplier, steps, delta))
    acc = PrivacyAccountant("rdp", SUBSAMPLED_ORDERS)
    with quiet_accounting():
        return float(acc.compose_gaussian(noise_multiplier, steps, sampling_rate).epsilon(delta))


@functools.lru_cache(maxsize=256)
def gaussian_multiplier(epsilon: float, delta: float, steps: int, rate: float) -> float:
    if rate == 1.0:
        return float(noise_multiplier_for(epsilon, delta, steps, lower=1e-3, upper=1e7))
    with quiet_accounting():
        return float(
            noise_multiplier_for(
                epsilon,
                delta,
                steps,
                rate,
                orders=SUBSAMPLED_ORDERS,
                lower=1e-2,
                upper=1e3,
                rtol=1e-3,
            )
        )


def laplace_rdp(noise_multiplier: float, orders: ArrayLike | None = None) -> NDArray[np.float64]:
    """RDP of one Laplace release with scale ``b = noise_multiplier * sensitivity``.

    Mironov (2017), Proposition 6: for ``alpha > 1``,
    ``eps(alpha) = log(alpha/(2 alpha - 1) e^{(alpha-1)/z} + (alpha-1)/(2 alpha-1) e^{-alpha/z})
    / (alpha - 1)`` with ``z = b / sensitivity``.

    Parameters
    ----------
    noise_multiplier : float
        ``z = b / Delta_1`` (> 0).
    orders : array_like, optional
        RDP orders (> 1); the DP core's ``DEFAULT_ORDERS`` when omitted.

    Returns
    -------
    ndarray of float64
        ``eps(alpha)`` per order.
    """
    z = require_positive("noise_multiplier", noise_multiplier)
    a = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=np.float64)
    if np.any(a <= 1.0):
        raise ParameterError("orders", "every RDP order must be > 1")
    first = np.log(a / (2 * a - 1)) + (a - 1) / z
    second = np.log((a - 1) / (2 * a - 1)) - a / z
    return np.asarray(np.logaddexp(first, second) / (a - 1), dtype=np.float64)


@functools.lru_cache(maxsize=1024)
def laplace_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    """RDP-accountant epsilon of ``steps`` Laplace releases with multiplier ``b / Delta_1``.

    The per-release RDP of :func:`laplace_rdp`, times ``steps``, converted at ``delta`` by the DP
    core's :func:`~fedprivacy.dp.rdp.rdp_to_epsilon` (never above the pure-DP bound
    ``steps / noise_multiplier``, which is also returned when smaller).
    """
    t = require_int("steps", steps, minimum=1)
    rdp = t * laplace_rdp(noise_multiplier)
    eps, _ = rdp_to_epsilon(DEFAULT_ORDERS, rdp, delta)
    return float(min(eps, t / noise_multiplier))


def _solve_decreasing(fn: Any, target: float, what: str) -> float:
    """Smallest ``z`` in [1e-4, 1e7] with ``fn(z) <= target`` for a decreasing ``fn``."""
    lo, hi = 1e-4, 1e7
    if fn(hi) > target:
        raise ParameterError("epsilon", f"{what}: target {target:g} unreachable")
    if fn(lo) <= target:
        return lo
    root = float(brentq(lambda u: fn(math.exp(u)) - target, math.log(lo), math.log(hi), xtol=1e-9))
    z = math.exp(root)
    while fn(z) > target:
        z *= 1.0 + 1e-9
    return z


@functools.lru_cache(maxsize=256)
def laplace_noise_multiplier_for(epsilon: float, delta: float, steps: int) -> float:
    """Smallest ``b / Delta_1`` whose ``steps``-fold Laplace composition meets the target.

    Parameters
    ----------
    epsilon : float
        Target epsilon (> 0).
    delta : float
        Target delta in (0, 1).
    steps : int
        Number of releases (>= 1).

    Returns
    -------
    float
        The multiplier ``z`` with ``laplace_epsilon(z, steps, delta) <= epsilon``.
    """
    e, d, t = require_budget(epsilon, delta, steps)
    return _solve_decreasing(lambda z: laplace_epsilon(z, t, d), e, "Laplace calibration")
