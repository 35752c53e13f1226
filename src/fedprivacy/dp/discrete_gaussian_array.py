"""Exact discrete Gaussian sampling, vectorised with numpy, for integer variances up to ``2^60``.

The same rejection samplers as :mod:`fedprivacy.dp.discrete_gaussian` (Canonne, Kamath and
Steinke 2020, Algorithms 2 and 3: a discrete Laplace proposal with ``t = floor(sigma) + 1``,
accepted with ``exp(-(|Y| - sigma^2 / t)^2 / (2 sigma^2))``), run on whole arrays: the scalar
sampler spends about 50 microseconds a sample in Python calls and small reads of the OS's
randomness, which dominates a secure-aggregation round with distributed noise.

Every ``Bernoulli(exp(-gamma))`` is decided exactly, without trusting floating point: a uniform
``V`` on ``[0, 1)`` accepts when ``V < exp(-gamma)``. Its first 53 bits give an interval of width
``2^-53``; ``p_hat = exp(-gamma_hat)`` in float64 comes with a certified margin (far wider than
the rounding of ``gamma_hat`` and of :func:`numpy.exp`), and the interval decides the draw
whenever it lies wholly on one side of ``[p_hat - margin, p_hat + margin]``. Otherwise (about
once in ``10^10`` draws) :func:`resolve_exactly` extends ``V`` with more random bits and compares
it with ``exp(-gamma)`` bracketed by gmpy2 (MPFR, directed rounding) at growing precision, with
``gamma`` the exact rational: the accepted set is exactly ``{V < exp(-gamma)}``.

All randomness is read from :func:`os.urandom` in bulk, no more of it than a draw uses: a sign is
one bit, a uniform integer below ``t < 2^32`` four bytes, a Bernoulli eight; the discrete
Laplace's geometric part and sign are drawn only for the proposals its first test accepted, and
each rejection loop draws about as many proposals as its acceptance rate needs.

Examples
--------
>>> x = discrete_gaussian_array(10**12, 1000)
>>> x.dtype.name, x.shape, bool(abs(x.std() / 10**6 - 1) < 0.2)
('int64', (1000,), True)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction

import gmpy2
import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError

__all__ = ["MAX_VARIANCE", "discrete_gaussian_array", "resolve_exactly"]

MAX_VARIANCE = 1 << 60
"""Largest variance the vectorised sampler takes (``t`` below ``2^31``, samples within int64)."""

_MARGIN_SCALE = 2.0**-40  # relative margin per unit of slack: float64 errors are below 2^-50
_TINY = 2.0**-900  # covers an exp that underflows to 0 (gamma > 745: p below 2^-1000)
_UNIT = 2.0**-53

Exact = Callable[[int], tuple[int, int]]


def _words(n: int) -> NDArray[np.uint64]:
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()


def _short_words(n: int, bits: int) -> NDArray[np.uint64]:
    """``n`` uniform words of at least ``bits`` random low bits: 4 bytes each up to 32 bits."""
    if bits > 32:
        return _words(n)
    return np.frombuffer(os.urandom(4 * n), dtype=np.uint32).astype(np.uint64)


def _coins(n: int) -> NDArray[np.bool_]:
    """``n`` fair coins, one random bit each."""
    raw = np.frombuffer(os.urandom((n + 7) // 8), dtype=np.uint8)
    return np.unpackbits(raw, count=n).astype(bool)


# Acceptance rates of the three rejection steps, a little below the measured ones (2026-11-28:
# the discrete Laplace's 0.632 = 1 - 1/e, the Gaussian step's 0.761 at sigma^2 = 10^6 and 2^51):
_LAPLACE_ACCEPTS = 0.6
_GAUSSIAN_ACCEPTS = 0.74


def _oversampled(need: int, acceptance: float = 0.5) -> int:
    """Proposals to draw for ``need`` samples of a rejection sampler accepting ``acceptance``.

    Accepted proposals are i.i.d. draws of the target whatever their positions, so keeping the
    first ``need`` of them is exact, however many are drawn; drawing a little more than ``need /
    acceptance`` finishes in about one pass without discarding much randomness.
    """
    return math.ceil(need / acceptance * 1.02) + 16


def _uniform_below(t: int, n: int) -> NDArray[np.int64]:
    """``n`` uniform integers in ``[0, t)`` (``1 <= t < 2^62``), by rejection on masked words."""
    out = np.empty(n, dtype=np.int64)
    bits = t.bit_length()
    mask = np.uint64((1 << bits) - 1)
    filled = 0
    while filled < n:
        accepts = t / float(1 << bits)  # above one half
        draw = (_short_words(_oversampled(n - filled, accepts), bits) & mask).astype(np.int64)
        kept = draw[draw < t][: n - filled]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out


def resolve_exactly(prefix: int, num: int, den: int) -> bool:
    """Whether ``V < exp(-num / den)`` for a uniform ``V`` whose first 53 bits are ``prefix``.

    ``V`` is extended 64 random bits at a time and compared with MPFR bounds of
    ``exp(-num / den)`` (``gamma`` rounded up then ``exp`` rounded down, and conversely), at a
    precision that grows with ``V``'s; it ends with probability one.

    Examples
    --------
    >>> resolve_exactly(0, 1, 1), resolve_exactly((1 << 53) - 1, 1, 1)
    (True, False)
    """
    v, bits, precision = prefix, 53, 128
    gamma = gmpy2.mpq(num, den)
    while True:
        with gmpy2.context(gmpy2.get_context(), precision=precision, round=gmpy2.RoundUp):
            gamma_up = gmpy2.mpfr(gamma)
        with gmpy2.context(gmpy2.get_context(), precision=precision, round=gmpy2.RoundDown):
            gamma_down = gmpy2.mpfr(gamma)
            p_low = gmpy2.exp(-gamma_up)
        with gmpy2.context(gmpy2.get_context(), precision=precision, round=gmpy2.RoundUp):
            p_high = gmpy2.exp(-gamma_down)
        if gmpy2.mpq(v + 1, 1 << bits) <= gmpy2.mpq(p_low):
            return True
        if gmpy2.mpq(v, 1 << bits) >= gmpy2.mpq(p_high):
            return False
        v = (v << 64) | int.from_bytes(os.urandom(8), "little")
        bits += 64
        precision += 64


def _bernoulli_exp(
    gamma_hat: NDArray[np.float64], slack: NDArray[np.float64] | float, exact: Exact
) -> NDArray[np.bool_]:
    """``Bernoulli(exp(-gamma_i))`` for each entry, exactly.

    ``gamma_hat`` approximates ``gamma`` so that ``|exp(-gamma_hat) - exp(-gamma)|`` is below
    ``exp(-gamma_hat) * slack * 2^-50``; ``exact(i)`` gives entry ``i``'s ``gamma`` as
    ``(num, den)``, used only for draws the float comparison cannot decide.
    """
    p_hat = np.exp(-gamma_hat)
    margin = p_hat * (np.asarray(slack) * _MARGIN_SCALE) + _TINY
    k = (_words(gamma_hat.size) >> np.uint64(11)).astype(np.float64)  # exact: below 2^53
    low, high = k * _UNIT, (k + 1.0) * _UNIT
    accept = high <= p_hat - margin
    undecided = ~accept & (low < p_hat + margin)
    for i in np.flatnonzero(undecided):
        accept[i] = resolve_exactly(int(k[i]), *exact(int(i)))
    return accept


def _geometric(n: int) -> NDArray[np.int64]:
    """How many ``Bernoulli(exp(-1))`` successes precede the first failure, ``n`` times."""
    out = np.zeros(n, dtype=np.int64)
    alive = np.arange(n)
    while alive.size:
        ok = _bernoulli_exp(np.ones(alive.size), 3.0, lambda i: (1, 1))
        alive = alive[ok]
        out[alive] += 1
        if out.size and int(out.max()) > 1 << 31:  # probability exp(-2^31): never
            raise ParameterError("sigma2", "geometric draw out of range")
    return out


def _discrete_laplace(t: int, n: int) -> NDArray[np.int64]:
    """``n`` draws of the discrete Laplace of scale ``t`` (CKS 2020, Algorithm 2)."""
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        u = _uniform_below(t, _oversampled(n - filled, _LAPLACE_ACCEPTS))

        def exact(i: int, u: NDArray[np.int64] = u) -> tuple[int, int]:
            return int(u[i]), t

        # the geometric part and the sign are independent of U's acceptance: drawn for the
        # accepted U only
        u = u[_bernoulli_exp(u / float(t), u / float(t) + 2.0, exact)]
        x = u + t * _geometric(u.size)
        negative = _coins(u.size)
        keep = ~(negative & (x == 0))  # 0 would otherwise be drawn twice as often
        kept = np.where(negative, -x, x)[keep][: n - filled]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out


def discrete_gaussian_array(sigma2: int | Fraction, size: int) -> NDArray[np.int64]:
    """``size`` independent samples of ``N_Z(0, sigma2)`` for an integer ``sigma2 <= 2^60``.

    Parameters
    ----------
    sigma2 : int or fractions.Fraction
        The variance parameter, an integer in ``[0, 2^60]``.
    size : int
        Number of samples.

    Returns
    -------
    numpy.ndarray
        int64 samples.

    Raises
    ------
    ParameterError
        If ``sigma2`` is not an integer in range or ``size`` is negative (use
        :func:`fedprivacy.dp.discrete_gaussian.discrete_gaussian_vector` for any rational).
    """
    if isinstance(sigma2, bool) or not isinstance(sigma2, int | Fraction):
        raise ParameterError("sigma2", f"must be an integer, got {type(sigma2).__name__}")
    s2 = Fraction(sigma2)
    if s2.denominator != 1 or not 0 <= s2 <= MAX_VARIANCE:
        raise ParameterError("sigma2", f"must be an integer in [0, 2^60], got {s2}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ParameterError("size", f"must be an integer >= 0, got {size!r}")
    var = s2.numerator
    if var == 0:
        return np.zeros(size, dtype=np.int64)
    t = math.isqrt(var) + 1
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        y = _discrete_laplace(t, _oversampled(size - filled, _GAUSSIAN_ACCEPTS))
        a = np.abs(y).astype(np.float64)
        # gamma = (|y| t - var)^2 / (2 var t^2); float error is absolute in the difference,
        # at most (|y| / t + 1) 2^-51 in gamma, and relative 2^-50 otherwise: slack covers both
        diff = a * float(t) - float(var)
        gamma = diff * diff / (2.0 * float(var) * float(t) * float(t))
        slack = gamma + a / t + 4.0

        def exact(i: int, y: NDArray[np.int64] = y) -> tuple[int, int]:
            d = abs(int(y[i])) * t - var
            return d * d, 2 * var * t * t

        kept = y[_bernoulli_exp(gamma, slack, exact)][: size - filled]
        out[filled : filled + kept.size] = kept
        filled += kept.size
    return out
