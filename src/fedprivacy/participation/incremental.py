"""The server's view one round at a time: exposed users, ``T_strong`` and ``T_weak`` bounds.

:func:`fedprivacy.participation.audit.audit_ledger` audits a whole log; :class:`IncrementalAudit`
takes the rounds as they happen, so a run (or ``fedprivacy audit --follow``) can say after every
round what the server can already isolate. It keeps the row space of the participation matrix
``P`` in reduced row echelon form, on the *quotient* of ``P`` (one column per class of users who
always participated together, as in the batch audit):

* a round that takes part of a class splits it: the new class's column is a copy of the old one
  in every basis row (no earlier round told them apart), which keeps the echelon form;
* the round's quotient row (ones on the classes it contains) is reduced by the basis rows of its
  pivot classes and, when something is left, becomes a new basis row; the other rows are
  cleared in its pivot column. That costs about ``rank x classes`` operations a round, and
  ``8 x rank x classes`` bytes are kept;
* a class ``c``'s indicator lies in the row space exactly when a basis row is ``e_c``: for a
  class of one user, that user is *exposed*; for a larger class (a batch), ``T_weak <=`` its size.

The bounds are those of the batch audit's fast path (``T_weak >= max(2, T_strong)`` unless
someone is exposed, ``T_weak = 1`` when someone is, ``T_weak <=`` the lightest round and the
smallest class in the row space), except that every class is tried, not the smallest few, so the
interval is never wider. The arithmetic is modulo a random 31-bit prime drawn from the operating
system's randomness, so a log cannot be crafted against it; the answers differ from the exact
rational ones only if the prime divides one of the log's minors (the rank can only drop, and an
exposure can only be over-reported when the rank is right).
:func:`~fedprivacy.participation.audit.audit_ledger` certifies the same log over the rationals.

Examples
--------
>>> audit = IncrementalAudit(4, prime=1048573)
>>> audit.add_round([0, 1, 2]).t_weak
(3, 3)
>>> view = audit.add_round([1, 2])
>>> view.exposed, view.t_weak, view.rank
((0,), (1, 1), 2)
"""

from __future__ import annotations

import copy
import secrets
from dataclasses import dataclass

import gmpy2
import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.participation.ledger import ParticipationLedger

__all__ = ["IncrementalAudit", "AuditView", "random_prime"]

_PRIME_BITS = 31  # products of two residues stay below 2**62: exact in int64


def random_prime(bits: int = _PRIME_BITS) -> int:
    """A prime of ``bits`` bits drawn from the operating system's randomness.

    Examples
    --------
    >>> p = random_prime()
    >>> 2**30 < p < 2**31 and bool(gmpy2.is_prime(p))
    True
    """
    low = 1 << (bits - 1)
    while True:
        p = int(gmpy2.next_prime(low + secrets.randbelow(low)))
        if p < 2 * low:
            return p


def describe_view(lower: int | None, upper: int | None, t_strong: int | None, exposed: int) -> str:
    """The server's view in a few words (a progress line; also from an event's fields).

    Examples
    --------
    >>> describe_view(1, 1, 1, 3)
    'T_weak = 1, T_strong 1, 3 exposed'
    """
    if lower is None:
        return "nobody aggregated yet"
    t_weak = f"T_weak = {lower}" if lower == upper else f"T_weak in [{lower}, {upper}]"
    return f"{t_weak}, T_strong {t_strong}, {exposed} exposed"


@dataclass(frozen=True)
class AuditView:
    """What the server can derive after a number of rounds.

    Attributes
    ----------
    rounds : int
        Rounds seen, skipped ones included.
    rank : int
        Rank of the participation matrix (modulo the audit's prime).
    exposed : tuple of int
        Users whose individual update is a combination of the aggregates, increasing.
    t_strong : int or None
        Size of the smallest class of users always aggregated together (None: nobody yet).
    t_weak : tuple of (int or None)
        ``(lower, upper)`` with ``lower <= T_weak <= upper``; ``(None, None)`` before anybody
        was aggregated.
    classes : int
        Number of classes of users always aggregated together.
    """

    rounds: int
    rank: int
    exposed: tuple[int, ...]
    t_strong: int | None
    t_weak: tuple[int | None, int | None]
    classes: int

    def server_view(self) -> dict[str, object]:
        """The ``server_view`` of :func:`fedprivacy.report.privacy_report`.

        Examples
        --------
        >>> AuditView(3, 2, (), 2, (2, 4), 5).server_view()["t_weak"]
        {'lower': 2, 'upper': 4, 'exact': False}
        """
        lower, upper = self.t_weak
        return {
            "t_weak": {"lower": lower, "upper": upper, "exact": lower == upper},
            "t_strong": self.t_strong,
            "exposed_users": len(self.exposed),
        }

    def describe(self) -> str:
        """The view in a few words, for a progress line.

        Examples
        --------
        >>> AuditView(3, 2, (), 2, (2, 4), 5).describe()
        'T_weak in [2, 4], T_strong 2, 0 exposed'
        """
        return describe_view(*self.t_weak, self.t_strong, len(self.exposed))

    def to_dict(self) -> dict[str, object]:
        """The flat fields a per-round CSV or an event carries.

        Examples
        --------
        >>> AuditView(3, 2, (4,), 1, (1, 1), 5).to_dict()["t_weak_upper"]
        1
        """
        return {
            "rank": self.rank,
            "exposed_users": len(self.exposed),
            "t_strong": self.t_strong,
            "t_weak_lower": self.t_weak[0],
            "t_weak_upper": self.t_weak[1],
        }


