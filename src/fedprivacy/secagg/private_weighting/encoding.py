"""Fixed-point ENCODE and DECODE (Algorithm 5 of ULDP-FL), with range checks.

``Encode(x, P, n)`` is ``round(x / P) mod n`` (the paper truncates; rounding to nearest halves
the error to ``P / 2``). ``Decode(v, P, C_LCM, n)`` maps ``v`` in ``Z_n`` to the signed integer in
``(-n/2, n/2]``, divides by ``C_LCM`` and multiplies by ``P``. The division of the two integers is
Python's correctly rounded ``int / int``, so no precision is lost before the final float.

Error bound (Theorem 4 made explicit): each encoded entry differs from its input by at most
``P / 2`` (plus float64 rounding of ``x / P``, below ``2**-53 |x|``), and the weights of a user sum
to one over the silos, so an aggregate entry differs from the real-valued ULDP-AVG-w aggregate
by at most ``(|U_t| + |S|) P / 2`` (``U_t`` the sampled users) plus float64 rounding.
"""

from __future__ import annotations

import numpy as np

from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.errors import AggregateOutOfRangeError

__all__ = ["decode", "encode", "signed"]


def encode(x: np.ndarray, precision: float, bound: float, limit: int, name: str) -> np.ndarray:
    """Quantise reals to signed integers ``round(x / P)``.

    Parameters
    ----------
    x : numpy.ndarray
        Real inputs.
    precision : float
        ``P``.
    bound : float
        Every ``|x|`` must be at most this.
    limit : int
        Every ``|round(x / P)|`` must be at most this (the parameters' ``E_max``/``Z_max``).
    name : str
        Parameter name for error messages.

    Returns
    -------
    numpy.ndarray
        ``int64`` array of the shape of ``x``.

    Raises
    ------
    ParameterError
        If an entry is not finite or exceeds the bounds.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(name, f"must be an array of real numbers ({exc})") from exc
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, "has NaN or infinite entries")
    if arr.size:
        largest = float(np.max(np.abs(arr)))
        if largest > bound:
            raise ParameterError(
                name,
                f"an entry has |x| = {largest!r} > {bound!r}, the session's bound; clip first "
                "(the bound keeps the encrypted aggregate below n/2)",
            )
    out = np.rint(arr / precision).astype(np.int64)
    if out.size and int(np.max(np.abs(out))) > limit:  # pragma: no cover - implied by bound
        raise ParameterError(name, "an encoded entry exceeds the session's bound")
    return out


def signed(value: int, n: int) -> int:
    """Map ``value`` in ``[0, n)`` to ``(-n/2, n/2]`` (values above ``n // 2`` are negative).

    Parameters
    ----------
    value : int
        A residue modulo ``n``.
    n : int
        The modulus.

    Returns
    -------
    int
        The signed representative.
    """
    return value - n if value > n // 2 else value


def decode(values: list[int], n: int, precision: float, c_lcm: int, bound: int) -> np.ndarray:
    """Decode decrypted aggregates into reals.

    Parameters
    ----------
    values : list of int
        Plaintexts in ``[0, n)``.
    n : int
        The Paillier modulus.
    precision : float
        ``P``.
    c_lcm : int
        ``C_LCM``.
    bound : int
        Largest ``|signed value|`` a correct aggregate can have.

    Returns
    -------
    numpy.ndarray
        ``float64`` vector ``signed(v) / C_LCM * P``.

    Raises
    ------
    AggregateOutOfRangeError
        If some ``|signed(v)| > bound``: a correctness condition was violated, the value is wrong.
    """
    out = np.empty(len(values), dtype=np.float64)
    for j, v in enumerate(values):
        s = signed(int(v), n)
        if abs(s) > bound:
            raise AggregateOutOfRangeError(
                f"decrypted entry {j} has {abs(s).bit_length()} bits, beyond the "
                f"{bound.bit_length()}-bit bound of every correct aggregate; a correctness "
                "condition was violated (a user with N_u > N_max records, or inputs beyond the "
                "session's bounds): no aggregate is output"
            )
        out[j] = (s / c_lcm) * precision
    return out
