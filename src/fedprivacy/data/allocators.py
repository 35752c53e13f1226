"""Allocators of training records to users and silos (Section 5.1 of the ULDP-FL paper).

Each allocator gives every record of a training pool a silo and a user and returns an
:class:`~fedprivacy.data.allocation.Allocation`; one user may hold records in several silos.

The pool allocator, following the paper and, where the paper is vague, the authors' code
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

All randomness comes from the :class:`numpy.random.Generator` passed in: the same seed gives
the same allocation. The fixed-silo allocator of Heart Disease and TCGA-BRCA is
:func:`fedprivacy.data.fixed_silos.allocate_fixed_silos`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int, require_number, require_one_of
from fedprivacy.data.allocation import Allocation, label_array
from fedprivacy.data.partition import check_rng
from fedprivacy.errors import ParameterError

#: Distributions accepted by the allocators.
DISTRIBUTIONS: tuple[str, ...] = ("uniform", "zipf")

#: The paper's Zipf parameters (Section 5.1) and main-silo share.
DEFAULT_USER_ALPHA = 0.5
DEFAULT_SILO_ALPHA = 2.0
DEFAULT_MAIN_SILO_SHARE = 0.8

_I64 = NDArray[np.int64]
_F64 = NDArray[np.float64]


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
    a = require_alpha("alpha", alpha)
    w = np.arange(1, n + 1, dtype=np.float64) ** (-a)
    out: _F64 = w / w.sum()
    return out


# -- validation helpers --------------------------------------------------------------------


def require_alpha(name: str, value: object) -> float:
    """A Zipf exponent: a finite number >= 0."""
    a = require_number(name, value)
    if a < 0:
        raise ParameterError(name, f"must be a finite number >= 0, got {a!r}")
    return a


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
    y = label_array(labels)
    n = len(y)
    require_one_of("distribution", distribution, DISTRIBUTIONS)
    gen = check_rng(rng)
    u = require_int("num_users", num_users, 1)
    if u > n:
        raise ParameterError(
            "num_users", f"{u} users for {n} records: there must be at most one user per record"
        )
    s = require_int("num_silos", num_silos, 1)
    ua = require_alpha("user_alpha", user_alpha)
    sa = require_alpha("silo_alpha", silo_alpha)
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

    if distribution == "uniform":
        user = gen.permutation(np.arange(n, dtype=np.int64) % u)
    else:
        user = gen.choice(u, size=n, p=zipf_weights(u, ua)).astype(np.int64)
    if k is not None and k < num_classes:
        counts = np.bincount(user, minlength=u).astype(np.int64)
        user = _noniid_users(y, counts, k, gen)

    main: _I64 | None = None
    if distribution == "uniform":
        silo = gen.permutation(np.arange(n, dtype=np.int64) % s)
    else:
        ranking = np.argsort(gen.random((u, s)), axis=1).astype(np.int64)  # [user, rank]
        rank = gen.choice(s, size=n, p=zipf_weights(s, sa))
        silo = ranking[user, rank]
        main = ranking[:, 0]
    params: dict[str, float | int | None] = {"max_labels_per_user": k}
    if distribution == "zipf":
        params.update(user_alpha=ua, silo_alpha=sa)
    return Allocation(
        silo=silo,
        user=user,
        num_silos=s,
        num_users=u,
        distribution=distribution,
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
