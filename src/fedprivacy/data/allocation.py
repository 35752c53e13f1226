"""Allocation of training records to users and silos (Section 5.1 of the ULDP-FL paper).

Every record of a training pool gets a silo and a user; one user may hold records in several
silos. An :class:`Allocation` stores the two arrays and answers the questions the ULDP-FL
algorithms ask: the records of user ``u`` in silo ``s``, the histogram ``n_{s,u}``, the
number of records per user ``N_u``, the weights ``n_{s,u} / N_u``, and a per-silo grouping by
user for vectorised per-user training (:meth:`Allocation.silo_users`,
:func:`fedprivacy.data.shards.silo_shards`).

The paper's allocations are made by :func:`fedprivacy.data.allocators.allocate_pool` (a pool
without silos: MNIST, Creditcard) and :func:`fedprivacy.data.fixed_silos.allocate_fixed_silos`
(silos that come with the data: Heart Disease, TCGA-BRCA).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.data.silo_dataset import readonly
from fedprivacy.errors import ParameterError

_I64 = NDArray[np.int64]
_F64 = NDArray[np.float64]


@dataclass(frozen=True)
class SiloUsers:
    """The records of one silo grouped by user (CSR layout).

    Parameters
    ----------
    silo : int
        The silo.
    users : numpy.ndarray of int64, shape (k,)
        The users present in the silo, ascending.
    offsets : numpy.ndarray of int64, shape (k + 1,)
        User ``users[j]`` owns ``records[offsets[j]:offsets[j + 1]]``.
    records : numpy.ndarray of int64, shape (n_s,)
        Pool indices of the silo's records, grouped by user (ascending user, then ascending
        index).
    """

    silo: int
    users: _I64
    offsets: _I64
    records: _I64

    @property
    def counts(self) -> _I64:
        """Records per present user, ``n_{s,u}`` for ``u`` in :attr:`users`."""
        return np.diff(self.offsets)

    def of(self, user: int) -> _I64:
        """Return the pool indices of ``user``'s records in this silo (empty if absent)."""
        j = int(np.searchsorted(self.users, user))
        if j == len(self.users) or int(self.users[j]) != user:
            return np.empty(0, dtype=np.int64)
        return self.records[self.offsets[j] : self.offsets[j + 1]]

    def padded(self, fill: int = -1) -> _I64:
        """Return a ``(k, max n_{s,u})`` matrix of pool indices, short rows padded with ``fill``.

        Row ``j`` lists the records of ``users[j]``; use :attr:`counts` as the mask.
        """
        counts = self.counts
        width = int(counts.max()) if len(counts) else 0
        out = np.full((len(self.users), width), fill, dtype=np.int64)
        cols = np.arange(len(self.records)) - np.repeat(self.offsets[:-1], counts)
        out[np.repeat(np.arange(len(self.users)), counts), cols] = self.records
        return out


