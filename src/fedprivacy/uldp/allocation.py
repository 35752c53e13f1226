"""Allocation of training records to users and silos (Section 5.1 of the ULDP-FL paper).

Every record of a training pool gets a silo and a user; one user may hold records in several
silos. An :class:`Allocation` stores the two arrays and answers the questions the ULDP-FL
algorithms ask: the records of user ``u`` in silo ``s``, the histogram ``n_{s,u}``, the
number of records per user ``N_u``, the weights ``n_{s,u} / N_u``, and a per-silo grouping by
user for vectorised per-user training (:meth:`Allocation.silo_users`, :func:`silo_shards`).

Two allocators, following the paper and, where the paper is vague, the authors' code
(``src/dataset.py`` and ``src/flamby_utils/{heart_disease,tcga_brca}.py`` of
github.com/FumiyukiKato/uldp-fl). "Zipf" is the bounded Zipf law on ranks ``1..N``,
``P(rank r) ∝ r^(-alpha)``, as in the authors' code.

:func:`allocate_pool` (MNIST, Creditcard: the pool has no silos yet)
    ``"uniform"``: users and silos are both balanced and independent: the user of each record
    is a random permutation of ``0..U-1`` repeated (every user gets ``floor(n/U)`` or
    ``ceil(n/U)`` records, so each record has the same chance to belong to any user), and the
    silos likewise (sizes differ by at most 1), independently of the users. This is the
    authors' code; the paper says "every record is assigned to a user with equal probability,
    and likewise [...] to a silo".
    ``"zipf"``: each record's user is drawn from Zipf(``user_alpha``) over users (user 0 has
    rank 1, so the lowest ids hold the most records; a user may end up with no record); then
    each user gets a random ranking of the silos and each of its records goes to the silo of
    rank ``r`` with probability ∝ ``r^(-silo_alpha)``. The rank-1 silo is the user's
    :attr:`Allocation.main_silo`. Paper: ``user_alpha = 0.5``, ``silo_alpha = 2.0``, 5 silos,
    100 or 1000 users for Creditcard and 100 or 10000 for MNIST.
    ``max_labels_per_user`` (non-IID MNIST: 2): after the per-user counts are drawn, each user
    gets a set of at most that many labels and its records are taken from those labels only
    (see :func:`allocate_pool` for how every record still gets exactly one user).

:func:`allocate_fixed_silos` (Heart Disease, TCGA-BRCA: the silos come with the data)
    Records are handed out in *blocks* of ``m = min_records_per_user_silo`` records of one
    silo, so that a user present in a silo holds at least ``m`` records there (``m = 2`` for
    TCGA-BRCA, whose Cox loss needs two records per user and silo; ``m = 1`` makes blocks
    single records). A silo of ``n_s`` records has ``floor(n_s / m)`` blocks; its
    ``n_s mod m`` remaining records join random blocks of the same silo.
    ``"uniform"``: each block's user is drawn uniformly and independently ("all records
    belong to one of the users with equal probability without allocation to silos"); users
    may be absent.
    ``"zipf"``: every user gets one block, and the remaining blocks are drawn from
    Zipf(``user_alpha``) over users (the authors' code: "ensure that every user has at least
    one record", two for TCGA). Each user gets a main silo drawn uniformly among the non-empty
    silos ("the priority of the silo is chosen randomly for each user"); each of its blocks
    goes to the main silo with probability ``main_silo_share`` (0.8) and to each other silo
    with probability ``(1 - main_silo_share) / (S - 1)``. The silo sizes are fixed, so users
    are processed in id order (largest expected share first, as in the authors' code) and
    blocks drawn to a full silo are redrawn among the silos with room, in proportion to the
    same probabilities (the authors move them to the next silo instead). Small silos (e.g.
    Switzerland, 30 training records of 486) therefore fill up and the realised main-silo
    share, :meth:`Allocation.main_silo_share`, falls below 0.8 when silos are very unequal.
    The paper uses ``user_alpha = 0.5``; the authors' functions default to 1.5 but the
    experiments pass the command-line value.

All randomness comes from the :class:`numpy.random.Generator` passed in: the same seed gives
the same allocation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.data.tabular import SiloDataset
from fedprivacy.errors import ParameterError

#: Distributions accepted by the allocators.
DISTRIBUTIONS: tuple[str, ...] = ("uniform", "zipf")

#: The paper's Zipf parameters (Section 5.1) and main-silo share.
DEFAULT_USER_ALPHA = 0.5
DEFAULT_SILO_ALPHA = 2.0
DEFAULT_MAIN_SILO_SHARE = 0.8

_I64 = NDArray[np.int64]
_F64 = NDArray[np.float64]


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a.flags.writeable = False
    return a


def zipf_weights(n: int, alpha: float) -> _F64:
    """Return the bounded Zipf probabilities ``r^(-alpha) / sum`` for ranks ``r = 1..n``.

    Parameters
    ----------
    n : int
        Number of ranks, at least 1.
    alpha : float
        Exponent, at least 0 (0 gives the uniform law).

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
        Decreasing probabilities summing to 1.
    """
    n = require_int("n", n, 1)
    a = _check_alpha("alpha", alpha)
    w = np.arange(1, n + 1, dtype=np.float64) ** (-a)
    out: _F64 = w / w.sum()
    return out


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
        silo = _int_array("silo", self.silo, 0, s)
        user = _int_array("user", self.user, 0, u)
        if silo.shape != user.shape:
            raise ParameterError("user", f"has {len(user)} entries for {len(silo)} records")
        object.__setattr__(self, "silo", _readonly(silo))
        object.__setattr__(self, "user", _readonly(user))
        if self.main_silo is not None:
            main = _int_array("main_silo", self.main_silo, 0, s)
            if main.shape != (u,):
                raise ParameterError("main_silo", f"must have one entry per user ({u})")
            object.__setattr__(self, "main_silo", _readonly(main))
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
        return _readonly(counts.astype(np.int64).reshape(self.num_silos, self.num_users))

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

    def max_records_per_user_silo(self) -> int:
        """Return ``max_{s,u} n_{s,u}``."""
        return int(self._histogram.max())

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
        y = _labels(labels)
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
        return _readonly(order), _readonly(starts.astype(np.int64))

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
        return SiloUsers(
            silo=s, users=_readonly(users), offsets=_readonly(offsets), records=records
        )

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


def _int_array(name: str, value: ArrayLike, low: int, high: int) -> _I64:
    arr = np.array(value)
    if arr.ndim != 1:
        raise ParameterError(name, f"must be 1-D, got {arr.ndim} dimension(s)")
    if len(arr) and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise ParameterError(name, f"must hold integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if len(arr) and (int(arr.min()) < low or int(arr.max()) >= high):
        raise ParameterError(name, f"entries must lie in [{low}, {high})")
    return arr


def _labels(labels: ArrayLike) -> _I64:
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ParameterError("labels", f"must be 1-D, got {y.ndim} dimension(s)")
    if y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer):
        raise ParameterError("labels", f"must hold integers, got dtype {y.dtype}")
    if len(y) == 0:
        raise ParameterError("labels", "must not be empty")
    return y.astype(np.int64, copy=False)


def _check_alpha(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise ParameterError(name, f"must be a number, got {value!r}")
    a = float(value)
    if not math.isfinite(a) or a < 0:
        raise ParameterError(name, f"must be a finite number >= 0, got {a!r}")
    return a


def _check_distribution(value: object) -> str:
    if not isinstance(value, str) or value not in DISTRIBUTIONS:
        raise ParameterError(
            "distribution", f"must be one of {', '.join(DISTRIBUTIONS)}; got {value!r}"
        )
    return value


def _check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ParameterError("rng", f"must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


# -- pools (MNIST, Creditcard) -------------------------------------------------------------


def allocate_pool(
    labels: ArrayLike,
    num_users: int,
    num_silos: int,
    distribution: str,
    rng: np.random.Generator,
    *,
    user_alpha: float = DEFAULT_USER_ALPHA,
    silo_alpha: float = DEFAULT_SILO_ALPHA,
    max_labels_per_user: int | None = None,
) -> Allocation:
    """Give every record of a pool a user and a silo (MNIST, Creditcard).

    See the module docstring for the two distributions.

    With ``max_labels_per_user = k`` (non-IID), the per-user counts are drawn first as
    without it; then (a) each user gets ``k`` distinct labels: the label sequence is a chain
    of random permutations of the labels cut into groups of ``k`` (so every label is used and
    labels are spread evenly over users), and groups are dealt to users at random; (b) users
    in random order take ``1/k`` of their count from each of their labels; a label with fewer
    records left than the user's part is first swapped for the label with the most records
    left (unless the user is the last holder of a label that still has records), and a
    remaining shortfall is taken from the user's other labels; (c) records still unassigned
    go first to holders of their label that are short of records, then to random holders of
    their label. Every record thus gets exactly one user and no user holds more than ``k``
    labels; per-user counts follow the distribution except where labels run out at the end
    (the authors' code picks ``k`` labels at random per user, takes ``round(N_u / k)`` records
    of each, and gives every left-over record to user 0).

    Parameters
    ----------
    labels : array_like of int, shape (n,)
        Labels of the pool (used for non-IID allocations; their number is the pool size).
    num_users : int
        Number of users ``|U|``, between 1 and ``n``.
    num_silos : int
        Number of silos ``|S|``, at least 1 (5 in the paper).
    distribution : {"uniform", "zipf"}
        Record distribution.
    rng : numpy.random.Generator
        Source of randomness.
    user_alpha : float
        Zipf exponent of the records per user (paper: 0.5). Ignored for ``"uniform"``.
    silo_alpha : float
        Zipf exponent of a user's records over its ranked silos (paper: 2.0). Ignored for
        ``"uniform"``.
    max_labels_per_user : int or None
        At most this many distinct labels per user (non-IID MNIST: 2); ``None`` for IID.

    Returns
    -------
    Allocation
        ``fixed_silos=False``; ``main_silo`` is each user's rank-1 silo for ``"zipf"``.

    Raises
    ------
    ParameterError
        If an argument is invalid, ``num_users`` exceeds the number of records, or
        ``num_users * max_labels_per_user`` is below the number of distinct labels (some
        records could not be given to anyone).
    """
    y = _labels(labels)
    n = len(y)
    dist = _check_distribution(distribution)
    gen = _check_rng(rng)
    u = require_int("num_users", num_users, 1)
    if u > n:
        raise ParameterError(
            "num_users", f"{u} users for {n} records: there must be at most one user per record"
        )
    s = require_int("num_silos", num_silos, 1)
    ua = _check_alpha("user_alpha", user_alpha)
    sa = _check_alpha("silo_alpha", silo_alpha)
    k = (
        None
        if max_labels_per_user is None
        else require_int("max_labels_per_user", max_labels_per_user, 1)
    )
    num_classes = len(np.unique(y))
    if k is not None and u * k < num_classes:
        raise ParameterError(
            "max_labels_per_user",
            f"{u} users with at most {k} labels each cannot cover the {num_classes} labels of "
            f"the pool: some records would have no user",
        )

    if dist == "uniform":
        user = gen.permutation(np.arange(n, dtype=np.int64) % u)
    else:
        user = gen.choice(u, size=n, p=zipf_weights(u, ua)).astype(np.int64)
    if k is not None and k < num_classes:
        counts = np.bincount(user, minlength=u).astype(np.int64)
        user = _noniid_users(y, counts, k, gen)

    main: _I64 | None = None
    if dist == "uniform":
        silo = gen.permutation(np.arange(n, dtype=np.int64) % s)
    else:
        ranking = np.argsort(gen.random((u, s)), axis=1).astype(np.int64)  # [user, rank]
        rank = gen.choice(s, size=n, p=zipf_weights(s, sa))
        silo = ranking[user, rank]
        main = ranking[:, 0]
    params: dict[str, float | int | None] = {"max_labels_per_user": k}
    if dist == "zipf":
        params.update(user_alpha=ua, silo_alpha=sa)
    return Allocation(
        silo=silo,
        user=user,
        num_silos=s,
        num_users=u,
        distribution=dist,
        fixed_silos=False,
        main_silo=main,
        params=params,
    )


def _label_sets(num_classes: int, num_users: int, k: int, rng: np.random.Generator) -> _I64:
    """Return ``(num_users, k)`` distinct class indices per user, covering every class."""
    total = num_users * k
    seq: list[int] = []
    while len(seq) < total:
        r = len(seq) % k
        tail = set(seq[len(seq) - r :]) if r else set()
        perm = [int(c) for c in rng.permutation(num_classes)]
        head = [c for c in perm if c not in tail][: k - r] if r else []
        seq.extend(head + [c for c in perm if c not in head])
    groups = np.array(seq[:total], dtype=np.int64).reshape(num_users, k)
    return groups[rng.permutation(num_users)]


def _noniid_users(y: _I64, counts: _I64, k: int, rng: np.random.Generator) -> _I64:
    """Re-draw the users of a pool so that each holds at most ``k`` labels (see allocate_pool)."""
    _, inv = np.unique(y, return_inverse=True)
    num_classes, num_users = int(inv.max()) + 1, len(counts)
    sets = _label_sets(num_classes, num_users, k, rng)
    holders = np.bincount(sets.ravel(), minlength=num_classes)
    pools = [rng.permutation(np.flatnonzero(inv == c)) for c in range(num_classes)]
    left = np.array([len(p) for p in pools], dtype=np.int64)
    user = np.full(len(y), -1, dtype=np.int64)
    short = np.zeros(num_users, dtype=np.int64)

    def take(u: int, c: int, want: int) -> int:
        got = int(min(want, left[c]))
        if got > 0:
            start = len(pools[c]) - int(left[c])
            user[pools[c][start : start + got]] = u
            left[c] -= got
        return got

    for u in (int(v) for v in rng.permutation(num_users)):
        need = int(counts[u])
        if need == 0:
            continue
        labs = sets[u]
        parts = np.full(k, need // k, dtype=np.int64)
        parts[: need % k] += 1
        got = 0
        for j in range(k):
            c = int(labs[j])
            # A label too depleted for this user's part is swapped for the fullest label it
            # does not hold, unless the user is its last holder and records of it remain
            # (every label with records left must keep a holder).
            if left[c] < parts[j] and (left[c] == 0 or holders[c] > 1):
                free = np.where(np.isin(np.arange(num_classes), labs), -1, left)
                alt = int(np.argmax(free))
                if free[alt] > left[c]:
                    holders[c] -= 1
                    holders[alt] += 1
                    labs[j] = c = alt
            got += take(u, c, int(parts[j]))
        for c in labs:
            if got == need:
                break
            got += take(u, int(c), need - got)
        short[u] = need - got
    for c in range(num_classes):
        if left[c] == 0:
            continue
        owners = np.flatnonzero((sets == c).any(axis=1))
        for u in rng.permutation(owners[short[owners] > 0]):
            short[u] -= take(int(u), c, int(short[u]))
        if left[c]:
            start = len(pools[c]) - int(left[c])
            user[pools[c][start:]] = rng.choice(owners, size=int(left[c]))
            left[c] = 0
    assert int(user.min()) >= 0
    return user


# -- fixed silos (Heart Disease, TCGA-BRCA) ------------------------------------------------


def allocate_fixed_silos(
    silo_sizes: ArrayLike,
    num_users: int,
    distribution: str,
    rng: np.random.Generator,
    *,
    user_alpha: float = DEFAULT_USER_ALPHA,
    main_silo_share: float = DEFAULT_MAIN_SILO_SHARE,
    min_records_per_user_silo: int = 1,
) -> Allocation:
    """Give every record of fixed silos a user (Heart Disease, TCGA-BRCA).

    See the module docstring for the block construction and the two distributions.

    Parameters
    ----------
    silo_sizes : array_like of int
        Training records per silo, e.g. ``dataset.train_sizes()`` (Heart Disease
        199/172/30/85, TCGA-BRCA 248/156/164/129/129/40). Records are numbered silo after
        silo, as in :meth:`fedprivacy.data.tabular.SiloDataset.pooled_train`.
    num_users : int
        Number of users ``|U|``.
    distribution : {"uniform", "zipf"}
        Record distribution.
    rng : numpy.random.Generator
        Source of randomness.
    user_alpha : float
        Zipf exponent of the records per user (paper: 0.5). Ignored for ``"uniform"``.
    main_silo_share : float
        Probability that a block goes to the user's main silo, in ``[0, 1]`` (paper: 0.8).
        Ignored for ``"uniform"``.
    min_records_per_user_silo : int
        ``m``: a user present in a silo holds at least this many records there (1, or 2 for
        TCGA-BRCA).

    Returns
    -------
    Allocation
        ``fixed_silos=True``; ``main_silo`` set for ``"zipf"``.

    Raises
    ------
    ParameterError
        If an argument is invalid; if a non-empty silo has fewer than ``m`` records (no user
        could be placed there); or, for ``"zipf"``, where every user needs ``m`` records, if
        there are more users than blocks of ``m`` records.
    """
    sizes = _int_array("silo_sizes", silo_sizes, 0, np.iinfo(np.int64).max)
    if len(sizes) == 0:
        raise ParameterError("silo_sizes", "must list at least one silo")
    if int(sizes.sum()) == 0:
        raise ParameterError("silo_sizes", "the silos hold no record")
    dist = _check_distribution(distribution)
    gen = _check_rng(rng)
    u = require_int("num_users", num_users, 1)
    m = require_int("min_records_per_user_silo", min_records_per_user_silo, 1)
    ua = _check_alpha("user_alpha", user_alpha)
    if isinstance(main_silo_share, bool) or not isinstance(
        main_silo_share, int | float | np.floating
    ):
        raise ParameterError("main_silo_share", f"must be a number, got {main_silo_share!r}")
    share = float(main_silo_share)
    if not 0.0 <= share <= 1.0:
        raise ParameterError("main_silo_share", f"must lie in [0, 1], got {share!r}")
    small = np.flatnonzero((sizes > 0) & (sizes < m))
    if len(small):
        j = int(small[0])
        raise ParameterError(
            "silo_sizes",
            f"silo {j} holds {int(sizes[j])} record(s), fewer than min_records_per_user_silo="
            f"{m}: no user can be placed there",
        )
    s = len(sizes)
    blocks = sizes // m
    total_blocks = int(blocks.sum())

    main: _I64 | None = None
    block_counts = np.zeros((u, s), dtype=np.int64)  # blocks of user u in silo s
    if dist == "zipf":
        if u > total_blocks:
            raise ParameterError(
                "num_users",
                f"{u} users each need at least {m} record(s) in one silo, but the silos "
                f"{sizes.tolist()} hold only {total_blocks} such block(s)",
            )
        per_user = 1 + gen.multinomial(total_blocks - u, zipf_weights(u, ua)).astype(np.int64)
        open_silos = np.flatnonzero(blocks > 0)
        main = open_silos[gen.integers(len(open_silos), size=u)].astype(np.int64)
        cap = blocks.astype(np.int64).copy()
        for v in range(u):
            p = np.full(s, (1.0 - share) / (s - 1)) if s > 1 else np.ones(1)
            p[main[v]] = share if s > 1 else 1.0
            need = int(per_user[v])
            while need > 0:
                q = np.where(cap > 0, p, 0.0)
                if q.sum() <= 0:
                    q = (cap > 0).astype(np.float64)
                draw = gen.multinomial(need, q / q.sum())
                got = np.minimum(draw, cap)
                block_counts[v] += got
                cap -= got
                need -= int(got.sum())

    user = np.empty(int(sizes.sum()), dtype=np.int64)
    start = 0
    for j in range(s):
        n_s, b_s = int(sizes[j]), int(blocks[j])
        if n_s == 0:
            continue
        if dist == "zipf":
            owners = np.repeat(np.arange(u, dtype=np.int64), block_counts[:, j])
        else:
            owners = gen.integers(u, size=b_s).astype(np.int64)
        records = np.repeat(owners, m)
        extra = n_s - b_s * m
        if extra:
            records = np.concatenate([records, owners[gen.integers(b_s, size=extra)]])
        user[start : start + n_s] = gen.permutation(records)
        start += n_s
    params: dict[str, float | int | None] = {"min_records_per_user_silo": m}
    if dist == "zipf":
        params.update(user_alpha=ua, main_silo_share=share)
    return Allocation(
        silo=np.repeat(np.arange(s, dtype=np.int64), sizes),
        user=user,
        num_silos=s,
        num_users=u,
        distribution=dist,
        fixed_silos=True,
        main_silo=main,
        params=params,
    )


# -- per-silo views of a dataset -----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SiloShard:
    """The training records of one silo, grouped by user, ready for per-user training.

    Parameters
    ----------
    silo : int
        The silo index.
    name : str
        The silo's name (the dataset's for fixed silos, ``"silo<k>"`` for a pool).
    x : numpy.ndarray
        Features of the silo's records, grouped by user (ascending user, then pool order).
    y : numpy.ndarray
        Their targets.
    user : numpy.ndarray of int64
        The user of each record (ascending).
    record_index : numpy.ndarray of int64
        The pool index of each record.
    users : numpy.ndarray of int64, shape (k,)
        The users present, ascending.
    offsets : numpy.ndarray of int64, shape (k + 1,)
        User ``users[j]`` owns rows ``offsets[j]:offsets[j + 1]``.
    """

    silo: int
    name: str
    x: NDArray[Any]
    y: NDArray[Any]
    user: _I64
    record_index: _I64
    users: _I64
    offsets: _I64

    @property
    def num_records(self) -> int:
        """Number of records in the silo."""
        return int(len(self.user))

    @property
    def counts(self) -> _I64:
        """Records per present user, ``n_{s,u}`` for ``u`` in :attr:`users`."""
        return np.diff(self.offsets)

    def rows_of(self, user: int) -> slice:
        """Return the rows of ``user`` in :attr:`x` / :attr:`y` (an empty slice if absent)."""
        j = int(np.searchsorted(self.users, user))
        if j == len(self.users) or int(self.users[j]) != user:
            return slice(0, 0)
        return slice(int(self.offsets[j]), int(self.offsets[j + 1]))


def silo_shards(dataset: SiloDataset, allocation: Allocation) -> tuple[SiloShard, ...]:
    """Split a dataset's training pool into per-silo shards grouped by user.

    Parameters
    ----------
    dataset : SiloDataset
        The dataset; its :meth:`~fedprivacy.data.tabular.SiloDataset.pooled_train` order is
        the allocation's record order.
    allocation : Allocation
        An allocation of that pool; for fixed silos, one made by :func:`allocate_fixed_silos`
        with the dataset's :meth:`~fedprivacy.data.tabular.SiloDataset.train_sizes`.

    Returns
    -------
    tuple of SiloShard
        One per silo of the allocation (the arrays are copies, read-only).

    Raises
    ------
    ParameterError
        If the allocation does not match the dataset.
    """
    x, y = dataset.pooled_train()
    if allocation.num_records != len(x):
        raise ParameterError(
            "allocation",
            f"covers {allocation.num_records} records, the training pool has {len(x)}",
        )
    if dataset.fixed_silos:
        expected = np.repeat(np.arange(dataset.num_silos), dataset.train_sizes())
        if allocation.num_silos != dataset.num_silos or not np.array_equal(
            allocation.silo, expected
        ):
            raise ParameterError(
                "allocation",
                f"does not keep the fixed silos of {dataset.name!r}: use allocate_fixed_silos "
                f"with silo_sizes={dataset.train_sizes().tolist()}",
            )
    shards = []
    for s in range(allocation.num_silos):
        group = allocation.silo_users(s)
        idx = group.records
        name = dataset.silo_names[s] if dataset.fixed_silos else f"silo{s}"
        shards.append(
            SiloShard(
                silo=s,
                name=name,
                x=_readonly(x[idx]),
                y=_readonly(y[idx]),
                user=_readonly(allocation.user[idx]),
                record_index=idx,
                users=group.users,
                offsets=group.offsets,
            )
        )
    return tuple(shards)
