"""Renyi DP of the (sub-sampled) Gaussian mechanism and the RDP -> (epsilon, delta) conversion.

The RDP of the Gaussian and Poisson-sub-sampled Gaussian mechanisms comes from ``dp-accounting``
(its ``RdpAccountant``; nothing is re-derived here).

RDP -> (epsilon, delta) is Lemma 2 of the ULDP-FL paper (Balle et al. 2020, Theorem 21):
``epsilon = rho + log((alpha - 1) / alpha) - (log(delta) + log(alpha)) / (alpha - 1)``, minimised
over the orders. ``dp_accounting.rdp.compute_epsilon`` implements exactly this formula (its
comments cite the same bound as Canonne-Kamath-Steinke 2020, Prop. 12, and Asoodeh et al. 2020,
eq. 20) and adds two refinements that never make the bound looser: epsilon = 0 when
``delta >= sqrt(1 - exp(-rho))`` (a KL bound), and orders ``alpha <= 1.01`` are skipped as
numerically unstable. :func:`rdp_to_epsilon` uses it. :func:`lemma2_epsilons` evaluates the same
formula per order from ``log(delta)``, so that the group-privacy routes can work with deltas far
below the smallest float.

Note on dp-accounting 0.6: for fractional orders its series for the sub-sampled Gaussian adds the
absolute values of the generalised binomial terms (Opacus keeps their signs), so below order
about 2.5 its RDP is an upper bound rather than the exact value (9 % high at order 1.5 for
``z = 5, q = 0.01``). It is still a valid bound, and the optimal orders in practice lie higher.

The accountant that composes these curves over steps or rounds is
:class:`fedprivacy.dp.accounting.PrivacyAccountant`.
"""

from __future__ import annotations

import functools
import math
from typing import Final

import dp_accounting
import numpy as np
from dp_accounting.rdp import RdpAccountant, compute_epsilon
from numpy.typing import ArrayLike, NDArray

from fedprivacy.dp._checks import (
    require_delta,
    require_order_grid,
    require_orders,
    require_positive,
    require_sampling_rate,
)
from fedprivacy.errors import ParameterError

__all__ = [
    "DEFAULT_ORDERS",
    "gaussian_rdp",
    "lemma2_epsilons",
    "rdp_to_epsilon",
]


def _default_orders() -> NDArray[np.float64]:
    parts = [
        np.arange(101, 200) / 100.0,  # 1.01 .. 1.99 by 0.01
        np.arange(20, 160) / 10.0,  # 2.0 .. 15.9 by 0.1
        np.arange(32, 128) / 2.0,  # 16.0 .. 63.5 by 0.5
        np.arange(64, 129, dtype=np.float64),  # every integer 64 .. 128
        np.arange(132, 257, 4, dtype=np.float64),  # 132 .. 256 by 4
        np.arange(272, 1025, 16, dtype=np.float64),  # 272 .. 1024 by 16
        np.array([1280.0, 1536.0, 2048.0, 3072.0, 4096.0]),
    ]
    orders = np.concatenate(parts).astype(np.float64)
    orders.setflags(write=False)
    return orders


DEFAULT_ORDERS: Final[NDArray[np.float64]] = _default_orders()
"""RDP orders used by default (485 of them, 1.01 .. 4096).

Fine fractional orders where record-level optima lie (1.01 .. 16 in steps of 0.01 and 0.1, then
0.5 up to 64), every integer 64 .. 128, then coarser integers up to 1024 and a few up to 4096.
The large orders matter for group privacy: the RDP route for a group of ``k = 2^c`` records only
uses orders ``alpha >= 2^(c+1)`` (rescaled to ``alpha / 2^c``) and the (epsilon, delta) route
needs orders above ``k``. Computing the sub-sampled Gaussian's RDP on this grid takes about half a
second per ``(noise_multiplier, sampling_rate)`` pair; the result is cached.
"""


@functools.lru_cache(maxsize=512)
def step_rdp_cached(
    noise_multiplier: float, sampling_rate: float, orders: tuple[float, ...]
) -> NDArray[np.float64]:
    acc = RdpAccountant(orders=list(orders))
    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier)
    event: dp_accounting.DpEvent = (
        gaussian
        if sampling_rate == 1.0
        else dp_accounting.PoissonSampledDpEvent(sampling_rate, gaussian)
    )
    acc.compose(event)
    out = np.asarray(acc.rdp, dtype=np.float64)
    out.setflags(write=False)
    return out


