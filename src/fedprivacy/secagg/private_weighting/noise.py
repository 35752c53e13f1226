"""A silo's noise in Protocol 1: a discrete Gaussian on the decrypted plaintext's own grid.

The server decrypts the integer ``C_LCM sum_s sum_u w_{s,u} E_{s,u} + sum_s Z_s`` and decodes it
as ``value * P / C_LCM``, so one unit of the plaintext is ``P / C_LCM`` in real terms. The paper
(Appendix D) encodes the noise like a delta, ``round(z / P)``, and multiplies it by ``C_LCM``:
then the noise is a multiple of ``C_LCM`` and the plaintext modulo ``C_LCM`` is
``C_LCM sum_u (A_u mod N_u) / N_u`` with ``A_u = sum_s n_{s,u} E_{s,u}``, *noise-free*: with
pairwise coprime ``N_u`` it gives every user's ``A_u mod N_u``, coordinate by coordinate.

Here each silo draws ``Z_s ~ N_Z(0, sigma_int^2)`` per coordinate with
``sigma_int = noise_std C_LCM / P`` (an exact rational: ``noise_std`` and ``P`` are taken as the
floats' exact values), from OS randomness (:mod:`fedprivacy.dp.discrete_gaussian`), so the noise
covers every residue. In real terms it has standard deviation ``noise_std`` (to a relative
``1 / sigma_int^2``, astronomically small) and lies exactly on the grid: it adds no rounding
error to the aggregate.

The discrete Gaussian is unbounded but the plaintext must stay below ``n / 2`` (condition 2 of
:mod:`.params`), so every draw is checked against ``TAIL_SIGMAS sigma_int`` (a draw beyond it has
probability below ``exp(-TAIL_SIGMAS^2 / 2) = e^-128`` per entry) and a draw beyond it raises
:class:`NoiseTailError` instead of being truncated; ``TAIL_SIGMAS noise_std <= noise_bound`` is
required, so the session's bound ``C_LCM ceil(noise_bound / P)`` covers every accepted draw.

Examples
--------
>>> from fractions import Fraction
>>> grid_variance(0.5, 1e-10, 12) == (Fraction(0.5) * 12 / Fraction(1e-10)) ** 2
True
>>> sample_noise(0.0, 1e-10, 12, 1.0, 3)
[0, 0, 0]
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

from fedprivacy.dp.discrete_gaussian import discrete_gaussian_vector, exact_variance
from fedprivacy.dp.distributed_discrete import check_negligible, grid_noise_multiplier
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.errors import PrivateWeightingError

if TYPE_CHECKING:
    from fedprivacy.secagg.private_weighting.params import PrivateWeightingParameters

__all__ = [
    "accounted_noise_multiplier",
    "TAIL_SIGMAS",
    "NoiseTailError",
    "check_noise_std",
    "grid_variance",
    "sample_noise",
]

TAIL_SIGMAS = 16
"""Tail cut of a silo's noise, in standard deviations (``P(|Z| > 16 sigma) < e^-128``)."""


class NoiseTailError(PrivateWeightingError):
    """A noise draw exceeded ``TAIL_SIGMAS`` standard deviations (never truncated silently)."""


def grid_variance(noise_std: float, precision: float, c_lcm: int) -> Fraction:
    """``sigma_int^2 = (noise_std C_LCM / P)^2``, exactly.

    Parameters
    ----------
    noise_std : float
        Standard deviation of a silo's noise in real units, ``>= 0``.
    precision : float
        ``P``.
    c_lcm : int
        ``C_LCM``.

    Returns
    -------
    fractions.Fraction
        The variance in plaintext units.
    """
    return exact_variance(noise_std, Fraction(c_lcm) / Fraction(precision))


def check_noise_std(noise_std: float, noise_bound: float) -> None:
    """Check a noise standard deviation against the session's noise bound.

    Parameters
    ----------
    noise_std : float
        Standard deviation in real units.
    noise_bound : float
        The session's entrywise noise bound.

    Raises
    ------
    ParameterError
        If ``noise_std`` is not a finite number ``>= 0`` or ``TAIL_SIGMAS noise_std``
        exceeds ``noise_bound``.
    """
    exact_variance(noise_std, Fraction(1))  # type and range
    if TAIL_SIGMAS * noise_std > noise_bound:
        raise ParameterError(
            "noise_std",
            f"{TAIL_SIGMAS} x noise_std = {TAIL_SIGMAS * noise_std!r} exceeds the session's "
            f"noise_bound {noise_bound!r} (the tail cut must fit in the plaintext range)",
        )


def sample_noise(
    noise_std: float, precision: float, c_lcm: int, noise_bound: float, size: int
) -> list[int]:
    """Draw one silo's noise vector in plaintext units, with the tail check.

    Parameters
    ----------
    noise_std : float
        Standard deviation in real units (``0``: no noise).
    precision : float
        ``P``.
    c_lcm : int
        ``C_LCM``.
    noise_bound : float
        The session's entrywise noise bound; ``TAIL_SIGMAS noise_std`` must not exceed it.
    size : int
        Number of entries.

    Returns
    -------
    list of int
        ``N_Z(0, sigma_int^2)`` draws, each within ``TAIL_SIGMAS sigma_int``.

    Raises
    ------
    ParameterError
        If ``noise_std`` is invalid or ``TAIL_SIGMAS noise_std > noise_bound``.
    NoiseTailError
        If a draw lies beyond ``TAIL_SIGMAS sigma_int`` (probability below ``e^-128``).
    """
    check_noise_std(noise_std, noise_bound)
    sigma2 = grid_variance(noise_std, precision, c_lcm)
    values = discrete_gaussian_vector(sigma2, size)
    limit = TAIL_SIGMAS * TAIL_SIGMAS * sigma2
    if any(v * v > limit for v in values):
        raise NoiseTailError(
            f"a noise draw exceeded {TAIL_SIGMAS} standard deviations (probability below "
            "e^-128 per entry): the round is aborted rather than the draw truncated"
        )
    return values


def accounted_noise_multiplier(
    params: PrivateWeightingParameters, noise_std: float, clip: float
) -> float:
    """The noise multiplier of a session's summed silo noise, to account with.

    The one computation for an in-process session and a deployed server, which has the
    session's public parameters only. The released aggregate is the data term plus ``|S|``
    independent discrete Gaussians of variance ``sigma_int^2 = (noise_std C_LCM / P)^2``; with
    integer sensitivity ``Delta`` (grid units) it meets the continuous Gaussian's RDP bound of
    variance ``|S| sigma_int^2`` plus ``tau d`` (Kairouz, Liu, Steinke 2021), and ``tau d`` is
    checked to be below ``1e-300``. A user's encoded, weighted delta has L2 norm at most
    ``C_LCM (C / P + sqrt(d) / 2)`` in grid units (rounding included), so the multiplier is
    ``sqrt(|S|) noise_std / (C + sqrt(d) P / 2)``
    (:func:`fedprivacy.dp.distributed_discrete.grid_noise_multiplier`).

    Raises
    ------
    ParameterError
        If ``noise_std`` vanishes on the grid.
    NonNegligibleTauError
        If ``tau d >= 1e-300`` (too little noise for the distributed bound).
    """
    sigma2 = grid_variance(noise_std, params.precision, params.c_lcm)
    if sigma2 == 0:
        raise ParameterError("noise_std", "must be > 0 to account for it")
    check_negligible(sigma2, params.n_silos, params.n_params)
    return grid_noise_multiplier(noise_std, params.n_silos, clip, params.precision, params.n_params)