class IncrementalAudit:
    """The audit of a participation log that grows one round at a time.

    Parameters
    ----------
    num_users : int
        Number of users ``N``.
    prime : int, optional
        Modulus of the elimination (a prime below ``2**31``); a random one by default. Given only
        to make a test reproducible.

    Raises
    ------
    ParameterError
        If ``num_users`` is not positive or ``prime`` is not a prime in ``[3, 2**31)``.
    """

    def __init__(self, num_users: int, *, prime: int | None = None) -> None:
        self.num_users = require_int("num_users", num_users, minimum=1)
        p = random_prime() if prime is None else int(prime)
        if not (2 < p < 2**31 and gmpy2.is_prime(p)):
            raise ParameterError("prime", f"must be a prime in [3, 2**31), got {prime!r}")
        self.prime = p
        self._class_of = np.full(self.num_users, -1, dtype=np.intp)
        self._sizes = np.zeros(16, dtype=np.int64)
        self._classes = 0
        self._basis = np.zeros((16, 16), dtype=np.int64)
        self._nnz = np.zeros(16, dtype=np.int64)
        self._pivots: list[int] = []
        self._row_of_pivot = np.full(16, -1, dtype=np.intp)
        self._rounds = 0
        self._lightest: int | None = None

    @classmethod
    def of_ledger(
        cls, ledger: ParticipationLedger, *, prime: int | None = None
    ) -> IncrementalAudit:
        """The audit after every round of ``ledger``.

        Examples
        --------
        >>> ledger = ParticipationLedger.from_matrix([[1, 1, 0], [0, 1, 1]])
        >>> IncrementalAudit.of_ledger(ledger).view().t_weak
        (2, 2)
        """
        audit = cls(ledger.num_users, prime=prime)
        audit.catch_up(ledger)
        return audit

    def catch_up(self, ledger: ParticipationLedger) -> list[AuditView]:
        """Add the rounds of ``ledger`` not seen yet; the view after each of them.

        Examples
        --------
        >>> ledger = ParticipationLedger.from_matrix([[1, 1, 0], [0, 1, 0]])
        >>> [len(v.exposed) for v in IncrementalAudit(3).catch_up(ledger)]
        [0, 2]
        """
        return [self.add_round(ledger.selected(r)) for r in range(self.rounds, ledger.rounds)]

    @property
    def rounds(self) -> int:
        """Rounds recorded so far, skipped ones included."""
        return self._rounds

    @property
    def rank(self) -> int:
        """Rank of the rounds seen so far (modulo :attr:`prime`)."""
        return len(self._pivots)

    def grow(self, num_users: int) -> None:
        """Admit users up to ``num_users`` (never aggregated so far): a log that names new users.

        Examples
        --------
        >>> audit = IncrementalAudit(1)
        >>> audit.grow(3); audit.add_round([2]).exposed
        (2,)
        """
        extra = require_int("num_users", num_users, minimum=self.num_users) - self.num_users
        self._class_of = np.concatenate([self._class_of, np.full(extra, -1, dtype=np.intp)])
        self.num_users = num_users

    # ------------------------------------------------------------------ one round
    def add_round(self, users: ArrayLike) -> AuditView:
        """Record the users aggregated in one round and return the server's view after it.

        Raises
        ------
        ParameterError
            If an index is out of range or repeated.
        """
        idx = self._checked(users)
        self._rounds += 1
        if idx.size:
            self._lightest = idx.size if self._lightest is None else min(self._lightest, idx.size)
            self._eliminate(self._split(idx))
        return self.view()

    def peek(self, users: ArrayLike) -> AuditView:
        """The view :meth:`add_round` would return, without recording the round.

        Examples
        --------
        >>> audit = IncrementalAudit(3, prime=1048573)
        >>> _ = audit.add_round([0, 1])
        >>> audit.peek([1]).exposed, audit.view().exposed
        ((0, 1), ())
        """
        return copy.deepcopy(self).add_round(users)

    def _checked(self, users: ArrayLike) -> NDArray[np.intp]:
        idx = np.unique(np.asarray(users, dtype=np.intp).ravel())
        if idx.size != np.asarray(users).size:
            raise ParameterError("users", "a user appears twice in one round")
        if idx.size and (idx[0] < 0 or idx[-1] >= self.num_users):
            raise ParameterError("users", f"user indices must lie in [0, {self.num_users - 1}]")
        return idx

    def _new_classes(self, count: int) -> NDArray[np.intp]:
        """``count`` fresh class columns (zero in every basis row)."""
        first, self._classes = self._classes, self._classes + count
        if self._classes > self._basis.shape[1]:
            cap = max(self._classes, 2 * self._basis.shape[1])
            grown = np.zeros((self._basis.shape[0], cap), dtype=np.int64)
            grown[:, :first] = self._basis[:, :first]
            self._basis = grown
            self._sizes = np.concatenate([self._sizes, np.zeros(cap - self._sizes.size, np.int64)])
            pad = np.full(cap - self._row_of_pivot.size, -1, dtype=np.intp)
            self._row_of_pivot = np.concatenate([self._row_of_pivot, pad])
        return np.arange(first, self._classes, dtype=np.intp)

    def _split(self, idx: NDArray[np.intp]) -> NDArray[np.intp]:
        """Give the round's part of every class it cuts a class of its own; the round's classes."""
        old = self._class_of[idx]
        fresh = old < 0
        seen, counts = np.unique(old[~fresh], return_counts=True)
        cut = seen[counts < self._sizes[seen]]
        if cut.size:
            new = self._new_classes(cut.size)
            rank = self.rank
            self._basis[:rank, new] = self._basis[:rank, cut]
            self._nnz[:rank] += np.count_nonzero(self._basis[:rank, cut], axis=1)
            moving = np.isin(old, cut)
            target = new[np.searchsorted(cut, old[moving])]
            self._class_of[idx[moving]] = target
            np.add.at(self._sizes, target, 1)
            np.subtract.at(self._sizes, old[moving], 1)
        if fresh.any():
            (new_class,) = self._new_classes(1)
            self._class_of[idx[fresh]] = new_class
            self._sizes[new_class] = int(fresh.sum())
        return np.unique(self._class_of[idx])

    def _eliminate(self, round_classes: NDArray[np.intp]) -> None:
        """Reduce the round's quotient row; a nonzero remainder becomes a new basis row."""
        p, n = self.prime, self._classes
        row = np.zeros(n, dtype=np.int64)
        row[round_classes] = 1
        rows = self._row_of_pivot[round_classes]
        rows = rows[rows >= 0]
        if rows.size:
            row -= self._basis[rows, :n].sum(axis=0)
            row %= p
        nonzero = np.flatnonzero(row)
        if not nonzero.size:
            return
        j = int(nonzero[0])
        row = row * pow(int(row[j]), -1, p) % p
        rank = self.rank
        hit = np.flatnonzero(self._basis[:rank, j])
        if hit.size:
            update = self._basis[hit, :n] - self._basis[hit, j, None] * row[None, :]
            self._basis[hit, :n] = update % p
            self._nnz[hit] = np.count_nonzero(self._basis[hit, :n], axis=1)
        self._append(row, j)

    def _append(self, row: NDArray[np.int64], pivot: int) -> None:
        rank = self.rank
        if rank == self._basis.shape[0]:
            grown = np.zeros((2 * rank, self._basis.shape[1]), dtype=np.int64)
            grown[:rank] = self._basis
            self._basis = grown
            self._nnz = np.concatenate([self._nnz, np.zeros(rank, np.int64)])
        self._basis[rank, : row.size] = row
        self._nnz[rank] = np.count_nonzero(row)
        self._pivots.append(pivot)
        self._row_of_pivot[pivot] = rank

    # ------------------------------------------------------------------ the view
    def classes_in_row_space(self) -> NDArray[np.intp]:
        """Classes whose indicator (the sum of their updates) the server can compute."""
        single = np.flatnonzero(self._nnz[: self.rank] == 1)
        return np.asarray(self._pivots, dtype=np.intp)[single]

    def view(self) -> AuditView:
        """The server's view after the rounds recorded so far."""
        sizes = self._sizes[: self._classes]
        live = sizes[sizes > 0]
        if not live.size:
            return AuditView(self._rounds, 0, (), None, (None, None), 0)
        t_strong = int(live.min())
        isolated = self.classes_in_row_space()
        singles = isolated[sizes[isolated] == 1]
        exposed = tuple(int(u) for u in np.flatnonzero(np.isin(self._class_of, singles)))
        if exposed:
            bounds: tuple[int | None, int | None] = (1, 1)
        else:
            assert self._lightest is not None
            upper = min([self._lightest, *sizes[isolated].tolist()])
            bounds = (min(max(2, t_strong), upper), upper)
        return AuditView(self._rounds, self.rank, exposed, t_strong, bounds, int(live.size))


def exposed_counts(ledger: ParticipationLedger) -> NDArray[np.int64]:
    """How many users were exposed after each round of ``ledger`` (the live audit, replayed).

    Examples
    --------
    >>> ledger = ParticipationLedger.from_matrix([[1, 1, 0], [0, 1, 1], [0, 1, 0]])
    >>> exposed_counts(ledger).tolist()
    [0, 0, 3]
    """
    views = IncrementalAudit(ledger.num_users).catch_up(ledger)
    return np.asarray([len(v.exposed) for v in views], dtype=np.int64)
