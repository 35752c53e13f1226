"""Public parameters of a private weighting session and the correctness conditions on them.

Theorem 4 of ULDP-FL (Appendix D.4) needs two conditions for the decrypted aggregate to be exact:

1. ``N_u <= N_max`` for every user, where ``C_LCM = lcm(1, ..., N_max)``. The silos multiply
   ``C_LCM`` into every weight, so that ``C_LCM N_u^-1 mod n`` is the *integer* ``C_LCM / N_u``
   and the weights ``n_{s,u} / N_u`` become exact integers ``n_{s,u} C_LCM / N_u``. If ``N_u``
   does not divide ``C_LCM`` (e.g. ``N_u`` is a prime above ``N_max``), ``C_LCM N_u^-1 mod n``
   is a residue of the size of ``n`` and the decrypted value is garbage.
2. The worst-case encoded aggregate fits in ``(-n/2, n/2)``: with ``E = round(x / P)`` and
   ``|delta| <= clip``, ``|noise| <= noise_bound`` entrywise,
   ``|sum_s sum_u E n_{s,u} C_LCM / N_u + sum_s Z_s| <= C_LCM (|U| E_max + |S| Z_max)``,
   because the weights of one user sum to one over the silos and each silo's noise ``Z_s``
   (a discrete Gaussian in plaintext units, :mod:`.noise`) is cut at ``C_LCM Z_max`` with
   ``Z_max = ceil(noise_bound / P)``.

Why the authors' code fails past 2,000 records: it fixes ``N_max = 2000``, so any user with more
records (whose total has a prime-power factor above 2000) silently breaks condition 1. ``N_max``
cannot simply be raised: ``log C_LCM = psi(N_max) ~ N_max`` (Chebyshev's function), i.e. ``C_LCM``
grows like ``e^N_max`` (about ``1.44 N_max`` bits: 2,878 bits for ``N_max = 2000``), and
condition 2 then needs ``n`` larger than ``e^N_max``: with a 3072-bit modulus ``N_max`` can go up
to about 2,100 at most. ``N_max`` must be a public constant (choosing it from the data would leak
``max_u N_u``); :func:`largest_feasible_n_max` gives the largest value a key size allows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from fedprivacy._validation import require_int, require_positive_float
from fedprivacy.crypto.key_size import DEFAULT_KEY_BITS, check_key_bits
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.errors import PlaintextRangeError, RecordLimitError

__all__ = [
    "DEFAULT_N_MAX",
    "DEFAULT_PRECISION",
    "MAX_ENCODED_MAGNITUDE",
    "SESSION_ID_BYTES",
    "PrivateWeightingParameters",
    "encoded_bound",
    "largest_feasible_n_max",
    "lcm_upto",
    "silo_records",
]

DEFAULT_PRECISION = 1e-10
"""The paper's fixed-point precision ``P``."""

DEFAULT_N_MAX = 2000
"""The paper's (and the authors' code's) upper bound on the records of one user."""

MAX_ENCODED_MAGNITUDE = 2**52
"""Largest ``|x| / P`` accepted: float64 represents every integer up to ``2**53`` exactly."""

SESSION_ID_BYTES = 16


def lcm_upto(n_max: int) -> int:
    """Return ``C_LCM = lcm(1, 2, ..., n_max)``.

    Parameters
    ----------
    n_max : int
        ``>= 1``.

    Returns
    -------
    int
        The least common multiple.
    """
    n = require_int("n_max", n_max, 1)
    return math.lcm(*range(1, n + 1))


def encoded_bound(bound: float, precision: float, name: str) -> int:
    """Largest ``|round(x / P)|`` for ``|x| <= bound``, checked against float64 exactness.

    Parameters
    ----------
    bound : float
        Largest magnitude of the inputs.
    precision : float
        ``P``.
    name : str
        Parameter name for the error message.

    Returns
    -------
    int
        ``ceil(bound / P)`` (computed in float64, as the encoding is).

    Raises
    ------
    ParameterError
        If ``bound / P > 2**52``: the encoding would not be exact to ``P`` in float64.
    """
    ratio = bound / precision
    if not ratio <= MAX_ENCODED_MAGNITUDE:
        raise ParameterError(
            name,
            f"{bound!r} / precision {precision!r} = {ratio:.3g} exceeds 2**52: float64 inputs "
            "cannot be encoded to that precision; lower the bound or raise the precision",
        )
    return max(1, math.ceil(ratio))


