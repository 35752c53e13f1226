"""Noise calibration: the smallest noise multiplier that meets a target (epsilon, delta)."""

from __future__ import annotations

import math

from numpy.typing import ArrayLike
from scipy.optimize import brentq

from fedprivacy.dp._checks import require_budget, require_positive, require_sampling_rate
from fedprivacy.dp.accountants import ACCOUNTANTS
from fedprivacy.dp.accounting import AccountantKind, PrivacyAccountant
from fedprivacy.errors import ParameterError

__all__ = ["noise_multiplier_for"]

_EPS_CAP = 1e12  # stands in for an infinite epsilon so that the root finder sees finite values


class _Unreachable(ParameterError):
    """Even the largest noise in the search range gives too large an epsilon."""


class _MetAlready(ParameterError):
    """The smallest noise in the search range already meets the target."""


def noise_multiplier_for(
    epsilon: float,
    delta: float,
    steps: int,
    sampling_rate: float = 1.0,
    accountant: AccountantKind = "rdp",
    *,
    orders: ArrayLike | None = None,
    lower: float = 0.05,
    upper: float = 1000.0,
    rtol: float = 1e-5,
) -> float:
    """Smallest noise multiplier (within ``rtol``) whose composition meets ``(epsilon, delta)``.

    Epsilon decreases as the noise multiplier grows, so the root of
    ``epsilon(z) - target`` is found by Brent's method on ``log z`` in ``[lower, upper]``; the
    answer is then nudged up, if needed, so that ``epsilon(z) <= target`` holds exactly with the
    chosen accountant (the result is never on the unsafe side). An accountant that is expensive
    at small noise (``"pld"``) brackets the root from the noise of its
    :attr:`~fedprivacy.dp.accountants.AccountantBackend.calibration_start` accountant instead of
    probing ``lower``.

    Parameters
    ----------
    epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta in (0, 1).
    steps : int
        Number of compositions, >= 1.
    sampling_rate : float
        Poisson sampling probability in (0, 1].
    accountant : {"rdp", "pld"}
        Which accountant measures epsilon (a kind of
        :data:`~fedprivacy.dp.accountants.ACCOUNTANTS`).
    orders : array_like, optional
        RDP orders for the ``"rdp"`` accountant (default
        :data:`~fedprivacy.dp.rdp.DEFAULT_ORDERS`; every new noise multiplier costs
        about half a second on that grid with sub-sampling, so pass a smaller grid for speed).
    lower, upper : float
        Search range of the noise multiplier, ``0 < lower < upper``.
    rtol : float
        Relative tolerance on the noise multiplier, > 0.

    Returns
    -------
    float
        The noise multiplier ``z`` with ``epsilon(z) <= epsilon``.

    Raises
    ------
    ParameterError
        If a parameter is out of range, or the target cannot be met inside ``[lower, upper]``
        (even ``upper`` gives a larger epsilon, or ``lower`` already meets it).
    """
    target, d, t = require_budget(epsilon, delta, steps)
    q = require_sampling_rate("sampling_rate", sampling_rate)
    lo = require_positive("lower", lower)
    hi = require_positive("upper", upper)
    tol = require_positive("rtol", rtol)
    if lo >= hi:
        raise ParameterError("lower", f"must be < upper ({hi!r}), got {lo!r}")
    PrivacyAccountant(accountant, orders)  # validates the kind and orders before any real work
    start = ACCOUNTANTS[accountant].calibration_start

    cache: dict[float, float] = {}

    def eps_at(z: float) -> float:
        if z not in cache:
            acc = PrivacyAccountant(accountant, orders)
            cache[z] = acc.compose_gaussian(z, t, q).epsilon(d)
        return cache[z]

    def unreachable(z: float) -> ParameterError:
        return _Unreachable(
            "epsilon",
            f"target {target:g} is unreachable: even noise multiplier {z:g} (upper end of the "
            f"search) gives epsilon {eps_at(z):.6g} over {t} step(s) at delta {d:g}; raise upper",
        )

    def met_already(z: float) -> ParameterError:
        return _MetAlready(
            "epsilon",
            f"target {target:g} is met already by noise multiplier {z:g} (lower end of the "
            f"search, epsilon {eps_at(z):.6g}); lower the lower end to find the smallest noise",
        )

    if start is not None:
        # This accountant (PLD) gets very expensive at small noise, so never probe the lower end
        # blindly: start from the answer of the `start` accountant (RDP's epsilon is the larger
        # one in practice, so its noise is enough for PLD) and walk down geometrically until
        # epsilon exceeds the target.
        try:
            top = noise_multiplier_for(target, d, t, q, start, lower=lo, upper=hi, rtol=1e-3)
        except _Unreachable:
            top = hi
        while eps_at(top) > target:
            if top >= hi:
                raise unreachable(hi)
            top = min(top * 1.25, hi)
        bottom = top
        while eps_at(bottom) <= target:
            if bottom <= lo:
                raise met_already(lo)
            top, bottom = bottom, max(bottom / 1.25, lo)
        lo, hi = bottom, top
    else:
        if eps_at(hi) > target:
            raise unreachable(hi)
        if eps_at(lo) <= target:
            raise met_already(lo)

    def excess(log_z: float) -> float:
        return min(eps_at(math.exp(log_z)), _EPS_CAP) - target

    root = float(brentq(excess, math.log(lo), math.log(hi), xtol=tol / 4, rtol=4 * 2.3e-16))
    z = min(math.exp(root), hi)
    while eps_at(z) > target:  # step to the safe side of the root
        z = min(z * (1.0 + tol / 4), hi)
    return z
