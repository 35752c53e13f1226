"""The whole audit of a participation log under one time budget.

Exposed users and ``T_strong`` are always exact (:mod:`fedprivacy.participation.exposure`).
``T_weak`` gets what is left of the budget. Everything works on the *quotient* of the log: users
who always participated together form one class (a column of the quotient, weighted by the
class's size), because every vector of the row space is constant on a class. Then:

* ``T_weak >= T_strong`` always (a row-space vector's support is a union of whole classes), and
  ``T_weak >= 2`` unless somebody is exposed;
* ``T_weak = 1`` exactly when some user is exposed (the exposure analysis certifies ``e_k`` in the
  row space; an explicit ``z`` is searched for the witness, on at most :data:`WITNESS_ROWS`
  rounds);
* a class whose indicator lies in the row space (the server can compute the sum of a batch)
  gives ``T_weak <=`` its size, with an exact witness ``z``; with equal batches and one batch so
  exposed, the interval closes at the batch size;
* a block of the quotient (its connected rounds and classes) with full column rank isolates
  every class in it (the row space then holds each class's indicator), so ``T_weak <=`` its
  smallest class: a certificate (its rank modulo a prime is its number of classes; a rank
  modulo a prime never exceeds the rank) rather than a witness ``z``; when the whole quotient
  has full column rank, ``T_weak`` is exactly the smallest class, ``T_strong``;
* every round is a row-space vector, so the lightest nonempty round is an upper bound;
* the exact search of :func:`fedprivacy.participation.privacy.t_weak` runs when these bounds
  leave an interval and the quotient (rounds x classes) is small enough for the budget:
  :data:`SEARCH_CELLS` cells for every :data:`SEARCH_SECONDS` seconds of ``time_limit`` left,
  so a larger ``--time-limit`` searches larger logs.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from fedprivacy.errors import ParameterError
from fedprivacy.participation.exposure import (
    ExposureReport,
    analyse_exposure,
    column_classes,
    exposure_witness,
)
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.modular import nmod_from
from fedprivacy.participation.privacy import TWeakResult, t_weak

__all__ = ["SEARCH_CELLS", "SEARCH_SECONDS", "WITNESS_ROWS", "AuditResult", "audit_ledger"]

#: Quotient cells (rounds x classes) the exact ``T_weak`` search takes on per
#: :data:`SEARCH_SECONDS` seconds of budget left.
SEARCH_CELLS = 200_000
SEARCH_SECONDS = 30.0
#: Largest dense 0/1 matrix (rounds x users, bytes) the exact search starts from.
_DENSE_CELLS = 50_000_000
#: Rounds a witness solve may use (exact rationals; about 0.6 s at 800 rounds).
WITNESS_ROWS = 1_000
#: Classes of the smallest multi-user size tried for a batch witness.
_CLASS_TRIES = 4
#: Seconds per ``rounds x classes^2`` of a rank test modulo a prime (0.43 s for 1,600 x 1,500).
_RANK_SECONDS = 1.3e-10
#: The prime of the rank test (20 bits: FLINT eliminates fastest; a proof whatever the prime).
_PRIME = 1048573


@dataclass(frozen=True)
class AuditResult:
    """Exact exposure, ``T_strong`` and a certified ``T_weak`` of one log.

    Attributes
    ----------
    exposure : ExposureReport
    t_weak : TWeakResult
        ``rank`` is 0 when the fast path was taken (the rank was not computed). ``witness`` is
        empty when the upper bound rests on a certificate alone: the exposure analysis's
        (``upper == 1``) or a full-column-rank block's (``support`` is then the class).
    fast_t_weak : bool
        Whether ``T_weak`` came from the bounds above only (they were already exact, or the
        quotient was too large for the exact search within the budget).
    seconds : float
    """

    exposure: ExposureReport
    t_weak: TWeakResult
    fast_t_weak: bool
    seconds: float


def _sparse(ledger: ParticipationLedger) -> sparse.csr_array:
    lengths = ledger.cardinalities
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    indices = (
        np.concatenate([ledger.selected(r) for r in range(ledger.rounds)])
        if ledger.rounds
        else np.empty(0, np.intp)
    )
    data = np.ones(indices.size, dtype=np.int8)
    return sparse.csr_array((data, indices, indptr), shape=(ledger.rounds, ledger.num_users))


@dataclass(frozen=True)
class _Bound:
    """An upper bound on ``T_weak`` with its witness: ``|supp(zᵀP)| == size``."""

    size: int
    z: tuple[int, ...]
    support: tuple[int, ...]


def _checked(mat: sparse.csr_array, z: list[int] | None) -> _Bound | None:
    """``z`` as a bound, its support computed exactly; ``None`` for no ``z`` or a zero vector."""
    if z is None:
        return None
    support = _support(mat, z)
    return _Bound(len(support), tuple(z), support) if support else None


def _lightest_round(mat: sparse.csr_array) -> _Bound:
    sizes = np.diff(mat.indptr)
    r = int(np.argmin(np.where(sizes > 0, sizes, np.iinfo(np.int64).max)))
    support = tuple(int(u) for u in np.sort(mat.indices[mat.indptr[r] : mat.indptr[r + 1]]))
    return _Bound(len(support), tuple(int(i == r) for i in range(mat.shape[0])), support)


def _class_bound(mat: sparse.csr_array, exposure: ExposureReport, deadline: float) -> _Bound | None:
    """A smallest multi-user class whose sum lies in the row space, with its witness.

    Only the exposure analysis's ``batch_candidates`` are tried (every other class was proved
    not to be in the row space, modulo p), smallest first, :data:`_CLASS_TRIES` of the smallest
    size; the witness is an exact integer ``z`` on the quotient.
    """
    if not exposure.batch_candidates.size:
        return None
    csc = sparse.csc_array(mat)
    members = column_classes(csc)
    candidates = set(exposure.batch_candidates.tolist())
    tried = [i for i, c in enumerate(members) if len(c) > 1 and c[0] in candidates]
    if not tried:
        return None
    sizes = {i: len(members[i]) for i in tried}
    smallest = min(sizes.values())
    quotient = csc[:, [c[0] for c in members]]
    rows = min(mat.shape[0], WITNESS_ROWS)
    for column in [i for i in tried if sizes[i] == smallest][:_CLASS_TRIES]:
        if time.perf_counter() > deadline:
            break
        bound = _checked(mat, exposure_witness(quotient, column, rows))
        if bound is not None:
            return bound
    return None


def _isolable_class(
    mat: sparse.csr_array, exposure: ExposureReport, deadline: float
) -> _Bound | None:
    """The smallest class of a full-column-rank block of the quotient (no witness ``z``).

    Blocks whose classes are all batch candidates (any other holds a class the row space
    cannot isolate, so it is not of full rank) are tried smallest class first, each only if its
    rank test fits before ``deadline`` (about ``rounds x classes^2`` operations).
    """
    candidates = set(exposure.batch_candidates.tolist())
    if not candidates:
        return None
    csc = sparse.csc_array(mat)
    members = column_classes(csc)
    quotient = sparse.csr_array(csc[:, [c[0] for c in members]], dtype=np.int64)
    m = quotient.shape[0]
    graph = sparse.bmat([[None, quotient], [quotient.T, None]], format="csr")
    _, labels = connected_components(graph, directed=False)
    blocks = [np.flatnonzero(labels[m:] == b) for b in np.unique(labels[m:])]
    blocks = [cols for cols in blocks if all(members[c][0] in candidates for c in cols)]
    for cols in sorted(blocks, key=lambda cols: min(len(members[c]) for c in cols)):
        rows = np.flatnonzero(labels[:m] == labels[m + cols[0]])
        n, r = float(cols.size), float(rows.size)
        if rows.size < cols.size:  # fewer rounds than classes: never full rank
            continue
        if time.perf_counter() + _RANK_SECONDS * r * n * n > deadline:
            continue
        block = sparse.csr_array(quotient[rows][:, cols])
        if nmod_from(block, _PRIME).rank() == cols.size:  # rank mod p <= rank: a proof
            smallest = min(cols.tolist(), key=lambda c: len(members[c]))
            return _Bound(len(members[smallest]), (), tuple(members[smallest]))
    return None


def _fast_t_weak(mat: sparse.csr_array, exposure: ExposureReport, deadline: float) -> TWeakResult:
    """``T_weak`` from the bounds of the module docstring (no search)."""
    if exposure.t_strong is None:
        return TWeakResult(None, None)
    if exposure.exposed.size:  # certified: e_k lies in the row space
        user = int(exposure.exposed[0])
        rows = min(mat.shape[0], WITNESS_ROWS)
        within = time.perf_counter() < deadline
        bound = _checked(mat, exposure_witness(mat, user, rows) if within else None)
        if bound is not None and bound.size == 1:
            return TWeakResult(1, 1, bound.z, bound.support)
        return TWeakResult(1, 1, (), (user,))
    found = [
        _lightest_round(mat),
        _class_bound(mat, exposure, deadline),
        _isolable_class(mat, exposure, deadline),
    ]
    best = min((b for b in found if b is not None), key=lambda b: b.size)
    lower = min(max(2, exposure.t_strong), best.size)
    return TWeakResult(lower, best.size, best.z, best.support)


def _with_t_strong(result: TWeakResult, exposure: ExposureReport) -> TWeakResult:
    """The search's interval raised to ``T_strong`` (never above its upper bound)."""
    if result.lower is None or result.upper is None or exposure.t_strong is None:
        return result
    lower = min(max(result.lower, exposure.t_strong), result.upper)
    return dataclasses.replace(result, lower=lower)


