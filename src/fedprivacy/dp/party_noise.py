"""Distributed DP inside secure aggregation: each party's discrete Gaussian on the encoding's grid.

Every party of a secure-aggregation round clips its update to L2 norm ``C``, encodes it with the
round's :class:`~fedprivacy.crypto.fixed_point.FixedPointCodec` (grid step ``1 / scale``,
unbiased stochastic rounding) and, before masking, adds a vector of independent discrete
Gaussians ``N_Z(0, sigma^2)`` drawn from the operating system's randomness
(:func:`draw_party_noise`). The server unmasks the sum of the encodings *and* of the noises: it
never sees an unnoised sum (Kairouz, Liu and Steinke, "The Distributed Discrete Gaussian
Mechanism for Federated Learning with Secure Aggregation", ICML 2021).

* **Sensitivity** in grid units: ``Delta = C scale + sqrt(d)``; stochastic rounding moves each
  of the ``d`` coordinates by less than one unit.
* **Dropouts.** Parties that drop before sending their masked input add no noise, and a batch
  policy can leave submitted inputs out of the sum; the protocol never unmasks fewer inputs than
  its threshold ``t``. The noise mode (:mod:`fedprivacy.dp.noise_modes`) decides how the target
  survives: ``over-provisioned`` (each party adds ``sigma^2 = ceil((z Delta)^2 / t)``, so every
  sum of ``s >= t`` noises has variance ``s sigma^2 >= (z Delta)^2``) or ``exact`` (each party
  adds ``ceil(n / t)`` removable components and the survivors remove what the sum does not need:
  ``n`` components of ``ceil((z Delta)^2 / n)`` remain, whoever dropped). The accountant uses the
  noise really present, ``z_m = sqrt(m) sigma / Delta >= z`` for the ``m`` draws in the sum
  (:meth:`RoundNoise.noise_multiplier`), never the planned one.
* **Accounting** of a sum of ``n`` discrete Gaussians: the continuous Gaussian's RDP with
  variance ``n sigma^2`` plus ``tau d`` (KLS 2021, Theorem 1); ``tau d`` is checked below
  ``1e-300`` (:func:`~fedprivacy.dp.distributed_discrete.check_negligible`), else a typed error.
* **Wrap-around.** The codec (:meth:`PartyNoise.codec`) leaves room for ``K`` clipped entries
  plus 10.6 standard deviations of the most noise a round of at most ``K`` parties can hold (two
  parties, the smallest threshold, each over-provisioned). Discrete Gaussians are sub-Gaussian
  (Canonne, Kamath and Steinke 2020), so a round of ``n`` summed inputs wraps with probability at
  most ``2 d exp(-(H - n m)^2 / (2 n sigma^2))`` (``H = 2^(bits-1) - 1``, ``m`` the largest
  encoded entry): :meth:`RoundNoise.wrap_log_probability` states it for every round.

Examples
--------
>>> from fedprivacy.crypto.fixed_point import FixedPointCodec
>>> plan = PartyNoise(noise_multiplier=1.0, clip=1.0)
>>> codec = plan.codec(1.0, per_round=12, bits=32)
>>> rn = plan.round_noise(codec, 1.0, threshold=6, dimension=100)
>>> bool(rn.noise_multiplier(6) >= 0.99999 and rn.noise_multiplier(12) > 1.41)
True
>>> rn.wrap_log_probability(12) < -100
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int, require_positive_float
from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.dp.discrete_gaussian import discrete_gaussian_vector
from fedprivacy.dp.discrete_gaussian_array import MAX_VARIANCE, discrete_gaussian_array
from fedprivacy.dp.distributed_discrete import check_negligible
from fedprivacy.dp.noise_modes import DEFAULT_NOISE_MODE, NOISE_MODES, NoiseDraw
from fedprivacy.errors import ParameterError

__all__ = [
    "PartyNoise",
    "RoundNoise",
    "add_components",
    "add_grid_noise",
    "draw_components",
    "draw_party_noise",
]

HEADROOM_SIGMAS = 10.6
"""Standard deviations of noise the codec leaves room for: ``2 exp(-10.6^2 / 2) < 2^-80``."""

MIN_PARTIES = 2
"""The smallest threshold of the protocol (:data:`fedprivacy.secagg.params.MIN_THRESHOLD`)."""

_COARSEST = 0.01  # sqrt(d) / scale may add at most this fraction of C to the sensitivity
_MARGIN = 1.0 + 2.0**-40  # float rounding of C * scale + sqrt(d)


@dataclass(frozen=True)
class RoundNoise:
    """One round's noise: each party's variance on the grid and what it is worth.

    Attributes
    ----------
    draw : NoiseDraw
        What each party adds (:mod:`fedprivacy.dp.noise_modes`).
    sensitivity : float
        ``Delta``, an upper bound on one party's encoded L2 norm in grid units.
    threshold : int
        The fewest inputs the protocol unmasks (the over-provisioning target).
    dimension : int
        ``d``, noised coordinates.
    codec : FixedPointCodec
        The encoding.
    entry_magnitude : int
        The largest ``|integer|`` an encoded entry takes before noise.
    """

    draw: NoiseDraw
    sensitivity: float
    threshold: int
    dimension: int
    codec: FixedPointCodec
    entry_magnitude: int

    @property
    def variance(self) -> Fraction:
        """fractions.Fraction: the variance ``sigma^2`` of each draw, in grid units."""
        return self.draw.variance

    @property
    def party_std(self) -> float:
        """float: one draw's standard deviation in real units (``sigma / scale``)."""
        return math.sqrt(float(self.variance)) / self.codec.scale

    def noise_multiplier(self, draws: int) -> float:
        """``sqrt(m) sigma / Delta``: the noise multiplier of a sum holding ``draws`` draws.

        ``draws`` is the number of parties aggregated in the over-provisioned mode, and
        :meth:`NoiseDraw.in_sum <fedprivacy.dp.noise_modes.NoiseDraw.in_sum>` in the exact one.

        Raises
        ------
        NonNegligibleTauError
            If the sum of ``draws`` discrete Gaussians is not close enough to one (KLS 2021).
        """
        m = require_int("draws", draws, minimum=1)
        check_negligible(self.variance, m, self.dimension)
        return math.nextafter(math.sqrt(float(m * self.variance)) / self.sensitivity, 0.0)

    def wrap_log_probability(self, parties: int, draws: int | None = None) -> float:
        """Natural log of a bound on the probability that the released sum wraps.

        ``parties`` inputs and ``draws`` noise draws (default: one a party). Only the released
        sum matters: the excess the survivors remove wraps and unwraps modulo ``2**bits``.
        """
        n = require_int("parties", parties, minimum=1)
        m = n if draws is None else require_int("draws", draws, minimum=1)
        room = (1 << (self.codec.bits - 1)) - 1 - n * self.entry_magnitude
        if room <= 0:
            return 0.0
        exponent = -(float(room) ** 2) / (2.0 * m * float(self.variance))
        return min(0.0, math.log(2.0 * self.dimension) + exponent)


