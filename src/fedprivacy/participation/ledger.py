"""The participation ledger: the sets of users whose updates the server actually aggregated."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_binary_matrix, require_int
from fedprivacy.errors import ParameterError
from fedprivacy.files import atomic_write_text
from fedprivacy.participation.log_formats import is_number, parse_log


def participation_matrix(name: str, value: ArrayLike) -> NDArray[np.uint8]:
    """Return ``value`` as a 0/1 matrix (rounds x users) after checking it has a user column."""
    arr = require_binary_matrix(name, value)
    if arr.shape[1] == 0:
        raise ParameterError(name, "needs at least one user column")
    return arr


def user_names(user_ids: Sequence[str] | None, num_users: int) -> list[str]:
    """``user_ids`` as strings (``num_users`` of them), or ``"0" .. "N-1"`` when omitted."""
    if user_ids is None:
        return [str(i) for i in range(num_users)]
    ids = [str(u) for u in user_ids]
    if len(ids) != num_users:
        raise ParameterError("user_ids", f"needs {num_users} names, got {len(ids)}")
    return ids


class ParticipationLedger:
    """Record of the users aggregated in each round (the server's view).

    A skipped round is recorded as an empty set, i.e. an all-zero row of the participation matrix.
    The ledger stores index sets, so it scales to millions of users; :meth:`matrix` materialises the
    dense 0/1 participation matrix ``P`` (rounds x users) on demand.

    Parameters
    ----------
    num_users : int
        Number of users ``N``.
    user_ids : sequence of str, optional
        Display names of the users (for example a CSV header). Defaults to ``"0" .. "N-1"``.

    Examples
    --------
    >>> ledger = ParticipationLedger(3)
    >>> ledger.record([0, 1]); ledger.record([]); ledger.record([1, 2])
    >>> ledger.matrix().tolist()
    [[1, 1, 0], [0, 0, 0], [0, 1, 1]]
    >>> ledger.frequency.tolist()
    [1, 2, 1]
    """

    def __init__(self, num_users: int, user_ids: Sequence[str] | None = None) -> None:
        self.num_users = require_int("num_users", num_users, minimum=1)
        self.user_ids = user_names(user_ids, self.num_users)
        if len(set(self.user_ids)) != len(self.user_ids):
            raise ParameterError("user_ids", "names must be distinct")
        self._sets: list[NDArray[np.intp]] = []
        self._frequency = np.zeros(self.num_users, dtype=np.int64)

    # ------------------------------------------------------------------ recording
    def record(self, selected: ArrayLike) -> None:
        """Append one round: the indices of the users whose updates were aggregated.

        Raises
        ------
        ParameterError
            If an index is out of range or repeated.
        """
        idx = np.asarray(selected, dtype=np.intp).ravel()
        if idx.size:
            if idx.min() < 0 or idx.max() >= self.num_users:
                raise ParameterError(
                    "selected", f"user indices must lie in [0, {self.num_users - 1}]"
                )
            idx = np.sort(idx)
            if np.any(idx[1:] == idx[:-1]):
                raise ParameterError("selected", "a user appears twice in one round")
        self._sets.append(idx)
        self._frequency[idx] += 1

    # ------------------------------------------------------------------ views
    @property
    def rounds(self) -> int:
        """Number of recorded rounds, skipped ones included."""
        return len(self._sets)

    @property
    def frequency(self) -> NDArray[np.int64]:
        """How many times each user was aggregated so far (a copy)."""
        return self._frequency.copy()

    @property
    def frequency_view(self) -> NDArray[np.int64]:
        """How many times each user was aggregated so far, as a read-only view (no copy).

        The view tracks later calls to :meth:`record`; copy it to keep a snapshot.
        """
        view = self._frequency.view()
        view.flags.writeable = False
        return view

    @property
    def cardinalities(self) -> NDArray[np.int64]:
        """Number of aggregated users in each round (0 for skipped rounds)."""
        return np.fromiter((s.size for s in self._sets), dtype=np.int64, count=len(self._sets))

    def selected(self, round_index: int) -> NDArray[np.intp]:
        """The sorted user indices aggregated in round ``round_index``."""
        return self._sets[round_index].copy()

    def matrix(self, start: int = 0, stop: int | None = None) -> NDArray[np.uint8]:
        """Dense participation matrix of rounds ``start .. stop-1`` (shape rounds x users)."""
        sets = self._sets[start:stop]
        out = np.zeros((len(sets), self.num_users), dtype=np.uint8)
        for r, s in enumerate(sets):
            out[r, s] = 1
        return out

    # ------------------------------------------------------------------ construction / IO
    @classmethod
    def from_matrix(
        cls, matrix: ArrayLike, user_ids: Sequence[str] | None = None
    ) -> ParticipationLedger:
        """Build a ledger from a 0/1 participation matrix (rounds x users)."""
        arr = participation_matrix("matrix", matrix)
        ledger = cls(arr.shape[1], user_ids)
        for row in arr:
            ledger.record(np.flatnonzero(row))
        return ledger

    @classmethod
    def from_csv(
        cls, path: str | os.PathLike[str], *, time_limit: float | None = None
    ) -> ParticipationLedger:
        """Read a participation log in any format of :mod:`fedprivacy.participation.log_formats`.

        Wide CSV (one row per round, one 0/1 column per user, optional header of user ids) or long
        form (``round,user`` lines), optionally gzip-compressed.

        Raises
        ------
        ParameterError
            If the file is empty, binary, a directory, ragged, or holds a value other than 0 and 1
            (the message names the row and column), or reading takes longer than
            ``time_limit`` seconds (named ``time_limit``).
        """
        log = parse_log(path, time_limit=time_limit)
        ledger = cls(log.num_users, log.user_ids)
        for s in log.sets:
            ledger.record(s)
        return ledger

    def header_ids(self) -> list[str]:
        """User ids as :meth:`to_csv` writes them: numeric ids get a ``u`` prefix.

        A header of numbers would read back as a round (``0,1`` is a valid round), so the header is
        made of names that are never numbers.

        Examples
        --------
        >>> ParticipationLedger(2).header_ids(), ParticipationLedger(1, ["bob"]).header_ids()
        (['u0', 'u1'], ['bob'])
        """
        if all(is_number(u) for u in self.user_ids):
            return [f"u{u}" for u in self.user_ids]
        return list(self.user_ids)

    def to_csv(self, path: str | os.PathLike[str], *, header: bool = True) -> None:
        """Write the participation matrix as CSV (atomically: a crash never leaves half a file).

        The header (see :meth:`header_ids`) is never mistaken for a round by :meth:`from_csv`.
        """
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if header:
            writer.writerow(self.header_ids())
        for row in self.matrix():
            writer.writerow(row.tolist())
        atomic_write_text(path, buf.getvalue())


class LedgerSlice(ParticipationLedger):
    """Users ``start .. stop - 1`` of a ledger, numbered from 0, read as the ledger grows.

    What a wrapper of one group's selector (a privacy filter, a guard) reads when a run's ledger
    also holds others (:mod:`fedprivacy.participation.canary_selection`). Read-only: the run
    records in the ledger itself.

    Examples
    --------
    >>> ledger = ParticipationLedger(5)
    >>> tail = LedgerSlice(ledger, 3, 5)
    >>> ledger.record([0, 3, 4]); ledger.record([1])
    >>> tail.rounds, tail.selected(0).tolist(), tail.frequency.tolist()
    (2, [0, 1], [1, 1])
    """

    def __init__(self, ledger: ParticipationLedger, start: int, stop: int) -> None:
        if not 0 <= start < stop <= ledger.num_users:
            raise ParameterError("users", f"[{start}, {stop}) is not a range of the ledger's")
        self.ledger, self.start, self.stop = ledger, start, stop
        self.num_users = stop - start
        self.user_ids = ledger.user_ids[start:stop]

    def record(self, selected: ArrayLike) -> None:
        """Refused: a slice is read-only (the run records in its ledger)."""
        raise ParameterError("ledger", "a slice of a ledger is read-only")

    @property
    def rounds(self) -> int:
        """Rounds of the ledger."""
        return self.ledger.rounds

    @property
    def frequency(self) -> NDArray[np.int64]:
        """How many times each of the slice's users was aggregated so far (a copy)."""
        return self.ledger.frequency_view[self.start : self.stop].copy()

    @property
    def frequency_view(self) -> NDArray[np.int64]:
        """The slice of the ledger's read-only frequency view."""
        return self.ledger.frequency_view[self.start : self.stop]

    @property
    def cardinalities(self) -> NDArray[np.int64]:
        """Number of the slice's users aggregated in each round."""
        sizes = (self.selected(r).size for r in range(self.rounds))
        return np.fromiter(sizes, dtype=np.int64, count=self.rounds)

    def selected(self, round_index: int) -> NDArray[np.intp]:
        """The slice's users aggregated in round ``round_index``, numbered from 0."""
        users = self.ledger.selected(round_index)
        return users[(users >= self.start) & (users < self.stop)] - self.start

    def matrix(self, start: int = 0, stop: int | None = None) -> NDArray[np.uint8]:
        """The slice's columns of the ledger's participation matrix."""
        return self.ledger.matrix(start, stop)[:, self.start : self.stop]
