"""The whole audit of a participation log under one time budget.

Exposed users and ``T_strong`` are always exact (:mod:`fedprivacy.participation.exposure`).
``T_weak`` gets what is left of the budget: the exact search of
:func:`fedprivacy.participation.privacy.t_weak` when the log is small enough for its dense
reductions, otherwise a certified interval from facts that cost nothing more:

* ``T_weak = 1`` exactly when some user is exposed, and ``T_weak >= 2`` otherwise; the upper
  bound 1 is reported only with a witness ``z`` (searched on at most 200 rounds around the first
  exposed user, checked exactly), else the interval is ``[1, lightest round]``;
* every round is a row-space vector, so the lightest nonempty round is an upper bound (witness
  ``z = e_r``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from fedprivacy.errors import ParameterError
from fedprivacy.participation.exposure import ExposureReport, analyse_exposure, exposure_witness
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.privacy import TWeakResult, t_weak

__all__ = ["AuditResult", "audit_ledger"]

_DENSE_TWEAK_CELLS = 200_000  # rounds x users above which the dense T_weak search is skipped


@dataclass(frozen=True)
class AuditResult:
    """Exact exposure, ``T_strong`` and a certified ``T_weak`` of one log.

    Attributes
    ----------
    exposure : ExposureReport
    t_weak : TWeakResult
        ``rank`` is 0 when the fast path was taken (the rank was not computed).
    fast_t_weak : bool
        Whether ``T_weak`` came from the fast bounds only (the log was too large for the search).
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


def _fast_t_weak(
    mat: sparse.csr_array, exposure: ExposureReport, started: float, time_limit: float
) -> TWeakResult:
    sizes = np.diff(mat.indptr)
    if not sizes.any():
        return TWeakResult(None, None, seconds=time.perf_counter() - started)
    within = time.perf_counter() - started < time_limit
    for user in exposure.exposed[: 1 if within else 0].tolist():
        z = exposure_witness(mat, user)
        if z is not None:
            support = _support(mat, z)
            if len(support) == 1:
                return TWeakResult(1, 1, tuple(z), support, seconds=time.perf_counter() - started)
    r = int(np.argmin(np.where(sizes > 0, sizes, np.iinfo(np.int64).max)))
    witness = tuple(int(i == r) for i in range(mat.shape[0]))
    support = tuple(int(u) for u in np.sort(mat.indices[mat.indptr[r] : mat.indptr[r + 1]]))
    lower = 1 if exposure.exposed.size else min(2, len(support))
    return TWeakResult(lower, len(support), witness, support, seconds=time.perf_counter() - started)


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
    mat = _sparse(ledger)
    exposure = analyse_exposure(mat, time_limit=time_limit)
    remaining = time_limit - (time.perf_counter() - started)
    fast = ledger.rounds * ledger.num_users > _DENSE_TWEAK_CELLS or remaining <= 0.05
    if fast:
        result = _fast_t_weak(mat, exposure, started, time_limit)
    else:
        result = t_weak(mat.toarray().astype(np.uint8), time_limit=remaining)
    return AuditResult(exposure, result, fast, time.perf_counter() - started)