@dataclass(frozen=True, eq=False)
class Allocation:
    """For each record of a training pool, its silo and its user.

    Instances compare and hash by identity (the fields are arrays). The arrays are copied and
    made read-only.

    Parameters
    ----------
    silo : array_like of int, shape (n,)
        Silo of record ``i``, in ``[0, num_silos)``.
    user : array_like of int, shape (n,)
        User of record ``i``, in ``[0, num_users)``.
    num_silos : int
        Number of silos ``|S|``.
    num_users : int
        Number of users ``|U|`` (some may hold no record).
    distribution : str
        How it was made, ``"uniform"`` or ``"zipf"`` (free text for hand-made allocations).
    fixed_silos : bool
        Whether the silos were given (records ``0..n_0-1`` in silo 0, then silo 1, ...).
    main_silo : array_like of int or None, shape (num_users,)
        Each user's preferred silo, for the zipf allocations; ``None`` otherwise.
    params : mapping
        The parameters of the allocator (alphas, shares, label limit), for reports.

    Raises
    ------
    ParameterError
        If the arrays have different lengths or values out of range.
    """

    silo: _I64
    user: _I64
    num_silos: int
    num_users: int
    distribution: str
    fixed_silos: bool = False
    main_silo: _I64 | None = None
    params: Mapping[str, float | int | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        s = require_int("num_silos", self.num_silos, 1)
        u = require_int("num_users", self.num_users, 1)
        silo = int_array("silo", self.silo, 0, s)
        user = int_array("user", self.user, 0, u)
        if silo.shape != user.shape:
            raise ParameterError("user", f"has {len(user)} entries for {len(silo)} records")
        object.__setattr__(self, "silo", readonly(silo))
        object.__setattr__(self, "user", readonly(user))
        if self.main_silo is not None:
            main = int_array("main_silo", self.main_silo, 0, s)
            if main.shape != (u,):
                raise ParameterError("main_silo", f"must have one entry per user ({u})")
            object.__setattr__(self, "main_silo", readonly(main))
        object.__setattr__(self, "params", dict(self.params))

    # -- sizes -----------------------------------------------------------------------------

    @property
    def num_records(self) -> int:
        """Number of records ``n`` of the pool."""
        return int(len(self.silo))

    @functools.cached_property
    def _histogram(self) -> _I64:
        flat = self.silo * self.num_users + self.user
        counts = np.bincount(flat, minlength=self.num_silos * self.num_users)
        return readonly(counts.astype(np.int64).reshape(self.num_silos, self.num_users))

    def histogram(self) -> _I64:
        """Return the counts ``n_{s,u}``: records of user ``u`` in silo ``s``.

        Returns
        -------
        numpy.ndarray of int64, shape (num_silos, num_users)
            Read-only; rows sum to :meth:`records_per_silo`, columns to
            :meth:`records_per_user`.
        """
        return self._histogram

    def records_per_user(self) -> _I64:
        """Return ``N_u``, the records of each user over all silos, shape ``(num_users,)``."""
        out: _I64 = self._histogram.sum(axis=0, dtype=np.int64)
        return out

    def records_per_silo(self) -> _I64:
        """Return the records of each silo, shape ``(num_silos,)``."""
        out: _I64 = self._histogram.sum(axis=1, dtype=np.int64)
        return out

    def users_per_silo(self) -> _I64:
        """Return the number of distinct users present in each silo, shape ``(num_silos,)``."""
        out: _I64 = (self._histogram > 0).sum(axis=1, dtype=np.int64)
        return out

    def silos_per_user(self) -> _I64:
        """Return the number of silos each user has records in, shape ``(num_users,)``."""
        out: _I64 = (self._histogram > 0).sum(axis=0, dtype=np.int64)
        return out

    def users_in_silo(self, silo: int) -> _I64:
        """Return the users with at least one record in ``silo``, ascending."""
        s = require_int("silo", silo, 0, self.num_silos - 1)
        return np.flatnonzero(self._histogram[s] > 0).astype(np.int64)

    def active_users(self) -> _I64:
        """Return the users holding at least one record, ascending."""
        return np.flatnonzero(self.records_per_user() > 0).astype(np.int64)

    def max_records_per_user(self) -> int:
        """Return ``max_u N_u`` (the group size of ULDP-GROUP-max)."""
        return int(self.records_per_user().max())

    def median_records_per_user(self) -> float:
        """Return the median of ``N_u`` over users holding records (ULDP-GROUP-median)."""
        n = self.records_per_user()
        return float(np.median(n[n > 0]))

    def min_records_per_present_user_silo(self) -> int:
        """Return the smallest ``n_{s,u}`` over pairs with ``n_{s,u} > 0``."""
        h = self._histogram
        return int(h[h > 0].min())

    def weights(self) -> _F64:
        """Return ``w_{s,u} = n_{s,u} / N_u`` (ULDP-AVG-w), 0 for users without records.

        Returns
        -------
        numpy.ndarray of float64, shape (num_silos, num_users)
            Each column of a user with records sums to 1.
        """
        h = self._histogram.astype(np.float64)
        total = h.sum(axis=0)
        w: _F64 = np.divide(h, total, out=np.zeros_like(h), where=total > 0)
        return w

    def main_silo_share(self) -> float:
        """Return the fraction of all records that lie in their user's main silo.

        Raises
        ------
        ParameterError
            If the allocation has no main silos (uniform allocations).
        """
        if self.main_silo is None:
            raise ParameterError("main_silo", f"a {self.distribution!r} allocation has none")
        return float(np.mean(self.silo == self.main_silo[self.user]))

    def labels_per_user(self, labels: ArrayLike) -> _I64:
        """Return the number of distinct labels among each user's records.

        Parameters
        ----------
        labels : array_like of int, shape (num_records,)
            Labels of the pool.

        Returns
        -------
        numpy.ndarray of int64, shape (num_users,)
            0 for users without records.
        """
        y = label_array(labels)
        if len(y) != self.num_records:
            raise ParameterError("labels", f"has {len(y)} entries for {self.num_records} records")
        classes, inv = np.unique(y, return_inverse=True)
        seen = np.zeros((self.num_users, len(classes)), dtype=bool)
        seen[self.user, inv] = True
        out: _I64 = seen.sum(axis=1, dtype=np.int64)
        return out

    # -- records ---------------------------------------------------------------------------

    @functools.cached_property
    def _grouping(self) -> tuple[_I64, _I64]:
        key = self.silo * self.num_users + self.user
        order = np.argsort(key, kind="stable").astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(np.bincount(self.silo, minlength=self.num_silos))])
        return readonly(order), readonly(starts.astype(np.int64))

    def silo_users(self, silo: int) -> SiloUsers:
        """Return the records of ``silo`` grouped by user (see :class:`SiloUsers`).

        Parameters
        ----------
        silo : int
            The silo, in ``[0, num_silos)``.

        Returns
        -------
        SiloUsers
            Users present, offsets and grouped pool indices.
        """
        s = require_int("silo", silo, 0, self.num_silos - 1)
        order, starts = self._grouping
        records = order[starts[s] : starts[s + 1]]
        counts = self._histogram[s]
        users = np.flatnonzero(counts > 0).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts[users])]).astype(np.int64)
        return SiloUsers(silo=s, users=readonly(users), offsets=readonly(offsets), records=records)

    def records(self, silo: int | None = None, user: int | None = None) -> _I64:
        """Return the pool indices of the records of ``user`` in ``silo``, ascending.

        Parameters
        ----------
        silo : int or None
            The silo; ``None`` for every silo.
        user : int or None
            The user; ``None`` for every user.

        Returns
        -------
        numpy.ndarray of int64
            Sorted indices (empty if the user holds nothing there).
        """
        mask = np.ones(self.num_records, dtype=bool)
        if silo is not None:
            mask &= self.silo == require_int("silo", silo, 0, self.num_silos - 1)
        if user is not None:
            mask &= self.user == require_int("user", user, 0, self.num_users - 1)
        return np.flatnonzero(mask).astype(np.int64)

    def summary(self) -> dict[str, object]:
        """Return JSON-ready statistics of the allocation.

        Returns
        -------
        dict
            ``distribution``, ``params``, ``num_records``, ``num_silos``, ``num_users``,
            ``active_users``, ``records_per_silo``, ``users_per_silo``, ``max`` and
            ``median`` records per user, ``mean_silos_per_user`` and, for zipf allocations,
            ``main_silo_share``.
        """
        n_u = self.records_per_user()
        out: dict[str, object] = {
            "distribution": self.distribution,
            "params": dict(self.params),
            "num_records": self.num_records,
            "num_silos": self.num_silos,
            "num_users": self.num_users,
            "active_users": int((n_u > 0).sum()),
            "records_per_silo": self.records_per_silo().tolist(),
            "users_per_silo": self.users_per_silo().tolist(),
            "max_records_per_user": self.max_records_per_user(),
            "median_records_per_user": self.median_records_per_user(),
            "mean_silos_per_user": float(self.silos_per_user()[n_u > 0].mean()),
        }
        if self.main_silo is not None:
            out["main_silo_share"] = self.main_silo_share()
        return out


# -- validation helpers --------------------------------------------------------------------


def int_array(name: str, value: ArrayLike, low: int, high: int) -> _I64:
    """``value`` as a 1-D int64 array with entries in ``[low, high)`` (errors name ``name``)."""
    arr = np.array(value)
    if arr.ndim != 1:
        raise ParameterError(name, f"must be 1-D, got {arr.ndim} dimension(s)")
    if len(arr) and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise ParameterError(name, f"must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if len(arr) and (int(arr.min()) < low or int(arr.max()) >= high):
        raise ParameterError(name, f"entries must lie in [{low}, {high})")
    return arr


def label_array(labels: ArrayLike) -> _I64:
    """``labels`` as a non-empty 1-D int64 array (an error names ``labels``)."""
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ParameterError("labels", f"must be 1-D, got {y.ndim} dimension(s)")
    if y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer):
        raise ParameterError("labels", f"must hold integers, got dtype {y.dtype}")
    if len(y) == 0:
        raise ParameterError("labels", "must not be empty")
    return y.astype(np.int64, copy=False)
