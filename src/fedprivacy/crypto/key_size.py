"""Paillier modulus sizes: the default, the floor, and the policy for keys below them.

A 3072-bit modulus gives about 128-bit security (NIST SP 800-57), 2048 bits about 112. Smaller
moduli can be factored and are accepted only behind an option whose name says so, for tests and
quick benchmarks.
"""

from __future__ import annotations

import warnings

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError, WeakKeyWarning

__all__ = ["DEFAULT_KEY_BITS", "MIN_KEY_BITS", "SECURE_MIN_KEY_BITS", "check_key_bits"]

DEFAULT_KEY_BITS = 3072
"""Default modulus size: 3072 bits, about 128-bit security (NIST SP 800-57)."""

MIN_KEY_BITS = 512
"""Smallest modulus accepted at all (for tests only: 512-bit moduli are factorable)."""

SECURE_MIN_KEY_BITS = 2048
"""Smallest modulus accepted without ``insecure_small_key=True`` (2048 bits warns, NIST
SP 800-57 gives it about 112-bit security; :data:`DEFAULT_KEY_BITS` gives about 128)."""


def check_key_bits(
    bits: int,
    insecure_small_key: bool = False,
    *,
    name: str = "bits",
    option: str = "insecure_small_key=True",
) -> int:
    """Validate a Paillier modulus size.

    Parameters
    ----------
    bits : int
        Bit length of ``n``: even and at least :data:`MIN_KEY_BITS`.
    insecure_small_key : bool
        Allow ``bits < 2048`` (factorable moduli: tests and quick benchmarks only).
    name : str
        Parameter name for the messages.
    option : str
        How the caller spells ``insecure_small_key``, for the message.

    Returns
    -------
    int
        ``bits``.

    Raises
    ------
    ParameterError
        If ``bits`` is odd, below :data:`MIN_KEY_BITS`, or below :data:`SECURE_MIN_KEY_BITS`
        without ``insecure_small_key``.

    Warns
    -----
    WeakKeyWarning
        For ``2048 <= bits < 3072``.

    Examples
    --------
    >>> check_key_bits(3072)
    3072
    >>> check_key_bits(1024, insecure_small_key=True)
    1024
    """
    if not isinstance(insecure_small_key, bool):
        raise ParameterError("insecure_small_key", "must be a bool")
    b = require_int(name, bits)
    if b < MIN_KEY_BITS:
        raise ParameterError(
            name,
            f"a Paillier modulus needs at least {MIN_KEY_BITS} bits (got {b}); use "
            f"{DEFAULT_KEY_BITS} for about 128-bit security, smaller only in tests",
        )
    if b % 2:
        raise ParameterError(name, f"must be even (two primes of bits / 2), got {b}")
    if b < SECURE_MIN_KEY_BITS and not insecure_small_key:
        raise ParameterError(
            name,
            f"{b}-bit Paillier moduli can be factored: use {DEFAULT_KEY_BITS} (or at least "
            f"{SECURE_MIN_KEY_BITS}); smaller keys only with {option}, for tests",
        )
    if SECURE_MIN_KEY_BITS <= b < DEFAULT_KEY_BITS:
        warnings.warn(
            f"{b}-bit Paillier keys give about 112-bit security; {DEFAULT_KEY_BITS} bits are "
            "recommended (about 128-bit)",
            WeakKeyWarning,
            stacklevel=3,
        )
    return b
