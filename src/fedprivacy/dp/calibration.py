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
    search = _Search(accountant, orders, target, d, t, q)
    start = ACCOUNTANTS[accountant].calibration_start
    lo, hi = search.bracket(lo, hi) if start is None else search.bracket_from(start, lo, hi)

    def excess(log_z: float) -> float:
        return min(search.epsilon(math.exp(log_z)), _EPS_CAP) - target

    root = float(brentq(excess, math.log(lo), math.log(hi), xtol=tol / 4, rtol=4 * 2.3e-16))
    z = min(math.exp(root), hi)
    while search.epsilon(z) > target:  # step to the safe side of the root
        z = min(z * (1.0 + tol / 4), hi)
    return z


class _Search:
    """The epsilon of each noise multiplier tried (cached), and the search's bracket."""

    def __init__(
        self,
        accountant: AccountantKind,
        orders: ArrayLike | None,
        target: float,
        delta: float,
        steps: int,
        rate: float,
    ) -> None:
        self.accountant, self.orders = accountant, orders
        self.target, self.delta, self.steps, self.rate = target, delta, steps, rate
        self.cache: dict[float, float] = {}

    def epsilon(self, z: float) -> float:
        """Epsilon at the target delta of ``steps`` compositions at noise multiplier ``z``."""
        if z not in self.cache:
            acc = PrivacyAccountant(self.accountant, self.orders)
            self.cache[z] = acc.compose_gaussian(z, self.steps, self.rate).epsilon(self.delta)
        return self.cache[z]

    def unreachable(self, z: float) -> ParameterError:
        """The target is not met even at the upper end ``z``."""
        return _Unreachable(
            "epsilon",
            f"target {self.target:g} is unreachable: even noise multiplier {z:g} (upper end of "
            f"the search) gives epsilon {self.epsilon(z):.6g} over {self.steps} step(s) at delta "
            f"{self.delta:g}; raise upper",
        )

    def met_already(self, z: float) -> ParameterError:
        """The target is met already at the lower end ``z``."""
        return _MetAlready(
            "epsilon",
            f"target {self.target:g} is met already by noise multiplier {z:g} (lower end of the "
            f"search, epsilon {self.epsilon(z):.6g}); lower the lower end to find the smallest "
            "noise",
        )

    def bracket(self, lo: float, hi: float) -> tuple[float, float]:
        """``(lo, hi)`` itself, once checked to hold the root."""
        if self.epsilon(hi) > self.target:
            raise self.unreachable(hi)
        if self.epsilon(lo) <= self.target:
            raise self.met_already(lo)
        return lo, hi

    def bracket_from(self, start: AccountantKind, lo: float, hi: float) -> tuple[float, float]:
        """A bracket found without probing ``lo`` blindly (an accountant costly at small noise).

        Start from the answer of the ``start`` accountant (RDP's epsilon is the larger one in
        practice, so its noise is enough for PLD), walk up until the target is met, then down
        geometrically until epsilon exceeds it.
        """
        target = self.target
        try:
            top = noise_multiplier_for(
                target, self.delta, self.steps, self.rate, start, lower=lo, upper=hi, rtol=1e-3
            )
        except _Unreachable:
            top = hi
        while self.epsilon(top) > target:
            if top >= hi:
                raise self.unreachable(hi)
            top = min(top * 1.25, hi)
        bottom = top
        while self.epsilon(bottom) <= target:
            if bottom <= lo:
                raise self.met_already(lo)
            top, bottom = bottom, max(bottom / 1.25, lo)
        return bottom, top
