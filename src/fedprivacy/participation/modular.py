"""Random null vectors of sparse 0/1 matrices modulo a prime, through a square preconditioner.

For a block ``A`` (m x n) with fewer rows than columns, a full nullspace costs ``m² n``; solving
one square system costs ``m³/3``. With a sparse random ``H`` (n x m), ``M = A H`` is nonsingular
modulo ``p`` exactly when ``A`` has full row rank there (for a good ``H``), and then

``x = u - H M⁻¹ A u``

is a uniformly random null vector of ``A`` (the map ``u -> x`` projects onto ``ker A`` along
``range H``). Every vector returned is checked: ``A x = 0 mod p`` in integers. A nonsingular
``M`` also proves ``rank_p(A) = m`` (``rank A >= rank A H``). With more rows than columns the
same test on ``Hᵀ A`` proves full column rank.

From :data:`BLAS_ROWS` rows on, ``M`` is solved by float64 BLAS blocks
(:mod:`fedprivacy.participation.blas_solve`, 77 s -> 18 s at 10,000 rows), which need
nonsingular leading blocks: there ``H = D Aᵀ`` with a random diagonal ``D``.
"""

from __future__ import annotations

import flint
import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from fedprivacy.participation.blas_solve import MAX_PRIME, solve_mod_p

__all__ = ["BLAS_ROWS", "full_column_rank", "random_null_vectors"]

_PER_COLUMN = 4
#: Square systems of at least this many rows are solved by the BLAS elimination.
BLAS_ROWS = 1500


def _random_sparse(rows: int, cols: int, p: int, rng: np.random.Generator) -> sparse.csc_array:
    r = rng.integers(0, rows, size=cols * _PER_COLUMN)
    c = np.repeat(np.arange(cols), _PER_COLUMN)
    v = rng.integers(1, p, size=cols * _PER_COLUMN, dtype=np.int64)
    out = sparse.csc_array((v, (r, c)), shape=(rows, cols))
    out.sum_duplicates()
    out.data %= p
    return out


def nmod_from(mat: sparse.sparray, p: int) -> flint.nmod_mat:
    coo = sparse.coo_array(mat)
    out = flint.nmod_mat(int(mat.shape[0]), int(mat.shape[1]), p)
    for i, j, v in zip(coo.row.tolist(), coo.col.tolist(), (coo.data % p).tolist(), strict=True):
        out[i, j] = v
    return out


def _to_numpy(mat: flint.nmod_mat) -> NDArray[np.int64]:
    return np.asarray(mat.entries(), dtype=np.int64).reshape(mat.nrows(), mat.ncols())


def _solve(square: sparse.csr_array, rhs: NDArray[np.int64], p: int) -> NDArray[np.int64] | None:
    """``y`` with ``square @ y = rhs (mod p)``, or None when ``square`` is singular mod ``p``.

    Large systems go to the float64 BLAS elimination (:mod:`.blas_solve`), falling back to
    FLINT's pivoting solve when a diagonal block is singular; small ones to FLINT directly.
    """
    if square.shape[0] >= BLAS_ROWS and p <= MAX_PRIME:
        y = solve_mod_p(square.toarray(), rhs, p)
        if y is not None:
            return y
    try:
        solved = nmod_from(square, p).solve(nmod_from(sparse.coo_array(rhs), p))
    except ZeroDivisionError:
        return None
    return _to_numpy(solved)


def _preconditioner(a: sparse.csr_array, p: int, rng: np.random.Generator) -> sparse.csc_array:
    """``H`` (n x m) with ``A H`` nonsingular mod ``p`` when ``A`` has full row rank (likely).

    Small blocks: a sparse random ``H`` (FLINT's solve pivots). Blocks for the BLAS elimination,
    which does not exchange rows between blocks: ``H = D Aᵀ`` with a random diagonal ``D``, so
    ``A D Aᵀ`` has every leading minor nonzero unless ``D`` is a root of a nonzero polynomial of
    degree at most ``m`` (Cauchy-Binet: ``det = sum_S det(A[:k, S])² prod_S d``).
    """
    m, n = a.shape
    if m < BLAS_ROWS or p > MAX_PRIME:
        return _random_sparse(n, m, p, rng)
    d = rng.integers(1, p, size=n, dtype=np.int64)
    return sparse.csc_array(sparse.diags_array(d, dtype=np.int64) @ sparse.csc_array(a.T))


def random_null_vectors(
    block: sparse.csr_array, p: int, count: int, rng: np.random.Generator
) -> NDArray[np.int64] | None:
    """``count`` random null vectors (columns, n x count) of ``block`` mod ``p``, or None.

    None when the preconditioned system is singular (the block may be rank deficient): the caller
    falls back to a full nullspace. Requires ``p < 2**24`` (products stay exact in int64).

    Examples
    --------
    >>> a = sparse.csr_array(np.array([[1, 1, 0, 1], [0, 1, 1, 0]]))
    >>> x = random_null_vectors(a, 1048573, 2, np.random.default_rng(0))
    >>> x is None or bool(np.all((a @ x) % 1048573 == 0))
    True
    """
    m, n = block.shape
    a = sparse.csr_array(block, dtype=np.int64)
    h = _preconditioner(a, p, rng)
    u = rng.integers(0, p, size=(n, count), dtype=np.int64)
    rhs = (a @ u) % p
    y = _solve(sparse.csr_array(a @ h), rhs, p)
    if y is None:
        return None
    x: NDArray[np.int64] = (u - (h @ (y % p)) % p) % p
    if np.any((a @ x) % p):  # pragma: no cover - guarded by the algebra
        return None
    return x


def full_column_rank(block: sparse.csr_array, p: int, rng: np.random.Generator) -> bool:
    """Whether ``Hᵀ A`` (n x n, ``H`` sparse random) is nonsingular mod ``p``: a proof of rank n.

    Examples
    --------
    >>> full_column_rank(sparse.csr_array(np.eye(3, dtype=np.int64)), 1048573,
    ...                  np.random.default_rng(0))
    True
    """
    m, n = block.shape
    h = _random_sparse(m, n, p, rng)
    square = nmod_from(sparse.csr_array(h.T) @ sparse.csr_array(block, dtype=np.int64), p)
    return int(square.det()) != 0