@dataclass(frozen=True)
class PartyNoise:
    """The distributed discrete Gaussian mechanism's public parameters.

    Parameters
    ----------
    noise_multiplier : float
        ``z``: the noise of every unmaskable sum has standard deviation at least ``z Delta``.
    clip : float
        ``C``, the L2 bound of each party's update (real units).
    mode : str
        How the target survives dropouts, a name of
        :data:`~fedprivacy.dp.noise_modes.NOISE_MODES`: ``over-provisioned`` or ``exact``.
    """

    noise_multiplier: float
    clip: float
    mode: str = DEFAULT_NOISE_MODE

    def __post_init__(self) -> None:
        require_positive_float("noise_multiplier", self.noise_multiplier)
        require_positive_float("clip", self.clip)
        NOISE_MODES.lookup(self.mode)

    def std(self, parties: int) -> float:
        """``z C / sqrt(parties)``: each party's continuous Gaussian where no grid carries it.

        Where the parties add their noise in the clear rather than inside secure aggregation
        (the silos of an in-process ULDP-FL round), ``parties`` such draws sum to ``z C``.

        Examples
        --------
        >>> PartyNoise(noise_multiplier=2.0, clip=0.5).std(4)
        0.5
        """
        return (
            self.noise_multiplier
            * self.clip
            / math.sqrt(require_int("parties", parties, minimum=1))
        )

    def codec(self, entry_bound: float, per_round: int, bits: int) -> FixedPointCodec:
        """The codec of a round of at most ``per_round`` parties, with room for their noise.

        Parameters
        ----------
        entry_bound : float
            Bound on each entry of an update before noise.
        per_round : int
            ``K``, the most parties in one sum.
        bits : int
            The modulus is ``2**bits``.
        """
        k = require_int("per_round", per_round, minimum=1)
        # the most noise: K parties over-provisioned for the smallest threshold, Delta inflated
        # by at most _COARSEST (checked in round_noise)
        inflation = 1.0 + 2 * _COARSEST
        worst = self.noise_multiplier * self.clip * inflation * math.sqrt(k / MIN_PARTIES)
        return FixedPointCodec.for_sum(entry_bound + HEADROOM_SIGMAS * worst / k, k, bits)

    def round_noise(
        self,
        codec: FixedPointCodec,
        entry_bound: float,
        threshold: int,
        dimension: int,
        parties: int | None = None,
    ) -> RoundNoise:
        """What each party adds in a round of ``parties`` whose protocol threshold is ``threshold``.

        Parameters
        ----------
        codec : FixedPointCodec
            The round's encoding (from :meth:`codec`).
        entry_bound : float
            Bound on each entry of an update before noise (as given to :meth:`codec`).
        threshold : int
            The fewest inputs the protocol unmasks.
        dimension : int
            ``d``, the number of noised coordinates.
        parties : int, optional
            ``n``, the parties selected (the exact mode's ``n``; default ``threshold``).

        Raises
        ------
        ParameterError
            If the grid is too coarse for ``dimension`` (rounding would add more than 1 % of the
            clip to the sensitivity), the threshold is below two or above ``parties``.
        """
        t = require_int("threshold", threshold, minimum=MIN_PARTIES)
        d = require_int("dimension", dimension, minimum=1)
        rounding = math.sqrt(d)
        if rounding > _COARSEST * self.clip * codec.scale:
            raise ParameterError(
                "bits",
                f"the grid (scale {codec.scale:g}) is too coarse for {d} coordinates and clip "
                f"{self.clip}: stochastic rounding would add more than 1 % to the sensitivity; "
                "use more bits",
            )
        sensitivity = (self.clip * codec.scale + rounding) * _MARGIN
        n = t if parties is None else require_int("parties", parties, minimum=t)
        target = (Fraction(self.noise_multiplier) * Fraction(sensitivity)) ** 2
        draw = NOISE_MODES.lookup(self.mode)(target, threshold=t, parties=n)
        magnitude = min(codec.max_magnitude, math.ceil(entry_bound * codec.scale))
        return RoundNoise(draw, sensitivity, t, d, codec, magnitude)