def _fits(c_lcm: int, value_sum: int, modulus_lower_bound: int) -> bool:
    return 2 * c_lcm * value_sum < modulus_lower_bound


def largest_feasible_n_max(
    key_bits: int, n_users: int, n_silos: int, delta_max: int, noise_max: int
) -> int:
    """Largest ``N_max`` for which every key of ``key_bits`` bits satisfies condition 2.

    Parameters
    ----------
    key_bits : int
        Bit length of ``n`` (so ``n >= 2**(key_bits - 1)``).
    n_users, n_silos : int
        ``|U|`` and ``|S|``.
    delta_max, noise_max : int
        Largest encoded ``|delta|`` and ``|noise|`` entries.

    Returns
    -------
    int
        The largest feasible ``N_max`` (0 if not even ``N_max = 1`` fits).
    """
    bound = 1 << (key_bits - 1)
    value_sum = n_users * delta_max + n_silos * noise_max
    c, best = 1, 0
    for n in range(1, key_bits + 1):  # lcm(1..n) >= 2**(n-1), so n <= key_bits always
        c = math.lcm(c, n)
        if not _fits(c, value_sum, bound):
            break
        best = n
    return best


@dataclass(frozen=True)
class PrivateWeightingParameters:
    """Everything the server and the silos agree on before the protocol starts (all public).

    Attributes
    ----------
    session_id : bytes
        16 random bytes naming the session; every message and derived key is bound to it.
    n_silos : int
        ``|S|``; silo ``0`` generates the shared seed.
    n_users : int
        ``|U|``.
    n_params : int
        Length of the model delta.
    clip_bound : float
        Entrywise bound on the clipped per-user deltas (an L2 clip ``C`` implies it).
    noise_bound : float
        Entrywise bound on each silo's noise in real units: a silo's discrete Gaussian noise
        (in plaintext units of ``P / C_LCM``) stays within ``C_LCM ceil(noise_bound / P)``, so
        ``16 noise_std <= noise_bound`` is required (the tail cut of :mod:`.noise`).
    key_bits : int
        Paillier modulus size (default 3072; 2048 warns; smaller needs ``insecure_small_key``).
    precision : float
        Fixed-point precision ``P`` (default ``1e-10``).
    n_max : int
        ``N_max``, public upper bound on the records of one user (default 2000).
    subsampling : bool
        Whether the server may zero users' weights (user-level sub-sampling). Without it the
        encrypted weights are sent once and reused every round (silos learn nothing new: the
        weights do not change); with it they are re-encrypted every round, so the silos cannot
        tell which users are sampled.
    rerandomise : bool
        Whether silos multiply each output ciphertext by a fresh encryption of zero (see
        :mod:`fedprivacy.secagg.private_weighting.silo`; the paper does not).
    insecure_small_key : bool
        Allow ``key_bits < 2048`` (factorable keys: tests and quick benchmarks only).

    Raises
    ------
    ParameterError
        If a field is out of range (``key_bits < 2048`` without ``insecure_small_key``).
    PlaintextRangeError
        If condition 2 can fail for some ``key_bits``-bit modulus.
    """

    session_id: bytes
    n_silos: int
    n_users: int
    n_params: int
    clip_bound: float
    noise_bound: float
    key_bits: int = DEFAULT_KEY_BITS
    precision: float = DEFAULT_PRECISION
    n_max: int = DEFAULT_N_MAX
    subsampling: bool = False
    rerandomise: bool = True
    insecure_small_key: bool = False
    c_lcm: int = field(init=False, repr=False)
    delta_max: int = field(init=False, repr=False)
    noise_max: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.session_id, bytes) or len(self.session_id) != SESSION_ID_BYTES:
            raise ParameterError("session_id", f"must be {SESSION_ID_BYTES} bytes")
        require_int("n_silos", self.n_silos, 1, 2**31)
        require_int("n_users", self.n_users, 1, 2**31)
        require_int("n_params", self.n_params, 1, 2**31)
        bits = check_key_bits(self.key_bits, self.insecure_small_key, name="key_bits")
        precision = require_positive_float("precision", self.precision)
        clip = require_positive_float("clip_bound", self.clip_bound)
        noise = require_positive_float("noise_bound", self.noise_bound)
        n_max = require_int("n_max", self.n_max, 1)
        for name in ("subsampling", "rerandomise"):
            if not isinstance(getattr(self, name), bool):
                raise ParameterError(name, "must be a bool")
        object.__setattr__(self, "precision", precision)
        object.__setattr__(self, "clip_bound", clip)
        object.__setattr__(self, "noise_bound", noise)
        delta_max = encoded_bound(clip, precision, "clip_bound")
        noise_max = encoded_bound(noise, precision, "noise_bound")
        object.__setattr__(self, "delta_max", delta_max)
        object.__setattr__(self, "noise_max", noise_max)
        feasible = largest_feasible_n_max(bits, self.n_users, self.n_silos, delta_max, noise_max)
        if n_max > feasible:
            raise PlaintextRangeError(
                "n_max",
                f"N_max = {n_max} is too large for {bits}-bit keys with {self.n_users} users, "
                f"{self.n_silos} silos, clip_bound={clip!r}, noise_bound={noise!r}, "
                f"precision={precision!r}: the worst-case aggregate C_LCM (|U| E_max + |S| "
                f"Z_max) could reach n/2 and wrap. The largest feasible N_max is {feasible}; "
                "use larger keys, fewer users or looser precision.",
            )
        object.__setattr__(self, "c_lcm", lcm_upto(n_max))

    @property
    def offset_bits(self) -> int:
        """int: ``b`` with ``2^b > delta_max``; silos raise to ``E + 2^b >= 0``."""
        return self.delta_max.bit_length()

    @property
    def exponent_bits(self) -> int:
        """int: Bit length of the shifted exponents ``E + 2^b`` (``b + 1``)."""
        return self.offset_bits + 1

    def plaintext_bound(self) -> int:
        """Largest ``|aggregate|`` before decoding: ``C_LCM (|U| E_max + |S| Z_max)``.

        Returns
        -------
        int
            The bound every correct aggregate entry satisfies.
        """
        return self.c_lcm * (self.n_users * self.delta_max + self.n_silos * self.noise_max)

    def check_modulus(self, n: int) -> None:
        """Check condition 2 for the actual modulus.

        Parameters
        ----------
        n : int
            The Paillier modulus.

        Raises
        ------
        PlaintextRangeError
            If ``n`` is not a ``key_bits``-bit number or ``2 * plaintext_bound() >= n``.
        """
        if n.bit_length() != self.key_bits:
            raise PlaintextRangeError(
                "n", f"the modulus has {n.bit_length()} bits, the session uses {self.key_bits}"
            )
        if 2 * self.plaintext_bound() >= n:  # pragma: no cover - implied by __post_init__
            raise PlaintextRangeError("n", "the worst-case aggregate does not fit in n/2")


