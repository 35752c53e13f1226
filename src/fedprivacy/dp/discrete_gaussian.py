"""Exact discrete Gaussian sampling from OS randomness, for rational variances of any size.

The discrete Gaussian ``N_Z(0, sigma^2)`` puts mass ``exp(-x^2 / (2 sigma^2)) / Z`` on every
integer ``x``. This module samples it exactly (no floating point anywhere) with the rejection
samplers of Canonne, Kamath and Steinke, "The Discrete Gaussian for Differential Privacy"
(NeurIPS 2020):

* Algorithm 1, :func:`bernoulli_exp`: ``Bernoulli(exp(-gamma))`` for a rational ``gamma >= 0``,
  from ``Bernoulli(gamma / k)`` draws (``randbelow(den * k) < num``) and ``floor(gamma)``
  ``Bernoulli(exp(-1))`` draws;
* Algorithm 2, :func:`discrete_laplace`: the discrete Laplace with integer scale ``t``
  (``P(x) ~ exp(-|x| / t)``), from a uniform ``U < t`` accepted with ``exp(-U / t)`` and a
  geometric number ``V`` of ``exp(-1)`` successes: ``U + t V``, signed;
* Algorithm 3, :func:`discrete_gaussian`: a discrete Laplace draw ``Y`` with
  ``t = floor(sigma) + 1`` accepted with ``exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2))``.

Every draw comes from :mod:`secrets` (``randbelow`` reads the OS's CSPRNG): the noise a protocol
party adds must not be reproducible from a seed anybody else could know. The variance is a
:class:`fractions.Fraction`, so it can be an integer of thousands of bits (the private weighting
protocol's noise is ``sigma C_LCM / P``, with ``C_LCM`` about 2,900 bits for ``N_max = 2000``);
all arithmetic is on Python integers. The expected number of draws per sample is a small
constant independent of ``sigma`` (CKS 2020, Section 5), and each costs a few big-integer
operations: a few thousand samples at 3,000 bits take well under a second.

Examples
--------
>>> from fractions import Fraction
>>> x = discrete_gaussian_vector(Fraction(10), 5)
>>> len(x), all(isinstance(v, int) for v in x)
(5, True)
>>> discrete_gaussian_vector(Fraction(0), 3)
[0, 0, 0]
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

from fedprivacy.errors import ParameterError

__all__ = [
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_vector",
    "discrete_laplace",
    "exact_variance",
    "isqrt_floor",
]


def _bernoulli(num: int, den: int) -> bool:
    """``Bernoulli(num / den)`` for ``0 <= num <= den``."""
    return secrets.randbelow(den) < num


def _bernoulli_exp_unit(num: int, den: int) -> bool:
    """Algorithm 1 for ``gamma = num / den`` in ``[0, 1]``: ``Bernoulli(exp(-gamma))``."""
    k = 1
    while _bernoulli(num, den * k):
        k += 1
    return k % 2 == 1


def bernoulli_exp(num: int, den: int) -> bool:
    """Draw ``Bernoulli(exp(-num / den))`` exactly (CKS 2020, Algorithm 1).

    Parameters
    ----------
    num, den : int
        ``gamma = num / den`` with ``num >= 0`` and ``den >= 1``.

    Returns
    -------
    bool
        True with probability ``exp(-gamma)``.

    Raises
    ------
    ParameterError
        If ``num < 0`` or ``den < 1``.

    Examples
    --------
    >>> bernoulli_exp(0, 1)
    True
    """
    if num < 0 or den < 1:
        raise ParameterError("gamma", f"must be num / den with num >= 0, den >= 1: {num}/{den}")
    whole, rest = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_unit(1, 1):
            return False
    return _bernoulli_exp_unit(rest, den)


def discrete_laplace(t: int) -> int:
    """Draw from the discrete Laplace with scale ``t``: ``P(x) ~ exp(-|x| / t)`` (Algorithm 2).

    Parameters
    ----------
    t : int
        Scale, ``>= 1``.

    Returns
    -------
    int
        The sample.

    Raises
    ------
    ParameterError
        If ``t < 1``.

    Examples
    --------
    >>> isinstance(discrete_laplace(3), int)
    True
    """
    if t < 1:
        raise ParameterError("t", f"the discrete Laplace scale must be an integer >= 1, got {t}")
    while True:
        u = secrets.randbelow(t)
        if not bernoulli_exp(u, t):
            continue
        v = 0
        while bernoulli_exp(1, 1):
            v += 1
        x = u + t * v
        negative = secrets.randbelow(2) == 1
        if negative and x == 0:
            continue  # 0 would otherwise be drawn twice as often
        return -x if negative else x


def isqrt_floor(value: Fraction) -> int:
    """``floor(sqrt(value))`` for a rational ``value >= 0``, exactly.

    Examples
    --------
    >>> isqrt_floor(Fraction(10)), isqrt_floor(Fraction(1, 3)), isqrt_floor(Fraction(9, 4))
    (3, 0, 1)
    """
    # floor(sqrt(x)) = isqrt(floor(x)) for x >= 0
    return math.isqrt(value.numerator // value.denominator)


def _require_variance(sigma2: Fraction) -> Fraction:
    if not isinstance(sigma2, Fraction | int) or isinstance(sigma2, bool):
        raise ParameterError(
            "sigma2", f"must be an exact rational (Fraction or int), got {type(sigma2).__name__}"
        )
    value = Fraction(sigma2)
    if value < 0:
        raise ParameterError("sigma2", f"must be >= 0, got {value}")
    return value


def discrete_gaussian(sigma2: Fraction) -> int:
    """Draw one sample of ``N_Z(0, sigma2)`` exactly (CKS 2020, Algorithm 3).

    :func:`discrete_gaussian_vector` of one sample: same ``sigma2`` (0 gives 0) and errors.

    Examples
    --------
    >>> discrete_gaussian(Fraction(0))
    0
    """
    return discrete_gaussian_vector(sigma2, 1)[0]


def _sample(p: int, q: int, t: int) -> int:
    """``N_Z(0, p / q)`` with ``t = floor(sigma) + 1``.

    ``gamma = (|Y| - sigma^2 / t)^2 / (2 sigma^2) = (|Y| t q - p)^2 / (2 p q t^2)``.
    """
    den = 2 * p * q * t * t
    while True:
        y = discrete_laplace(t)
        diff = abs(y) * t * q - p
        if bernoulli_exp(diff * diff, den):
            return y


def discrete_gaussian_vector(sigma2: Fraction, size: int) -> list[int]:
    """Draw ``size`` independent samples of ``N_Z(0, sigma2)``.

    Parameters
    ----------
    sigma2 : fractions.Fraction or int
        The variance parameter ``sigma^2 >= 0``.
    size : int
        Number of samples, ``>= 0``.

    Returns
    -------
    list of int
        The samples (Python integers: they may exceed 64 bits).

    Raises
    ------
    ParameterError
        If ``sigma2`` is not an exact rational ``>= 0`` or ``size`` is negative.

    Examples
    --------
    >>> [abs(v) < 10**40 for v in discrete_gaussian_vector(Fraction(10**60), 2)]
    [True, True]
    """
    s2 = _require_variance(sigma2)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ParameterError("size", f"must be an integer >= 0, got {size!r}")
    if s2 == 0:
        return [0] * size
    p, q, t = s2.numerator, s2.denominator, isqrt_floor(s2) + 1
    return [_sample(p, q, t) for _ in range(size)]


def exact_variance(std: float, scale: Fraction) -> Fraction:
    """``(std * scale)^2`` as an exact rational (``std`` taken as the float's exact value).

    Parameters
    ----------
    std : float
        A finite standard deviation ``>= 0`` in real units.
    scale : fractions.Fraction
        Grid units per real unit (e.g. ``C_LCM / P``).

    Returns
    -------
    fractions.Fraction
        The variance in grid units.

    Raises
    ------
    ParameterError
        If ``std`` is negative or not finite.

    Examples
    --------
    >>> exact_variance(1.5, Fraction(2))
    Fraction(9, 1)
    """
    if isinstance(std, bool) or not isinstance(std, int | float) or not math.isfinite(std):
        raise ParameterError("noise_std", f"must be a finite number >= 0, got {std!r}")
    if std < 0:
        raise ParameterError("noise_std", f"must be >= 0, got {std!r}")
    return (Fraction(std) * scale) ** 2
