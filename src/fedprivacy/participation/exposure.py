"""Exposed users and ``T_strong`` of large sparse participation logs, from one elimination.

User ``k`` is *exposed* when the unit vector ``e_k`` lies in the row space of the participation
matrix ``P`` over the rationals (the server can compute ``x_k`` from the aggregates). In matroid
terms, ``k`` is a coloop of the column matroid of ``P``: every null vector ``x`` (``P x = 0``) has
``x_k = 0``. The old implementation (:func:`fedprivacy.participation.metrics.exposed_users`) runs
one exact rank per user; here one modular elimination per connected block decides every user, and
every answer is certified exactly:

1. never-aggregated users are dropped; users with identical columns form a class (hashing the
   columns also gives ``T_strong``); a class of two or more users is never exposed (every
   row-space vector takes equal values on it) and collapsing each class to one column keeps the
   answer for the others; duplicate and zero rows are dropped;
2. the matrix splits into connected blocks (users linked by co-participation); the row space is
   the direct sum of the blocks' row spaces;
3. a row with a single nonzero exhibits a coloop; deleting a coloop keeps the coloops of the
   rest, so such columns are peeled off repeatedly;
4. what remains of a block is eliminated over ``GF(p)`` (FLINT ``nmod_mat``, a 20-bit prime: the
   fastest for FLINT; the modulus never decides an answer alone):
   a random null vector ``y`` (checked: ``A y = 0 mod p``; from one square solve,
   :mod:`fedprivacy.participation.modular`, or from a null-space basis) with ``y_k != 0`` proves
   that ``k`` is not a coloop modulo ``p``; a nonsingular square preconditioned matrix proves
   full row (or column) rank modulo ``p``;
5. certificates over ``Q``: ``rank_Q >= rank_p`` always. If ``rank_p`` equals the number of
   columns, every column is a coloop over ``Q``. If it equals the number of rows,
   ``rank_Q = rank_p`` and a non-coloop modulo ``p`` is a non-coloop over ``Q``; otherwise the
   exact rank over ``Q`` is computed. Each remaining candidate is confirmed by an exact rational
   ``z`` with ``zᵀP = e_k``, found on a growing neighbourhood of rows and verified in integers.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field

import flint
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from fedprivacy._validation import require_binary_matrix
from fedprivacy.errors import FedPrivacyError
from fedprivacy.linalg import exact_rank
from fedprivacy.participation.modular import (
    BLAS_ROWS,
    full_column_rank,
    nmod_from,
    random_null_vectors,
)

__all__ = [
    "CertificationError",
    "ExposureReport",
    "analyse_exposure",
    "column_classes",
    "exposure_witness",
]

_PRIME = 1048573  # 20 bits: FLINT eliminates fastest; every answer is certified anyway
_EXACT_RANK_CELLS = 400_000
_LOCAL_ROWS = 600
_SOLVE_SECONDS = 1.2e-10  # FLINT square solve mod a 20-bit prime, 2 cores: per min(m, n)**3
_BLAS_SOLVE_SECONDS = 2.5e-11  # the float64 BLAS elimination (blas_solve.py), 2 cores
_NULLSPACE_SECONDS = 2.5e-10  # FLINT nullspace, per m * n * min(m, n)


class CertificationError(FedPrivacyError):
    """An exact certificate could not be produced within the size limits (never a wrong answer)."""


@dataclass(frozen=True)
class ExposureReport:
    """What the server can isolate in a participation log.

    Attributes
    ----------
    exposed : ndarray of intp
        Users whose individual update is a linear combination of the aggregates, increasing.
    t_strong : int or None
        Size of the smallest class of identical nonzero columns (``None``: nobody aggregated).
    classes : int
        Number of classes of identical nonzero columns.
    blocks : int
        Number of connected blocks after the reductions.
    largest_block : tuple of int
        Shape (rows, columns) of the largest block that needed a modular elimination.
    batch_candidates : ndarray of intp
        First users of the classes of two or more users whose sum may lie in the row space:
        every other class was proved not to (a random null vector nonzero on it, modulo p).
        A candidate still needs an exact witness
        (:func:`fedprivacy.participation.audit.audit_ledger` looks for one).
    """

    exposed: NDArray[np.intp]
    t_strong: int | None
    classes: int
    blocks: int
    largest_block: tuple[int, int]
    batch_candidates: NDArray[np.intp] = field(default_factory=lambda: np.empty(0, np.intp))


def _as_csc(participation: ArrayLike | sparse.sparray | sparse.spmatrix) -> sparse.csc_array:
    if sparse.issparse(participation):
        mat = sparse.csc_array(participation)
        mat.sum_duplicates()
        if mat.data.size and not np.all((mat.data == 0) | (mat.data == 1)):
            raise FedPrivacyError("participation: entries must be 0 or 1")
        mat.eliminate_zeros()
    else:
        mat = sparse.csc_array(require_binary_matrix("participation", participation))
    return sparse.csc_array((np.ones(mat.nnz, np.int8), mat.indices, mat.indptr), mat.shape)


def column_classes(mat: sparse.csc_array) -> list[list[int]]:
    """Classes of identical nonzero columns (users always aggregated together), by first user.

    Examples
    --------
    >>> column_classes(sparse.csc_array(np.array([[1, 1, 0, 1], [0, 0, 0, 1]])))
    [[0, 1], [3]]
    """
    groups: dict[bytes, list[int]] = {}
    ind, ptr = mat.indices, mat.indptr
    for j in range(mat.shape[1]):
        if ptr[j + 1] > ptr[j]:
            key = np.sort(ind[ptr[j] : ptr[j + 1]]).astype(np.int64).tobytes()
            groups.setdefault(key, []).append(j)
    return list(groups.values())


def _unique_rows(mat: sparse.csr_array) -> sparse.csr_array:
    seen: dict[bytes, int] = {}
    ind, ptr = mat.indices, mat.indptr
    for i in range(mat.shape[0]):
        if ptr[i + 1] > ptr[i]:
            seen.setdefault(np.sort(ind[ptr[i] : ptr[i + 1]]).astype(np.int64).tobytes(), i)
    keep = np.fromiter(seen.values(), dtype=np.intp, count=len(seen))
    return sparse.csr_array(mat[np.sort(keep)])


def _peel(block: sparse.csr_array) -> tuple[list[int], NDArray[np.intp]]:
    """Columns proved coloops by rows of weight one (repeatedly), and the columns left."""
    rows = [
        set(block.indices[block.indptr[i] : block.indptr[i + 1]].tolist())
        for i in range(block.shape[0])
    ]
    csc = sparse.csc_array(block)
    col_rows = [
        csc.indices[csc.indptr[j] : csc.indptr[j + 1]].tolist() for j in range(block.shape[1])
    ]
    alive = np.ones(block.shape[1], dtype=bool)
    queue = [i for i, r in enumerate(rows) if len(r) == 1]
    coloops: list[int] = []
    while queue:
        i = queue.pop()
        if len(rows[i]) != 1:
            continue
        (k,) = rows[i]
        coloops.append(k)
        alive[k] = False
        for r in col_rows[k]:
            rows[r].discard(k)
            if len(rows[r]) == 1:
                queue.append(r)
    return coloops, np.flatnonzero(alive)


def _check_budget(estimate: float, shape: tuple[int, int], deadline: float) -> None:
    if time.perf_counter() + estimate > deadline:
        raise CertificationError(
            f"the exact exposure analysis needs a dense elimination of a block of {shape[0]} "
            f"rounds x {shape[1]} distinct users (about {estimate:.0f} s on 2 cores), beyond "
            "the time limit"
        )


def _modular_coloops(
    block: sparse.csr_array, rng: random.Random, deadline: float
) -> tuple[list[int], int]:
    """Columns that may be coloops (all others are proved non-coloops mod p), and rank mod p."""
    m, n = block.shape
    gen = np.random.default_rng(rng.randrange(2**63))
    if m < n:  # one square solve instead of a nullspace (modular.py)
        x = random_null_vectors(block, _PRIME, 2, gen)
        if x is not None:
            return np.flatnonzero(~x.any(axis=1)).tolist(), m
    elif full_column_rank(block, _PRIME, gen):
        return list(range(n)), n
    _check_budget(_NULLSPACE_SECONDS * m * n * min(m, n), (m, n), deadline)
    basis, nullity = nmod_from(sparse.csr_array(block, dtype=np.int64), _PRIME).nullspace()
    nullity = int(nullity)
    if nullity == 0:
        return list(range(n)), n
    candidates = np.ones(n, dtype=bool)
    for _ in range(2):
        v = flint.nmod_mat(
            n, 1, [rng.randrange(1, _PRIME) if i < nullity else 0 for i in range(n)], _PRIME
        )
        y = basis * v
        for k in np.flatnonzero(candidates).tolist():
            if int(y[k, 0]) != 0:
                candidates[k] = False
    return np.flatnonzero(candidates).tolist(), n - nullity


def _solve_left(block: sparse.csr_array, rows: list[int], k: int) -> list[flint.fmpq] | None:
    """Rational ``z`` on ``rows`` with ``zᵀ block[rows] = e_k``, or None."""
    sub = block[rows]
    cols = np.unique(sub.indices)
    pos = {int(c): t for t, c in enumerate(cols.tolist())}
    if k not in pos:
        return None
    a = flint.fmpq_mat(len(cols), len(rows) + 1)
    coo = sub.tocoo()
    for i, j in zip(coo.row.tolist(), coo.col.tolist(), strict=True):
        a[pos[int(j)], i] = 1
    a[pos[k], len(rows)] = 1
    reduced, rank = a.rref()
    z = [flint.fmpq(0)] * len(rows)
    col = 0
    for i in range(int(rank)):
        while reduced[i, col] == 0:
            col += 1
        if col == len(rows):
            return None  # inconsistent: a pivot in the right-hand side
        z[col] = reduced[i, len(rows)]
        col += 1
    return z


def _certify_coloop(
    block: sparse.csr_array, k: int, max_rows: int = _LOCAL_ROWS
) -> list[tuple[int, flint.fmpq]] | None:
    """Exact ``z`` (row, coefficient) with ``zᵀ block = e_k``, on at most ``max_rows`` rows."""
    csc = sparse.csc_array(block)
    rows = list(dict.fromkeys(csc.indices[csc.indptr[k] : csc.indptr[k + 1]].tolist()))
    limit = min(max_rows, block.shape[0])
    while True:
        ordered = sorted(rows[:limit])
        z = _solve_left(block, ordered, k)
        if z is not None:
            return [(r, c) for r, c in zip(ordered, z, strict=True) if c != 0]
        if len(rows) >= limit:
            return None
        grown = dict.fromkeys(rows)
        for c in np.unique(block[ordered].indices).tolist():
            grown.update(dict.fromkeys(csc.indices[csc.indptr[c] : csc.indptr[c + 1]].tolist()))
        if len(grown) == len(rows):
            return None
        rows = list(grown)


def _verify(block: sparse.csr_array, z: list[tuple[int, flint.fmpq]], k: int) -> bool:
    acc: dict[int, flint.fmpq] = {}
    for r, c in z:
        for j in block.indices[block.indptr[r] : block.indptr[r + 1]].tolist():
            acc[j] = acc.get(j, flint.fmpq(0)) + c
    return all((v == 1) if j == k else (v == 0) for j, v in acc.items()) and acc.get(k) == 1


@dataclass
class _BlockColoops:
    """What one block's analysis found.

    The exact coloops among the wanted columns, the columns that may be coloops (all others
    proved not to be, modulo p) and the shape eliminated.
    """

    exact: list[int]
    possible: list[int]
    shape: tuple[int, int] = (0, 0)


def _block_coloops(
    block: sparse.csr_array, wanted: NDArray[np.bool_], rng: random.Random, deadline: float
) -> _BlockColoops:
    """Exact coloops of ``block`` among the columns flagged in ``wanted``."""
    peeled, rest = _peel(block)
    found = _BlockColoops([k for k in peeled if wanted[k]], list(peeled))
    if rest.size == 0:
        return found
    sub = sparse.csr_array(block[:, rest])
    sub = _unique_rows(sub)
    found.shape = (int(sub.shape[0]), int(sub.shape[1]))
    if sub.shape[0] == 0:
        return found
    small = min(found.shape)
    blas = found.shape[0] < found.shape[1] and small >= BLAS_ROWS  # the square solve's path
    per_cube = _BLAS_SOLVE_SECONDS if blas else _SOLVE_SECONDS
    _check_budget(per_cube * small**3, found.shape, deadline)
    candidates, rank_p = _modular_coloops(sub, rng, deadline)
    found.possible += [int(rest[c]) for c in candidates]
    wanted_here = [c for c in candidates if wanted[rest[c]]]
    found.exact += _certified(sub, rest, wanted_here, rank_p, deadline)
    return found


def _certified(
    sub: sparse.csr_array,
    rest: NDArray[np.intp],
    candidates: list[int],
    rank_p: int,
    deadline: float,
) -> list[int]:
    """The candidates (columns of ``sub``, modular coloops) that are coloops over Q."""
    shape = (int(sub.shape[0]), int(sub.shape[1]))
    out: list[int] = []
    if rank_p == sub.shape[1]:
        return [int(rest[c]) for c in candidates]
    if rank_p < sub.shape[0]:
        if sub.shape[0] * sub.shape[1] > _EXACT_RANK_CELLS:
            raise CertificationError(
                f"a block of {shape[0]} rounds x {shape[1]} users has dependent rounds modulo p; "
                "its exact rank is beyond the size limit"
            )
        if exact_rank(sub.toarray()) != rank_p:  # pragma: no cover - needs an unlucky prime
            raise CertificationError("the modular rank differs from the rational rank")
    for c in candidates:
        if time.perf_counter() > deadline:
            raise CertificationError(
                f"certifying the exposed users of a {shape} block exceeded the time limit"
            )
        z = _certify_coloop(sub, c)
        if z is None or not _verify(sub, z, c):
            # rank_Q(sub) == rank_p is proved; a coloop modulo p without a rational z is only
            # possible if the prime is unlucky; an exact rank settles it.
            if sub.shape[0] * sub.shape[1] > _EXACT_RANK_CELLS:
                raise CertificationError(f"no exact certificate for a column of a {shape} block")
            without = np.delete(sub.toarray(), c, axis=1)
            if exact_rank(without) == rank_p:
                continue
        out.append(int(rest[c]))
    return out


def analyse_exposure(
    participation: ArrayLike | sparse.sparray | sparse.spmatrix,
    *,
    seed: int = 0,
    time_limit: float | None = None,
) -> ExposureReport:
    """Exposed users, ``T_strong`` and the participation classes in one pass (exact).

    Parameters
    ----------
    participation : array_like of 0/1 or scipy sparse matrix, shape (rounds, users)
        The participation matrix ``P``.
    seed : int
        Seed of the random vectors of the modular test (the answer never depends on it).
    time_limit : float, optional
        Seconds allowed; a block whose elimination is estimated to exceed them is refused with
        :class:`CertificationError` before it starts (never a hang, never a guess).

    Returns
    -------
    ExposureReport

    Raises
    ------
    CertificationError
        If a block is too large for an exact certificate or for the time limit (never a wrong
        answer).

    Examples
    --------
    >>> r = analyse_exposure([[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    >>> r.exposed.tolist(), r.t_strong
    ([0, 1, 2], 1)
    >>> analyse_exposure([[1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]]).exposed.tolist()
    [2, 3]
    """
    rng = random.Random(seed)
    deadline = math.inf if time_limit is None else time.perf_counter() + time_limit
    mat = _as_csc(participation)
    classes = column_classes(mat)
    if not classes:
        return ExposureReport(np.empty(0, np.intp), None, 0, 0, (0, 0))
    reps = np.asarray([c[0] for c in classes], dtype=np.intp)
    single = np.asarray([len(c) == 1 for c in classes], dtype=bool)
    collapsed = _unique_rows(sparse.csr_array(mat[:, reps]))
    m, n = collapsed.shape
    graph = sparse.bmat([[None, collapsed], [collapsed.T, None]], format="csr")
    count, labels = connected_components(graph, directed=False)
    col_labels = labels[m:]
    row_labels = labels[:m]
    exposed: list[int] = []
    possible: list[int] = []  # columns of ``collapsed`` that may be coloops
    largest = (0, 0)
    for b in np.unique(col_labels).tolist():
        cols = np.flatnonzero(col_labels == b)
        if not single[cols].any():
            possible.extend(cols.tolist())  # not analysed: nothing ruled out
            continue
        rows = np.flatnonzero(row_labels == b)
        block = sparse.csr_array(collapsed[rows][:, cols])
        found = _block_coloops(block, single[cols], rng, deadline)
        largest = max(largest, found.shape, key=lambda s: s[0] * s[1])
        exposed.extend(int(reps[cols[k]]) for k in found.exact)
        possible.extend(int(cols[k]) for k in found.possible)
    batches = [int(reps[c]) for c in possible if not single[c]]
    return ExposureReport(
        np.sort(np.asarray(exposed, dtype=np.intp)),
        min(len(c) for c in classes),
        len(classes),
        int(np.unique(col_labels).size),
        largest,
        np.sort(np.asarray(batches, dtype=np.intp)),
    )


def exposure_witness(
    participation: ArrayLike | sparse.sparray | sparse.spmatrix, user: int, max_rows: int = 200
) -> list[int] | None:
    """Integer ``z`` (one entry per round) with ``zᵀP`` a nonzero multiple of ``e_user``, or None.

    Searched on growing neighbourhoods of the rounds of ``user``, at most ``max_rows`` rounds
    (exact rationals, scaled to integers); ``None`` when none is found there.

    Examples
    --------
    >>> exposure_witness([[1, 1, 0], [0, 1, 0], [1, 0, 1]], 0)
    [1, -1, 0]
    """
    csr = sparse.csr_array(_as_csc(participation))
    z = _certify_coloop(csr, int(user), max_rows)
    if z is None:
        return None
    from math import lcm

    den = 1
    for _, c in z:
        den = lcm(den, int(c.q))
    out = [0] * csr.shape[0]
    for r, c in z:
        out[r] = int(c.p) * (den // int(c.q))
    return out
