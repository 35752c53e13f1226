"""Accounting for a sum of discrete Gaussians added by several parties (distributed noise).

When each of ``n`` parties adds independent ``N_Z(0, sigma^2)`` noise to an integer vector of
dimension ``d``, the released value is the data term plus a sum ``Z`` of ``n`` discrete
Gaussians, which is *not* itself a discrete Gaussian. Kairouz, Liu and Steinke ("The Distributed
Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation", ICML 2021,
Proposition 14 / Theorem 1) bound its Renyi divergence for an integer shift ``Delta``
(``sigma >= 1/2``)::

    D_alpha(Z + Delta || Z) <= alpha ||Delta||_2^2 / (2 n sigma^2) + tau d,
    tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k / (k + 1)),

i.e. the continuous Gaussian's RDP curve with variance ``n sigma^2`` (Canonne, Kamath and Steinke
2020 show that one discrete Gaussian with integer sensitivity meets the continuous Gaussian's
Renyi bound) plus an additive ``tau d``. :func:`log_tau` computes ``log tau`` without forming
``sigma^2`` as a float (it can have thousands of bits); :func:`check_negligible` refuses an
accounting in which ``tau d`` is not below ``1e-300``, so that adding it to the RDP curve (which
float64 cannot even represent) changes nothing.

The noise multiplier to account with is ``sqrt(n) sigma / ||Delta||_2`` with ``||Delta||_2`` the
worst-case L2 sensitivity *in grid units*, rounding included: see :func:`grid_noise_multiplier`.

Examples
--------
>>> from fractions import Fraction
>>> round(log_tau(Fraction(1), 2), 3)  # 10 exp(-pi^2): log(10) - pi^2
-7.567
>>> log_tau(Fraction(10**400), 3)
-inf
"""

from __future__ import annotations

import math
from fractions import Fraction

from fedprivacy._validation import require_int, require_positive_float
from fedprivacy.errors import ParameterError

__all__ = [
    "NEGLIGIBLE_LOG_TAU",
    "NonNegligibleTauError",
    "check_negligible",
    "grid_noise_multiplier",
    "log_tau",
]

NEGLIGIBLE_LOG_TAU = math.log(1e-300)
"""``log(1e-300)``: ``tau d`` below this changes no float64 RDP value."""


_LOG_HUGE = math.log(1e306)
_FLOAT_MARGIN = 2.0**-40


class NonNegligibleTauError(ParameterError):
    """The distributed discrete Gaussian's additive term ``tau d`` is not negligible."""


def _log_fraction(x: Fraction) -> float:
    return math.log(x.numerator) - math.log(x.denominator)


def log_tau(sigma2: Fraction, n: int) -> float:
    """``log tau`` with ``tau = 10 sum_{k=1}^{n-1} exp(-2 pi^2 sigma^2 k / (k + 1))``.

    Parameters
    ----------
    sigma2 : fractions.Fraction
        Each party's variance ``sigma^2 > 0`` (grid units; any size).
    n : int
        Number of parties, ``>= 1`` (``n = 1``: one discrete Gaussian, ``tau = 0``).

    Returns
    -------
    float
        ``log tau``; ``-inf`` when ``tau = 0`` or ``sigma^2 > 1e306`` (``log tau`` below float64).

    Raises
    ------
    ParameterError
        If ``sigma2 <= 0`` or ``n < 1``.

    Examples
    --------
    >>> log_tau(Fraction(4), 1)
    -inf
    """
    s2 = Fraction(sigma2)
    if s2 <= 0:
        raise ParameterError("sigma2", f"must be > 0, got {s2}")
    n = require_int("n", n, minimum=1)
    if n == 1:
        return -math.inf
    if _log_fraction(s2) > _LOG_HUGE:  # log tau < -pi^2 1e306: below float64
        return -math.inf
    s = float(s2)
    exponents = [-2.0 * math.pi**2 * s * k / (k + 1) for k in range(1, n)]
    top = max(exponents)
    return math.log(10.0) + top + math.log(sum(math.exp(e - top) for e in exponents))


def check_negligible(sigma2: Fraction, n: int, dimension: int) -> float:
    """Check that ``tau d`` is below ``1e-300``; return ``log(tau d)``.

    Parameters
    ----------
    sigma2 : fractions.Fraction
        Each party's variance in grid units.
    n : int
        Number of parties.
    dimension : int
        ``d``, the number of noised coordinates.

    Returns
    -------
    float
        ``log(tau d)`` (``-inf`` when below float64).

    Raises
    ------
    NonNegligibleTauError
        If ``tau d >= 1e-300``: the continuous-Gaussian RDP curve would understate the loss.

    Examples
    --------
    >>> check_negligible(Fraction(10**6), 3, 100) < -9e6  # about -pi^2 10^6
    True
    """
    dimension = require_int("dimension", dimension, minimum=1)
    value = log_tau(sigma2, n) + math.log(dimension)
    if value >= NEGLIGIBLE_LOG_TAU:
        raise NonNegligibleTauError(
            "noise_std",
            f"the sum of {n} discrete Gaussians of variance {float(sigma2):.4g} (grid units) is "
            f"not close enough to one discrete Gaussian: tau d = exp({value:.4g}) >= 1e-300 "
            "(Kairouz, Liu, Steinke 2021); use more noise or a finer grid",
        )
    return value


def grid_noise_multiplier(
    noise_std: float, n: int, clip: float, precision: float, dimension: int
) -> float:
    """Noise multiplier of ``n`` parties' noise on a grid of step ``P`` over the true sensitivity.

    A clipped vector ``x`` (``||x||_2 <= C``) encoded as ``E = round(x / P)`` has
    ``||E||_2 <= C / P + sqrt(d) / 2`` (each coordinate moves by at most ``1 / 2``), so in grid
    units the sensitivity is ``C / P + sqrt(d) / 2`` (times any common integer scale, which
    cancels) and the total noise ``sqrt(n) noise_std / P``. The result,
    ``sqrt(n) noise_std / (C + sqrt(d) P / 2)``, is lowered by a relative ``2^-40`` for the float64
    rounding of the clipping and of ``x / P`` (a few ulps) and rounded down.

    Parameters
    ----------
    noise_std : float
        Each party's standard deviation in real units.
    n : int
        Number of parties.
    clip : float
        L2 clipping bound ``C`` of one contribution.
    precision : float
        Grid step ``P``.
    dimension : int
        ``d``.

    Returns
    -------
    float
        The effective noise multiplier (slightly below ``sqrt(n) noise_std / C``).

    Raises
    ------
    ParameterError
        If an argument is out of range.

    Examples
    --------
    >>> m = grid_noise_multiplier(2.5, 4, 1.0, 1e-10, 14)
    >>> m < 5.0 and abs(m / 5.0 - 1) < 1e-9
    True
    """
    noise_std = require_positive_float("noise_std", noise_std)
    clip = require_positive_float("clip", clip)
    precision = require_positive_float("precision", precision)
    n = require_int("n", n, minimum=1)
    dimension = require_int("dimension", dimension, minimum=1)
    sensitivity = (clip + math.sqrt(dimension) * precision / 2.0) * (1.0 + _FLOAT_MARGIN)
    return math.nextafter(math.sqrt(n) * noise_std / sensitivity, 0.0)