def draw_party_noise(variance: Fraction, dimension: int) -> NDArray[np.int64] | list[int]:
    """``dimension`` independent ``N_Z(0, variance)`` integers from the OS's randomness.

    Vectorised (:func:`~fedprivacy.dp.discrete_gaussian_array.discrete_gaussian_array`) for
    integer variances up to ``2^60`` (every codec of at most 32 bits), else the scalar sampler
    (Python integers of any size).
    """
    if variance.denominator == 1 and variance <= MAX_VARIANCE:
        return discrete_gaussian_array(variance, dimension)
    return discrete_gaussian_vector(variance, dimension)


def add_grid_noise(
    codec: FixedPointCodec,
    encoded: NDArray[np.unsignedinteger],
    noise: NDArray[np.int64] | list[int],
) -> NDArray[np.unsignedinteger]:
    """``encoded + noise`` modulo ``2**bits`` on the leading ``len(noise)`` entries.

    int64 noise is reduced through its two's complement, a list as Python integers (any size).

    Examples
    --------
    >>> c = FixedPointCodec(clip=1.0, scale=4.0, bits=8)
    >>> add_grid_noise(c, c.to_field(np.array([1, -1, 2])), [-3, 300]).tolist()
    [254, 43, 2]
    """
    mask = (1 << codec.bits) - 1
    out = encoded.astype(np.uint64, copy=True)
    k = len(noise)
    if k > out.shape[0]:
        raise ParameterError("noise", f"has {k} entries for a vector of {out.shape[0]}")
    if isinstance(noise, np.ndarray):
        out[:k] += noise.astype(np.int64, copy=False).view(np.uint64)
    else:
        out[:k] += np.array([v & mask for v in noise], dtype=np.uint64)
    out &= np.uint64(mask)
    return out.astype(codec.dtype, copy=False)


Components = list[NDArray[np.int64] | list[int]]


def draw_components(draw: NoiseDraw, dimension: int) -> Components:
    """``draw.components`` independent vectors of ``dimension`` ``N_Z(0, draw.variance)``."""
    return [draw_party_noise(draw.variance, dimension) for _ in range(draw.components)]


def add_components(
    codec: FixedPointCodec, encoded: NDArray[np.unsignedinteger], components: Components
) -> NDArray[np.unsignedinteger]:
    """``encoded`` plus every component, modulo ``2**bits`` (:func:`add_grid_noise`).

    Examples
    --------
    >>> c = FixedPointCodec(clip=1.0, scale=4.0, bits=8)
    >>> add_components(c, np.zeros(3, np.uint8), [[1, 2], [-2, 300]]).tolist()
    [255, 46, 0]
    """
    out = encoded
    for component in components:
        out = add_grid_noise(codec, out, component)
    return out
