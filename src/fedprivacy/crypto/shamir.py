"""Shamir secret sharing of byte strings over GF(2**31 - 1), limb by limb, vectorised with numpy.

A secret of ``L`` bytes is read as a big-endian integer and cut into ``ceil(8 L / 30)`` limbs of
30 bits (least significant limb first). Each limb is shared with its own independent random
polynomial of degree ``threshold - 1`` over GF(p), ``p = 2**31 - 1``, whose non-constant
coefficients are uniform on GF(p) (operating-system randomness, rejection sampling). This is
ordinary Shamir sharing applied to every limb, so any ``threshold - 1`` shares are independent of
the secret.
"""

from __future__ import annotations

import functools
import operator
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError, ShamirError

__all__ = [
    "LIMB_BITS",
    "PRIME",
    "Share",
    "combine_shares",
    "lagrange_at_zero",
    "limb_count",
    "split_secret",
]

PRIME = 2**31 - 1
"""The field modulus, a Mersenne prime."""

LIMB_BITS = 30
"""Bits of secret per field element."""

_LIMB_MASK = (1 << LIMB_BITS) - 1
_MAX_SECRET_BYTES = 2**16 - 1
_HEADER_BYTES = 8
_P64 = np.uint64(PRIME)


def limb_count(secret_length: int) -> int:
    """Return the number of 30-bit limbs of a secret of ``secret_length`` bytes.

    Parameters
    ----------
    secret_length : int
        Length of the secret in bytes (``>= 1``).

    Returns
    -------
    int
        ``ceil(8 * secret_length / 30)``.
    """
    n = require_int("secret_length", secret_length, 1)
    return -(-8 * n // LIMB_BITS)


@dataclass(frozen=True)
class Share:
    """One holder's share of a secret.

    Attributes
    ----------
    x : int
        The holder's evaluation point, ``1 <= x < PRIME``.
    values : tuple of int
        One field element (``< PRIME``) per 30-bit limb of the secret.
    secret_length : int
        Length of the shared secret in bytes (1 to 65535).

    Raises
    ------
    ShamirError
        On construction, if a field is out of range or the number of values does not match
        ``secret_length``.
    """

    x: int
    values: tuple[int, ...]
    secret_length: int

    def __post_init__(self) -> None:
        try:
            x = operator.index(self.x)
            secret_length = operator.index(self.secret_length)
            values = tuple(operator.index(v) for v in self.values)
        except TypeError as exc:
            raise ShamirError(f"share fields must be integers ({exc})") from exc
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "secret_length", secret_length)
        object.__setattr__(self, "values", values)
        if not 1 <= self.x < PRIME:
            raise ShamirError(f"share x must lie in [1, {PRIME}), got {self.x}")
        if not 1 <= self.secret_length <= _MAX_SECRET_BYTES:
            raise ShamirError(
                f"secret_length must lie in [1, {_MAX_SECRET_BYTES}], got {self.secret_length}"
            )
        expected = limb_count(self.secret_length)
        if len(self.values) != expected:
            raise ShamirError(
                f"a {self.secret_length}-byte secret has {expected} limbs, "
                f"but the share holds {len(self.values)} values"
            )
        for value in self.values:
            if not 0 <= value < PRIME:
                raise ShamirError(f"share value {value} is not an element of GF({PRIME})")

    def to_bytes(self) -> bytes:
        """Serialise the share.

        Returns
        -------
        bytes
            Big-endian ``x`` (4 bytes), ``secret_length`` (2 bytes), limb count (2 bytes),
            then each limb value (4 bytes).
        """
        header = (
            self.x.to_bytes(4, "big")
            + self.secret_length.to_bytes(2, "big")
            + len(self.values).to_bytes(2, "big")
        )
        return header + np.asarray(self.values, dtype=">u4").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Share:
        """Parse a share serialised by :meth:`to_bytes`.

        Parameters
        ----------
        data : bytes
            The serialised share.

        Returns
        -------
        Share
            The share.

        Raises
        ------
        ShamirError
            If the length is wrong, a value is not below ``PRIME``, ``x`` is out of range, or the
            limb count does not match ``secret_length``.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ShamirError(f"share must be bytes, got {type(data).__name__}")
        raw = bytes(data)
        if len(raw) < _HEADER_BYTES:
            raise ShamirError(f"share is {len(raw)} bytes, shorter than its 8-byte header")
        x = int.from_bytes(raw[0:4], "big")
        secret_length = int.from_bytes(raw[4:6], "big")
        count = int.from_bytes(raw[6:8], "big")
        if len(raw) != _HEADER_BYTES + 4 * count:
            raise ShamirError(
                f"share declares {count} limbs ({_HEADER_BYTES + 4 * count} bytes) "
                f"but is {len(raw)} bytes"
            )
        values = tuple(np.frombuffer(raw, dtype=">u4", offset=_HEADER_BYTES).tolist())
        return cls(x=x, values=values, secret_length=secret_length)


def _random_field_elements(count: int) -> np.ndarray:
    """Return ``count`` uniform elements of GF(PRIME) as uint64, from ``os.urandom``."""
    out = np.empty(count, dtype=np.uint64)
    filled = 0
    while filled < count:
        need = count - filled
        # Each 31-bit draw is rejected with probability 2**-31; ask for a little more.
        draws = np.frombuffer(os.urandom(4 * (need + 8)), dtype="<u4") & np.uint32(0x7FFFFFFF)
        good = draws[draws != PRIME][:need]
        out[filled : filled + good.size] = good
        filled += good.size
    return out


def _check_points(name: str, xs: Sequence[int]) -> tuple[int, ...]:
    points = tuple(require_int(f"{name}[{i}]", x, 1, PRIME - 1) for i, x in enumerate(xs))
    if len(set(points)) != len(points):
        raise ParameterError(name, "evaluation points must be distinct")
    return points


def split_secret(secret: bytes, holders: Sequence[int], threshold: int) -> dict[int, Share]:
    """Split ``secret`` into shares so that any ``threshold`` of them recover it.

    Parameters
    ----------
    secret : bytes
        The secret, 1 to 65535 bytes.
    holders : sequence of int
        Distinct evaluation points, one per holder, each in ``[1, PRIME)``.
    threshold : int
        Number of shares needed to reconstruct, ``1 <= threshold <= len(holders)``.

    Returns
    -------
    dict of int to Share
        The share of each holder, keyed by its evaluation point.

    Raises
    ------
    ParameterError
        If the secret is empty or too long, ``threshold`` is out of range, or the points are
        duplicated or out of range.
    """
    if not isinstance(secret, bytes | bytearray | memoryview):
        raise ParameterError("secret", f"must be bytes, got {type(secret).__name__}")
    data = bytes(secret)
    if not 1 <= len(data) <= _MAX_SECRET_BYTES:
        raise ParameterError(
            "secret", f"length must lie in [1, {_MAX_SECRET_BYTES}] bytes, got {len(data)}"
        )
    points = _check_points("holders", holders)
    t = require_int("threshold", threshold, 1)
    if t > len(points):
        raise ParameterError(
            "threshold", f"must be <= the number of holders ({len(points)}), got {t}"
        )
    n_limbs = limb_count(len(data))
    value = int.from_bytes(data, "big")
    limbs = np.array(
        [(value >> (LIMB_BITS * i)) & _LIMB_MASK for i in range(n_limbs)], dtype=np.uint64
    )
    # coefficients[k] multiplies x**(k + 1); every row is independent and uniform on GF(p).
    coefficients = _random_field_elements((t - 1) * n_limbs).reshape(t - 1, n_limbs)
    x = np.array(points, dtype=np.uint64)[:, None]
    acc = np.zeros((len(points), n_limbs), dtype=np.uint64)
    for k in range(t - 2, -1, -1):  # Horner: products of two values < 2**31 fit in uint64
        acc = (acc * x + coefficients[k]) % _P64
    acc = (acc * x + limbs) % _P64
    rows = acc.tolist()
    return {
        p: Share(x=p, values=tuple(row), secret_length=len(data))
        for p, row in zip(points, rows, strict=True)
    }


@functools.lru_cache(maxsize=256)
def lagrange_cached(points: tuple[int, ...], x: int = 0) -> np.ndarray:
    """The Lagrange basis polynomials through ``points``, evaluated at ``x``, modulo ``PRIME``."""
    coefficients = []
    for i, xi in enumerate(points):
        num = 1
        den = 1
        for j, xj in enumerate(points):
            if j != i:
                num = num * (x - xj) % PRIME
                den = den * (xi - xj) % PRIME
        coefficients.append(num * pow(den, -1, PRIME) % PRIME)
    out = np.array(coefficients, dtype=np.uint64)
    out.flags.writeable = False
    return out


def lagrange_at_zero(xs: Sequence[int]) -> np.ndarray:
    """Return the Lagrange coefficients that interpolate a polynomial at 0 from points ``xs``.

    Results are cached per tuple of points, since a server reconstructs many secrets from the
    same set of holders.

    Parameters
    ----------
    xs : sequence of int
        Distinct evaluation points in ``[1, PRIME)``.

    Returns
    -------
    numpy.ndarray
        Read-only ``uint64`` array of the coefficients modulo ``PRIME``, aligned with ``xs``.

    Raises
    ------
    ParameterError
        If ``xs`` is empty, or has duplicated or out-of-range points.
    """
    points = _check_points("xs", xs)
    if not points:
        raise ParameterError("xs", "needs at least one point")
    return lagrange_cached(points)


def combine_shares(shares: Sequence[Share], threshold: int) -> bytes:
    """Reconstruct a secret from at least ``threshold`` shares.

    All given shares are checked for consistency; exactly the first ``threshold`` are used.

    Parameters
    ----------
    shares : sequence of Share
        Shares of the same secret from distinct holders.
    threshold : int
        The threshold used when splitting (``>= 1``).

    Returns
    -------
    bytes
        The secret.

    Raises
    ------
    ParameterError
        If ``threshold`` is not a positive integer.
    ShamirError
        If there are fewer than ``threshold`` shares, two share the same ``x``, the shares
        disagree on the secret length, or the result does not fit in ``secret_length`` bytes
        (a sign of wrong or tampered shares, or of a threshold lower than the one used).
    """
    t = require_int("threshold", threshold, 1)
    items = list(shares)
    if len(items) < t:
        raise ShamirError(f"need at least {t} shares to reconstruct, got {len(items)}")
    for share in items:
        if not isinstance(share, Share):
            raise ShamirError(f"expected Share objects, got {type(share).__name__}")
    first = items[0]
    for share in items[1:]:
        if share.secret_length != first.secret_length or len(share.values) != len(first.values):
            raise ShamirError(
                "shares are inconsistent: secret lengths "
                f"{first.secret_length} and {share.secret_length} bytes"
            )
    xs = [share.x for share in items]
    if len(set(xs)) != len(xs):
        raise ShamirError("two shares have the same evaluation point x")
    used = items[:t]
    lam = lagrange_cached(tuple(xs[:t]))
    y = np.array([share.values for share in used], dtype=np.uint64)
    limbs = (((lam[:, None] * y) % _P64).sum(axis=0) % _P64).tolist()
    value = 0
    for i, limb in enumerate(limbs):
        if limb > _LIMB_MASK:
            raise ShamirError("reconstructed limb exceeds 30 bits: shares are wrong or too few")
        value |= limb << (LIMB_BITS * i)
    if value >= 1 << (8 * first.secret_length):
        raise ShamirError(
            f"reconstructed secret does not fit in {first.secret_length} bytes: "
            "shares are wrong or too few"
        )
    return value.to_bytes(first.secret_length, "big")