def silo_records(value: ArrayLike, n_users: int, n_max: int) -> list[int]:
    """Check one silo's record counts ``n_{s,u}`` (condition 1 as far as a silo can see it).

    Parameters
    ----------
    value : array_like of int
        ``n_{s,u}`` for every user.
    n_users : int
        ``|U|``.
    n_max : int
        ``N_max``.

    Returns
    -------
    list of int
        The counts.

    Raises
    ------
    ParameterError
        If the shape or the dtype is wrong or a count is negative.
    RecordLimitError
        If some ``n_{s,u} > N_max``.

    Examples
    --------
    >>> silo_records(np.array([1, 0, 3]), 3, 10)
    [1, 0, 3]
    """
    arr = np.asarray(value)
    if arr.shape != (n_users,):
        raise ParameterError("records", f"must have shape ({n_users},), got {arr.shape}")
    if arr.dtype.kind not in "iu":
        raise ParameterError("records", f"must hold integers, got dtype {arr.dtype}")
    if arr.size and int(arr.min()) < 0:
        raise ParameterError("records", "record counts must be >= 0")
    if arr.size and int(arr.max()) > n_max:
        u = int(np.argmax(arr))
        raise RecordLimitError(
            "records",
            f"user {u} has {int(arr[u])} records in this silo, more than N_max = {n_max}: "
            "C_LCM / N_u would not be an integer and the aggregate would be wrong",
        )
    return [int(v) for v in arr]
