"""Exact linear algebra for 0/1 participation matrices: over the rationals, and modulo a prime.

Floating-point rank decisions on participation matrices are fragile: a server-side privacy metric
must not report a user as safe because a pivot fell below a tolerance. These helpers compute ranks,
row bases and null vectors exactly with FLINT (``python-flint``), on integer matrices;
:func:`mulmod`, :func:`inverse_mod`, :func:`dot3_mod` and :func:`cross3_mod` are vectorised
arithmetic modulo a prime below ``2**31`` on int64 arrays (the minimum-distance search's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flint
import numpy as np
from numpy.typing import NDArray

IntMatrix = NDArray[Any]


def _fmpz(matrix: IntMatrix) -> flint.fmpz_mat:
    arr = np.asarray(matrix, dtype=np.int64)
    if arr.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got {arr.ndim} dimension(s)")
    return flint.fmpz_mat(int(arr.shape[0]), int(arr.shape[1]), arr.ravel().tolist())


def exact_rank(matrix: IntMatrix) -> int:
    """Rank of an integer matrix over the rationals, computed exactly.

    Parameters
    ----------
    matrix : ndarray of int or bool, shape (m, n)
        The matrix.

    Returns
    -------
    int
        Its rank (0 for an empty matrix).

    Examples
    --------
    >>> exact_rank(np.array([[1, 1, 0], [0, 1, 1], [1, 2, 1]]))
    2
    """
    arr = np.asarray(matrix)
    if arr.size == 0:
        return 0
    return int(_fmpz(arr).rank())


def pivot_rows(matrix: IntMatrix) -> list[int]:
    """Indices of the first rows that form a basis of the row space (greedy, in order).

    Row ``i`` is a pivot row exactly when it is not a linear combination of rows ``0 .. i-1``: for a
    participation matrix these are the rounds at which the server learned something new.

    Parameters
    ----------
    matrix : ndarray of int or bool, shape (m, n)

    Returns
    -------
    list of int
        Increasing row indices; their number is the rank.
    """
    arr = np.asarray(matrix)
    if arr.size == 0 or not np.any(arr):
        return []
    # Pivot columns of rref(M^T) are the greedy basis among the columns of M^T, i.e. rows of M.
    reduced, rank = flint.fmpq_mat(_fmpz(arr.T)).rref()
    pivots: list[int] = []
    col = 0
    ncols = int(arr.shape[0])
    for i in range(int(rank)):
        while col < ncols and reduced[i, col] == 0:
            col += 1
        pivots.append(col)
        col += 1
    return pivots


def left_null_vector(matrix: IntMatrix) -> list[int] | None:
    """A nonzero integer ``z`` with ``z @ matrix == 0``; ``None`` if the rows are independent.

    Parameters
    ----------
    matrix : ndarray of int or bool, shape (m, n)

    Returns
    -------
    list of int or None
        The vector (Python integers, coprime entries), of length ``m``.
    """
    arr = np.asarray(matrix)
    m = int(arr.shape[0])
    if m == 0:
        return None
    if arr.shape[1] == 0:
        return [1] + [0] * (m - 1)
    basis, nullity = _fmpz(arr.T).nullspace()
    if int(nullity) == 0:
        return None
    z = [int(basis[i, 0]) for i in range(m)]
    return _primitive(z)


def _primitive(z: Sequence[int]) -> list[int]:
    from math import gcd

    g = 0
    for v in z:
        g = gcd(g, abs(v))
    if g == 0:
        return list(z)
    return [v // g for v in z]


def integer_combination(z: Sequence[int], matrix: IntMatrix) -> list[int]:
    """Exact ``z @ matrix`` with Python integers (no overflow whatever the size of ``z``)."""
    arr = np.asarray(matrix, dtype=np.int64)
    zs = [int(v) for v in z]
    if len(zs) != arr.shape[0]:
        raise ValueError(f"z has length {len(zs)}, matrix has {arr.shape[0]} rows")
    out = [0] * int(arr.shape[1])
    for coeff, row in zip(zs, arr, strict=True):
        if coeff == 0:
            continue
        for j in np.flatnonzero(row):
            out[int(j)] += coeff * int(row[j])
    return out


def mulmod(a: NDArray[np.int64], b: NDArray[np.int64], p: int) -> NDArray[np.int64]:
    """``a b mod p`` elementwise (``p < 2**31``, so that the product fits in int64)."""
    return (a * b) % p


def inverse_mod(x: NDArray[np.int64], p: int) -> NDArray[np.int64]:
    """Elementwise inverse modulo the prime ``p`` (0 maps to 0), by Fermat's little theorem.

    Examples
    --------
    >>> inverse_mod(np.array([1, 2, 0, 6]), 7).tolist()
    [1, 4, 0, 6]
    """
    result = np.ones_like(x)
    base = x % p
    exponent = p - 2
    while exponent:
        if exponent & 1:
            result = mulmod(result, base, p)
        base = mulmod(base, base, p)
        exponent >>= 1
    return np.where(x % p == 0, 0, result)


def dot3_mod(a: NDArray[np.int64], b: NDArray[np.int64], p: int) -> NDArray[np.int64]:
    """Dot products modulo ``p`` over a last axis of length 3 (broadcasting)."""
    out = mulmod(a[..., 0], b[..., 0], p)
    for k in (1, 2):
        out = out + mulmod(a[..., k], b[..., k], p)
    return out % p


def cross3_mod(a: NDArray[np.int64], b: NDArray[np.int64], p: int) -> NDArray[np.int64]:
    """Cross products modulo ``p`` over the last axis (broadcasting)."""
    return np.stack(
        [
            (mulmod(a[..., 1], b[..., 2], p) - mulmod(a[..., 2], b[..., 1], p)) % p,
            (mulmod(a[..., 2], b[..., 0], p) - mulmod(a[..., 0], b[..., 2], p)) % p,
            (mulmod(a[..., 0], b[..., 1], p) - mulmod(a[..., 1], b[..., 0], p)) % p,
        ],
        axis=-1,
    )