def gaussian_rdp(
    noise_multiplier: float, sampling_rate: float = 1.0, orders: ArrayLike | None = None
) -> NDArray[np.float64]:
    """RDP of one step of the (Poisson-sub-sampled) Gaussian mechanism, per order.

    Parameters
    ----------
    noise_multiplier : float
        Noise standard deviation over the L2 sensitivity, > 0.
    sampling_rate : float
        Poisson sampling probability in (0, 1]; 1 is the plain Gaussian mechanism, whose RDP is
        ``alpha / (2 noise_multiplier^2)``.
    orders : array_like, optional
        RDP orders (> 1); :data:`DEFAULT_ORDERS` when omitted. They are sorted.

    Returns
    -------
    ndarray of float64
        ``rho(alpha)`` for every (sorted) order, from ``dp_accounting.rdp.RdpAccountant``; an
        order at which dp-accounting's series does not converge is ``inf``.
    """
    z = require_positive("noise_multiplier", noise_multiplier)
    q = require_sampling_rate("sampling_rate", sampling_rate)
    grid = DEFAULT_ORDERS if orders is None else require_orders("orders", orders)
    return step_rdp_cached(z, q, tuple(float(a) for a in grid)).copy()


def rdp_to_epsilon(orders: ArrayLike, rdp: ArrayLike, delta: float) -> tuple[float, float]:
    """Smallest epsilon over the orders by Lemma 2 (Balle et al. 2020) at ``delta``.

    Parameters
    ----------
    orders : array_like
        RDP orders (> 1).
    rdp : array_like
        ``rho(alpha)`` at each order, >= 0 (``inf`` allowed).
    delta : float
        Target delta in (0, 1).

    Returns
    -------
    epsilon : float
        ``min_alpha rho + log((alpha-1)/alpha) - (log(delta) + log(alpha))/(alpha-1)``, clipped at
        0; computed by ``dp_accounting.rdp.compute_epsilon`` (see the module docstring).
    order : float
        The order that attains it (``nan`` when every order gives an infinite epsilon).

    Raises
    ------
    ParameterError
        If ``delta`` is outside (0, 1), or the orders and values do not match.
    """
    d = require_delta("delta", delta)
    grid, values = rdp_curve(orders, rdp)
    eps, order = compute_epsilon(grid, values, d)
    eps = float(eps)
    return eps, (float(order) if math.isfinite(eps) else math.nan)


def lemma2_epsilons(orders: ArrayLike, rdp: ArrayLike, log_delta: float) -> NDArray[np.float64]:
    """Lemma 2 per order, from ``log(delta)`` (no underflow for tiny deltas).

    Parameters
    ----------
    orders : array_like
        RDP orders.
    rdp : array_like
        ``rho(alpha)`` per order (``inf`` allowed).
    log_delta : float
        Natural logarithm of delta, < 0.

    Returns
    -------
    ndarray of float64
        ``rho + log((alpha - 1)/alpha) - (log_delta + log(alpha)) / (alpha - 1)`` per order, not
        clipped at 0; ``inf`` for orders <= 1 and for infinite ``rho``.
    """
    a = np.asarray(orders, dtype=np.float64)
    r = np.asarray(rdp, dtype=np.float64)
    out = np.full(a.shape, np.inf)
    ok = (a > 1.0) & np.isfinite(r)
    aa = a[ok]
    out[ok] = r[ok] + np.log1p(-1.0 / aa) - (log_delta + np.log(aa)) / (aa - 1.0)
    return out


def rdp_curve(orders: ArrayLike, rdp: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate an RDP curve: 1-D orders > 1 and values >= 0 (inf allowed) of the same length."""
    grid = require_order_grid("orders", orders)
    values = np.asarray(rdp, dtype=np.float64)
    if values.shape != grid.shape:
        raise ParameterError(
            "rdp", f"must have one value per order: shape {values.shape} vs {grid.shape}"
        )
    if np.any(np.isnan(values)) or np.any(values < 0):
        raise ParameterError("rdp", "every RDP value must be >= 0 (inf allowed, NaN not)")
    return grid, values
