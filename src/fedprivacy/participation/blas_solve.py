"""Dense linear systems modulo a small prime, eliminated in float64 blocks by BLAS.

FLINT's ``nmod_mat.solve`` takes about 77 s for a 10,000 x 10,000 system modulo a 20-bit prime
on the 2-core machine; the same elimination as float64 matrix products (OpenBLAS, both cores)
takes a fraction of that. Every product is exact: residues are below ``p <= 2**20``, so a product
of two is below ``2**40`` and a sum of :data:`BLOCK` of them below ``2**49``; the trailing matrix
takes :data:`LAZY` such updates before it is reduced modulo ``p``, staying below ``2**53`` (the
float64 mantissa), and every block is reduced before it enters a product.

Block Gaussian elimination without row exchanges between blocks: each diagonal block is inverted
modulo ``p`` (FLINT, small), the block row is normalised by it and the trailing matrix gets the
Schur complement. A singular diagonal block (a leading minor divisible by ``p``: rare for the
randomly preconditioned systems of :mod:`fedprivacy.participation.modular`) returns None, and
the caller falls back to FLINT's pivoting solve. A solve that returns proves the matrix
nonsingular modulo ``p``, as FLINT's does.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> m = rng.integers(0, 101, size=(5, 5)); b = rng.integers(0, 101, size=(5, 2))
>>> y = solve_mod_p(m, b, 101, block=2)
>>> y is None or bool(np.all((m @ y - b) % 101 == 0))
True
"""

from __future__ import annotations

import flint
import numpy as np
from numpy.typing import NDArray

__all__ = ["BLOCK", "LAZY", "MAX_PRIME", "solve_mod_p"]

#: Columns eliminated per block (exact sums need ``BLOCK * p**2 < 2**53``).
BLOCK = 512
#: Largest modulus the float64 products keep exact at :data:`BLOCK`.
MAX_PRIME = 1 << 20
#: Trailing updates between two reductions: ``LAZY * BLOCK * MAX_PRIME**2 <= 2**52``.
LAZY = 8


def _mod(x: NDArray[np.float64], p: float) -> NDArray[np.float64]:
    """``x mod p`` in ``[0, p)``, in place (exact for integers below ``2**53``)."""
    np.remainder(x, p, out=x)
    return x


def _inverse(block: NDArray[np.float64], p: int) -> NDArray[np.float64] | None:
    """The inverse of a square block modulo ``p`` (FLINT), or None when it is singular."""
    size = block.shape[0]
    mat = flint.nmod_mat(size, size, block.astype(np.int64).ravel().tolist(), p)
    try:
        inv = mat.inv()
    except ZeroDivisionError:
        return None
    return np.asarray([int(v) for v in inv.entries()], dtype=np.float64).reshape(size, size)


def _eliminate(work: NDArray[np.float64], n: int, p: int, block: int) -> bool:
    """Forward elimination in place: block row ``k`` becomes ``D_k^-1 [..]``; False if singular.

    The trailing matrix is reduced modulo ``p`` only every :data:`LAZY` updates (each adds less
    than ``block * p**2`` in magnitude); a block row and column are reduced before they are used.
    """
    pending = 0
    for k0 in range(0, n, block):
        k1 = min(k0 + block, n)
        _mod(work[k0:k1, k0:], p)
        _mod(work[k1:, k0:k1], p)
        inv = _inverse(work[k0:k1, k0:k1], p)
        if inv is None:
            return False
        work[k0:k1, k1:] = _mod(inv @ work[k0:k1, k1:], p)
        work[k0:k1, k0:k1] = np.eye(k1 - k0)
        if k1 < n:
            work[k1:, k1:] -= work[k1:, k0:k1] @ work[k0:k1, k1:]
            pending += 1
            if pending == LAZY:
                _mod(work[k1:, k1:], p)
                pending = 0
    return True


def _back_substitute(work: NDArray[np.float64], n: int, p: int, block: int) -> NDArray[np.int64]:
    """The solution of the eliminated (block unit upper triangular) system."""
    y = work[:, n:].copy()
    starts = list(range(0, n, block))
    for k0 in reversed(starts):
        k1 = min(k0 + block, n)
        if k1 < n:
            y[k0:k1] = _mod(y[k0:k1] - work[k0:k1, k1:n] @ y[k1:], p)
    return y.astype(np.int64)


def solve_mod_p(
    matrix: NDArray[np.integer] | NDArray[np.floating],
    rhs: NDArray[np.integer] | NDArray[np.floating],
    p: int,
    *,
    block: int = BLOCK,
) -> NDArray[np.int64] | None:
    """``y`` with ``matrix @ y = rhs (mod p)``, or None (a singular diagonal block).

    Parameters
    ----------
    matrix : ndarray, shape (n, n)
        Residues modulo ``p`` (any values; reduced first).
    rhs : ndarray, shape (n, k)
    p : int
        A prime below :data:`MAX_PRIME`.
    block : int
        Columns a block (at most :data:`BLOCK`).

    Raises
    ------
    ValueError
        If ``p`` or ``block`` would break the exactness of the float64 products.
    """
    if not (2 < p <= MAX_PRIME) or not (1 <= block <= BLOCK):
        raise ValueError(f"p must lie in (2, {MAX_PRIME}] and block in [1, {BLOCK}]")
    n = matrix.shape[0]
    work = np.empty((n, n + rhs.shape[1]), dtype=np.float64)
    work[:, :n] = np.asarray(matrix, dtype=np.float64) % p
    work[:, n:] = np.asarray(rhs, dtype=np.float64) % p
    if not _eliminate(work, n, p, block):
        return None
    return _back_substitute(work, n, p, block)
