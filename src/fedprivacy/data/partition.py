"""Split a training set among federated users: IID, label shards, Dirichlet and data sharing.

A :class:`Partition` holds, for every user, the indices of its private training samples, plus
an optional set of shared indices that every user also holds (the data-sharing strategy of Zhao
et al., 2018). All randomness comes from the :class:`numpy.random.Generator` passed in, so the
same seed gives the same partition.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._registry import Registry
from fedprivacy._validation import require_int
from fedprivacy.data.allocation import label_array
from fedprivacy.errors import ParameterError

#: How many Dirichlet draws :func:`partition_dirichlet` tries before giving up.
DIRICHLET_MAX_TRIES = 1000

_I64 = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Partition:
    """Assignment of training samples to users.

    Instances compare and hash by identity (the fields are arrays).

    Parameters
    ----------
    name : str
        The strategy that produced it, one of :data:`PARTITIONS`.
    user_indices : tuple of numpy.ndarray
        Per user, the ``int64`` indices (into the training set) of its private samples, sorted
        ascending. Private parts of different users are disjoint.
    shared_indices : numpy.ndarray
        ``int64`` indices, sorted ascending, that every user holds in addition to its private
        part (data sharing); empty for the other strategies.
    """

    name: str
    user_indices: tuple[_I64, ...]
    shared_indices: _I64

    @property
    def num_users(self) -> int:
        """Number of users ``N``."""
        return len(self.user_indices)

    def sizes(self) -> _I64:
        """Return the number of samples each user holds (shared plus private).

        Returns
        -------
        numpy.ndarray of int64, shape (num_users,)
            ``len(shared_indices) + len(user_indices[i])`` for each user ``i``.
        """
        private = np.array([len(u) for u in self.user_indices], dtype=np.int64)
        return private + np.int64(len(self.shared_indices))

    def user_data(self, user: int) -> _I64:
        """Return every index user ``user`` holds: the shared indices, then its private ones.

        Parameters
        ----------
        user : int
            0-based user index.

        Returns
        -------
        numpy.ndarray of int64
            ``concatenate(shared_indices, user_indices[user])``.

        Raises
        ------
        ParameterError
            If ``user`` is not in ``[0, num_users)``.
        """
        u = require_int("user", user, 0, self.num_users - 1)
        return np.concatenate([self.shared_indices, self.user_indices[u]]).astype(
            np.int64, copy=False
        )

    def label_counts(self, labels: ArrayLike, num_classes: int) -> _I64:
        """Count the labels of the samples each user holds (shared plus private).

        Parameters
        ----------
        labels : array_like of int
            Labels of the whole training set.
        num_classes : int
            Number of classes; every label must be below it.

        Returns
        -------
        numpy.ndarray of int64, shape (num_users, num_classes)
            Entry ``[i, c]`` is the number of samples of class ``c`` user ``i`` holds.

        Raises
        ------
        ParameterError
            If the labels are invalid, out of range, or too few for the indices.
        """
        y = _check_labels(labels)
        k = require_int("num_classes", num_classes, 1)
        if int(y.max()) >= k:
            raise ParameterError("labels", f"label {int(y.max())} is not below num_classes={k}")
        top = max(
            [int(u.max()) for u in self.user_indices if len(u)]
            + ([int(self.shared_indices.max())] if len(self.shared_indices) else []),
            default=-1,
        )
        if top >= len(y):
            raise ParameterError("labels", f"has {len(y)} entries but index {top} is used")
        shared = np.bincount(y[self.shared_indices], minlength=k).astype(np.int64)
        out = np.empty((self.num_users, k), dtype=np.int64)
        for i, u in enumerate(self.user_indices):
            out[i] = shared + np.bincount(y[u], minlength=k)
        return out


def _check_labels(labels: ArrayLike) -> _I64:
    try:
        y = np.asarray(labels)
    except (TypeError, ValueError) as exc:
        raise ParameterError("labels", f"must be a 1-D array of integers ({exc})") from exc
    y = label_array(y)
    if int(y.min()) < 0:
        raise ParameterError("labels", f"must be non-negative, got {int(y.min())}")
    return y


def _check_users(labels: ArrayLike, num_users: object) -> tuple[_I64, int]:
    """The validated labels and number of users (between 1 and the number of samples)."""
    y = _check_labels(labels)
    return y, require_int("users", num_users, 1, len(y))


def check_rng(rng: object) -> np.random.Generator:
    """``rng`` if it is a :class:`numpy.random.Generator` (else an error naming ``rng``)."""
    if not isinstance(rng, np.random.Generator):
        raise ParameterError("rng", f"must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _sorted_parts(parts: list[_I64]) -> tuple[_I64, ...]:
    return tuple(np.sort(p).astype(np.int64, copy=False) for p in parts)


def _empty() -> _I64:
    return np.empty(0, dtype=np.int64)


def _assign_shards(
    order: _I64, num_users: int, per_user: int, rng: np.random.Generator
) -> list[_I64]:
    """Split ``order`` into ``num_users * per_user`` contiguous shards and deal them at random."""
    shards = np.array_split(order, num_users * per_user)
    perm = rng.permutation(num_users * per_user)
    return [
        np.concatenate([shards[s] for s in perm[u * per_user : (u + 1) * per_user]])
        for u in range(num_users)
    ]


def partition_iid(labels: ArrayLike, num_users: int, rng: np.random.Generator) -> Partition:
    """Shuffle the samples and split them into ``num_users`` nearly equal parts.

    Parameters
    ----------
    labels : array_like of int
        Training labels (only their number matters here; they are validated).
    num_users : int
        Number of users ``N``, between 1 and the number of samples.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    Partition
        Sizes differ by at most 1 (e.g. 50,000 samples and 120 users: 416 or 417 each).

    Raises
    ------
    ParameterError
        If an argument is invalid.
    """
    y, n_users = _check_users(labels, num_users)
    gen = check_rng(rng)
    perm = gen.permutation(len(y)).astype(np.int64)
    return Partition("iid", _sorted_parts(np.array_split(perm, n_users)), _empty())


def partition_shards(
    labels: ArrayLike, num_users: int, rng: np.random.Generator, shards_per_user: int = 1
) -> Partition:
    """Pathological non-IID split by label shards (McMahan et al., 2017; the paper's Appendix E).

    The indices are stable-sorted by label and cut into ``num_users * shards_per_user``
    contiguous shards, which are dealt to users by a random permutation, ``shards_per_user``
    each. With 60,000 MNIST images and 120 users, each user gets one shard of 500 images, so
    most users see a single digit. When the number of samples is not a multiple of the number
    of shards, shard sizes differ by at most 1 (the first ones are larger).

    Parameters
    ----------
    labels : array_like of int
        Training labels.
    num_users : int
        Number of users ``N``.
    rng : numpy.random.Generator
        Source of randomness.
    shards_per_user : int
        Shards per user, at least 1.

    Returns
    -------
    Partition
        Disjoint private parts covering every sample.

    Raises
    ------
    ParameterError
        If an argument is invalid or there are fewer samples than shards.
    """
    y, n_users = _check_users(labels, num_users)
    per_user = require_int("shards_per_user", shards_per_user, 1)
    gen = check_rng(rng)
    if n_users * per_user > len(y):
        raise ParameterError(
            "shards_per_user",
            f"users * shards_per_user = {n_users * per_user} exceeds the {len(y)} samples",
        )
    order = np.argsort(y, kind="stable").astype(np.int64)
    return Partition(
        "shards", _sorted_parts(_assign_shards(order, n_users, per_user, gen)), _empty()
    )


def partition_dirichlet(
    labels: ArrayLike,
    num_users: int,
    beta: float,
    rng: np.random.Generator,
    min_size: int = 1,
) -> Partition:
    """Label-skewed split with Dirichlet proportions (Hsu et al., 2019; Wang et al., 2020).

    For each class ``c`` (in increasing order) the class's indices are shuffled, proportions
    ``p ~ Dir(beta * ones(num_users))`` are drawn and the shuffled indices are cut at
    ``floor(cumsum(p) * n_c)``. If some user ends up with fewer than ``min_size`` samples, new
    proportions are drawn for every class (the shuffles are kept), up to
    :data:`DIRICHLET_MAX_TRIES` times. Small ``beta`` gives strong label skew; large ``beta``
    approaches an IID split (with unequal sizes).

    Parameters
    ----------
    labels : array_like of int
        Training labels.
    num_users : int
        Number of users ``N``.
    beta : float
        Concentration parameter, finite and positive.
    rng : numpy.random.Generator
        Source of randomness.
    min_size : int
        Minimum number of samples per user, between 0 and ``n // num_users``.

    Returns
    -------
    Partition
        Disjoint private parts covering every sample.

    Raises
    ------
    ParameterError
        If an argument is invalid, or no draw satisfied ``min_size`` within the allowed tries.
    """
    y, n_users = _check_users(labels, num_users)
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise ParameterError("beta", f"must be a positive number, got {beta!r}")
    b = float(beta)
    if not (math.isfinite(b) and b > 0):
        raise ParameterError("beta", f"must be finite and > 0, got {b!r}")
    floor_size = require_int("min_size", min_size, 0, len(y) // n_users)
    gen = check_rng(rng)
    classes = [np.flatnonzero(y == c) for c in range(int(y.max()) + 1)]
    classes = [gen.permutation(idx).astype(np.int64) for idx in classes if len(idx)]
    alpha = np.full(n_users, b)
    for _ in range(DIRICHLET_MAX_TRIES):
        cuts = []
        sizes = np.zeros(n_users, dtype=np.int64)
        ok = True
        for idx in classes:
            p = gen.dirichlet(alpha)
            if not np.all(np.isfinite(p)):
                ok = False
                break
            edges = np.concatenate(
                [
                    [0],
                    np.minimum((np.cumsum(p) * len(idx)).astype(np.int64)[:-1], len(idx)),
                    [len(idx)],
                ]
            )
            edges = np.maximum.accumulate(edges)
            cuts.append(edges)
            sizes += np.diff(edges)
        if ok and int(sizes.min()) >= floor_size:
            parts = [
                np.concatenate([idx[e[u] : e[u + 1]] for idx, e in zip(classes, cuts, strict=True)])
                for u in range(n_users)
            ]
            return Partition("dirichlet", _sorted_parts(parts), _empty())
    raise ParameterError(
        "min_size",
        f"no Dirichlet(beta={b}) draw in {DIRICHLET_MAX_TRIES} tries gave all {n_users} users at "
        f"least {floor_size} samples; lower min_size, raise beta or use fewer users",
    )


def partition_data_sharing(
    labels: ArrayLike, num_users: int, shared: int, rng: np.random.Generator
) -> Partition:
    """Shards plus a globally shared subset (Zhao et al., 2018; the paper's Appendix E).

    ``shared`` indices drawn uniformly at random without replacement form the shared set ``G``
    that every user holds. The remaining indices are stable-sorted by label and cut into
    ``num_users`` contiguous shards (sizes differ by at most 1), dealt to users by a random
    permutation. With 50,000 CIFAR-10 images, 120 users and ``shared=200``, each user holds
    200 shared plus 415 private samples, the private ones of one or two classes.

    Parameters
    ----------
    labels : array_like of int
        Training labels.
    num_users : int
        Number of users ``N``.
    shared : int
        Size of the shared set, between 0 and ``n - num_users``.
    rng : numpy.random.Generator
        Source of randomness.

    Returns
    -------
    Partition
        Private parts disjoint from each other and from the shared set; together they cover
        every sample.

    Raises
    ------
    ParameterError
        If an argument is invalid.
    """
    y, n_users = _check_users(labels, num_users)
    g = require_int("shared", shared, 0, len(y) - n_users)
    gen = check_rng(rng)
    shared_idx = np.sort(gen.choice(len(y), size=g, replace=False)).astype(np.int64)
    mask = np.ones(len(y), dtype=bool)
    mask[shared_idx] = False
    rest = np.flatnonzero(mask).astype(np.int64)
    order = rest[np.argsort(y[rest], kind="stable")]
    parts = _assign_shards(order, n_users, 1, gen)
    return Partition("data-sharing", _sorted_parts(parts), shared_idx)


#: Builds a partition from ``(labels, num_users, rng, beta, shared, shards_per_user)``.
PartitionBuilder = Callable[[ArrayLike, int, np.random.Generator, float, int, int], Partition]

#: The builder of every strategy name accepted by :func:`make_partition`.
PARTITIONERS: Registry[PartitionBuilder] = Registry("partition")


PARTITIONERS.register("iid", lambda y, n, rng, beta, g, s: partition_iid(y, n, rng))
PARTITIONERS.register("shards", lambda y, n, rng, beta, g, s: partition_shards(y, n, rng, s))
PARTITIONERS.register(
    "dirichlet", lambda y, n, rng, beta, g, s: partition_dirichlet(y, n, beta, rng)
)
PARTITIONERS.register(
    "data-sharing", lambda y, n, rng, beta, g, s: partition_data_sharing(y, n, g, rng)
)

#: Names accepted by :func:`make_partition` (the built-in strategies of :data:`PARTITIONERS`).
PARTITIONS: tuple[str, ...] = tuple(PARTITIONERS)


def make_partition(
    name: str,
    labels: ArrayLike,
    num_users: int,
    rng: np.random.Generator,
    *,
    beta: float = 0.5,
    shared: int = 200,
    shards_per_user: int = 1,
) -> Partition:
    """Build a partition by strategy name.

    Parameters
    ----------
    name : {"iid", "shards", "dirichlet", "data-sharing"}
        The strategy (see :func:`partition_iid`, :func:`partition_shards`,
        :func:`partition_dirichlet`, :func:`partition_data_sharing`), or one added by
        ``PARTITIONERS.register``.
    labels : array_like of int
        Training labels.
    num_users : int
        Number of users ``N``.
    rng : numpy.random.Generator
        Source of randomness.
    beta : float
        Dirichlet concentration (``"dirichlet"`` only).
    shared : int
        Size of the shared set (``"data-sharing"`` only).
    shards_per_user : int
        Shards per user (``"shards"`` only).

    Returns
    -------
    Partition
        The partition.

    Raises
    ------
    ParameterError
        If ``name`` is not a name of :data:`PARTITIONERS` (the message lists them) or another
        argument is invalid.

    Examples
    --------
    >>> p = make_partition("shards", np.arange(12) % 3, 3, np.random.default_rng(0))
    >>> p.name, [len(u) for u in p.user_indices]
    ('shards', [4, 4, 4])
    >>> try:
    ...     make_partition("pathological", np.arange(12), 3, np.random.default_rng(0))
    ... except ParameterError as exc:
    ...     print(exc)
    partition: must be one of iid, shards, dirichlet, data-sharing; got 'pathological'
    """
    build = PARTITIONERS.lookup(name)
    return build(labels, num_users, rng, beta, shared, shards_per_user)