def _support(mat: sparse.csr_array, z: list[int]) -> tuple[int, ...]:
    """Users with a nonzero coefficient in ``zᵀP`` (exact integers, sparse)."""
    acc: dict[int, int] = {}
    for r, c in enumerate(z):
        if c:
            for u in mat.indices[mat.indptr[r] : mat.indptr[r + 1]].tolist():
                acc[u] = acc.get(u, 0) + c
    return tuple(sorted(u for u, v in acc.items() if v != 0))


def audit_ledger(ledger: ParticipationLedger, *, time_limit: float = 30.0) -> AuditResult:
    """Audit a ledger: exposed users, ``T_strong`` and ``T_weak`` within ``time_limit`` seconds.

    Exposed users and ``T_strong`` are exact and computed first; ``T_weak`` uses the rest of the
    budget and is returned as a certified interval when it runs out.

    Raises
    ------
    ParameterError
        If ``time_limit`` is not positive.
    CertificationError
        If the exact exposure analysis cannot fit in ``time_limit`` (said before it starts).

    Examples
    --------
    >>> ledger = ParticipationLedger.from_matrix([[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    >>> res = audit_ledger(ledger, time_limit=5)
    >>> res.exposure.exposed.tolist(), res.t_weak.upper, res.t_weak.exact
    ([0, 1, 2], 1, True)
    """
    if not (time_limit > 0):
        raise ParameterError("time_limit", f"must be positive, got {time_limit!r}")
    started = time.perf_counter()
    deadline = started + time_limit
    mat = _sparse(ledger)
    exposure = analyse_exposure(mat, time_limit=time_limit)
    result = _fast_t_weak(mat, exposure, deadline)
    remaining = deadline - time.perf_counter()
    cells = SEARCH_CELLS * max(1.0, remaining / SEARCH_SECONDS)
    fast = (
        result.exact
        or exposure.classes * ledger.rounds > cells
        or ledger.rounds * ledger.num_users > _DENSE_CELLS
        or remaining <= 0.05
    )
    if not fast:
        searched = t_weak(mat.toarray().astype(np.uint8), time_limit=remaining)
        result = _with_t_strong(searched, exposure)
    seconds = time.perf_counter() - started
    return AuditResult(exposure, dataclasses.replace(result, seconds=seconds), fast, seconds)
