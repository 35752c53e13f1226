"""Key metrics of a multi-round secure aggregation protocol (Sections 3.2 and 6 of the paper).

Every function that takes a participation matrix ``P`` expects it with one row per round and one
column per user (``P[t, i] == 1`` when the update of user ``i`` was aggregated in round ``t``; a
skipped round is an all-zero row), exactly as :meth:`ParticipationLedger.matrix` returns it.

* :func:`fairness_gap_curve` and :func:`cardinality_curve` are the instantaneous metrics
  ``F^(t)`` and ``C^(t)`` plotted in Figure 3.
* :func:`participation_classes`, :func:`t_strong` and :func:`exposed_users` say what the server
  can learn from linear combinations of the aggregates it has seen (eq. (5)).
* :func:`family_size`, :func:`theorem1_cardinality` and :func:`batch_partition_cardinality` are the
  closed forms of Multi-RoundSecAgg: eq. (8) and Theorem 1.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import linalg as sla
from scipy import stats

from fedprivacy._validation import require_probability_vector
from fedprivacy.errors import ParameterError
from fedprivacy.linalg import exact_rank, pivot_rows
from fedprivacy.participation.ledger import participation_matrix
from fedprivacy.participation.selection_inputs import validate_batch_parameters

__all__ = [
    "batch_partition_cardinality",
    "cardinality_curve",
    "exposed_users",
    "fairness_gap_curve",
    "family_size",
    "participation_classes",
    "t_strong",
    "theorem1_cardinality",
]


# ---------------------------------------------------------------------------------------------
# Instantaneous fairness gap and cardinality (Section 6)
# ---------------------------------------------------------------------------------------------
def fairness_gap_curve(participation: ArrayLike) -> NDArray[np.float64]:
    """Instantaneous aggregation fairness gap ``F^(t)`` after every round.

    ``F^(t) = max_i F_i^(t) - min_i F_i^(t)`` with ``F_i^(t) = (1/(t+1)) sum_{l<=t} P[l, i]``, the
    fraction of rounds ``0 .. t`` in which user ``i`` was aggregated (skipped rounds count in the
    denominator). This is the empirical counterpart of eq. (6).

    Parameters
    ----------
    participation : array_like of 0/1, shape (rounds, users)
        The participation matrix ``P``.

    Returns
    -------
    ndarray of float64, shape (rounds,)
        ``F^(0), ..., F^(rounds-1)``.

    Raises
    ------
    ParameterError
        If ``participation`` is not a 2-D 0/1 matrix with at least one column.

    Examples
    --------
    >>> fairness_gap_curve([[1, 1, 0], [0, 0, 0], [0, 1, 1]]).tolist()
    [1.0, 0.5, 0.3333333333333333]

    """
    p = participation_matrix("participation", participation)
    counts = np.cumsum(p, axis=0, dtype=np.int64)
    gap = counts.max(axis=1) - counts.min(axis=1)
    out: NDArray[np.float64] = gap / np.arange(1, p.shape[0] + 1, dtype=np.float64)
    return out


def cardinality_curve(participation: ArrayLike) -> NDArray[np.float64]:
    """Instantaneous average aggregation cardinality ``C^(t)`` after every round.

    ``C^(t) = (1/(t+1)) sum_{l<=t} ||p^(l)||_0``: the average number of aggregated users per round
    over rounds ``0 .. t``, skipped rounds counting as 0 (the empirical counterpart of eq. (7)).

    Parameters
    ----------
    participation : array_like of 0/1, shape (rounds, users)
        The participation matrix ``P``.

    Returns
    -------
    ndarray of float64, shape (rounds,)

    Examples
    --------
    >>> cardinality_curve([[1, 1, 0], [0, 0, 0], [0, 1, 1]]).tolist()
    [2.0, 1.0, 1.3333333333333333]

    """
    p = participation_matrix("participation", participation)
    per_round = p.sum(axis=1, dtype=np.int64)
    out: NDArray[np.float64] = np.cumsum(per_round) / np.arange(1, p.shape[0] + 1, dtype=np.float64)
    return out


# ---------------------------------------------------------------------------------------------
# What the server can reconstruct (eq. (5))
# ---------------------------------------------------------------------------------------------
def participation_classes(participation: ArrayLike) -> list[NDArray[np.intp]]:
    """Group the users whose participation columns are identical.

    Only users aggregated at least once are included (never-aggregated users contribute nothing to
    any aggregate). Users in the same class always participated together, so no linear (or other)
    function of the aggregates can tell them apart: for Multi-RoundSecAgg the classes are unions of
    batches.

    Parameters
    ----------
    participation : array_like of 0/1, shape (rounds, users)
        The participation matrix ``P``.

    Returns
    -------
    list of ndarray of intp
        One increasing index array per class, the classes ordered by their first user.

    Examples
    --------
    >>> [c.tolist() for c in participation_classes([[1, 1, 0, 0], [0, 0, 1, 0]])]
    [[0, 1], [2]]

    """
    p = participation_matrix("participation", participation)
    used = np.flatnonzero(p.any(axis=0))
    # One byte string per column; a dict keeps the classes in order of their first user.
    packed = np.packbits(p[:, used].T, axis=1)
    groups: dict[bytes, list[int]] = {}
    for user, key in zip(used.tolist(), packed, strict=True):
        groups.setdefault(key.tobytes(), []).append(user)
    return [np.asarray(g, dtype=np.intp) for g in groups.values()]


def t_strong(participation: ArrayLike) -> int | None:
    """Strong multi-round privacy guarantee ``T`` of eq. (5), with disjoint sets ``S_i``.

    Any linear combination the server can form is ``X^T P^T z``: user ``j`` enters it with the
    coefficient ``v_j = (P^T z)_j = <column j of P, z>``. Grouping the users by the value of
    ``v_j`` writes it as ``sum_k a_k sum_{j in S_k} x_j`` with disjoint ``S_k`` (the level sets of
    the non-zero values of ``v``); merging equal coefficients into one set is the decomposition with
    the largest smallest set, so the guarantee is ``T = min over z != 0 of the smallest non-zero
    level set of P^T z``.

    * Users with identical columns get identical coefficients whatever ``z``, so every level set
      is a union of classes (:func:`participation_classes`) and has at least as many users as the
      smallest class.
    * For a generic ``z`` (for instance i.i.d. uniform entries, as in Appendix C) two distinct
      columns give distinct coefficients and a non-zero column a non-zero coefficient with
      probability one, so the level sets are exactly the classes and the bound is attained.

    Hence ``T`` is the size of the smallest class of identical columns among the users aggregated
    at least once. Without disjointness eq. (5) would be vacuous: for ``T < N`` the indicator
    vectors of the ``T``-subsets of the users span every vector, a single user included.

    Parameters
    ----------
    participation : array_like of 0/1, shape (rounds, users)
        The participation matrix ``P``.

    Returns
    -------
    int or None
        ``T``, or ``None`` when nobody was ever aggregated (the server has learned nothing, the
        guarantee holds for every ``T``).

    Examples
    --------
    Batch partitioning with batches ``{0, 1}`` and ``{2, 3}``:

    >>> t_strong([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 1, 1]])
    2
    >>> t_strong([[1, 1, 0], [0, 1, 1], [1, 0, 1]])
    1
    >>> t_strong([[0, 0]]) is None
    True

    """
    classes = participation_classes(participation)
    if not classes:
        return None
    return min(int(c.size) for c in classes)


def _row_basis(matrix: NDArray[np.uint8], rank: int) -> NDArray[np.uint8]:
    """Rows of ``matrix`` forming a basis of its row space (exact ``rank`` known).

    A column-pivoted float QR proposes ``rank`` rows; they are accepted only if their exact rank is
    ``rank``, otherwise the exact greedy :func:`pivot_rows` decides. The answer is always exact.
    """
    rows = np.unique(matrix, axis=0)
    rows = rows[rows.any(axis=1)]
    if rows.shape[0] == rank:
        return np.asarray(rows, dtype=np.uint8)
    _, _, perm = sla.qr(rows.T.astype(np.float64), mode="economic", pivoting=True)
    proposal = rows[np.sort(perm[:rank])]
    if exact_rank(proposal) == rank:
        return np.asarray(proposal, dtype=np.uint8)
    # Float QR on small 0/1 matrices practically never misleads; fall back to exact elimination.
    return np.asarray(rows[pivot_rows(rows)], dtype=np.uint8)


def exposed_users(participation: ArrayLike) -> NDArray[np.intp]:
    """Users whose own update the server can compute from the aggregates (``T = 1`` for them).

    User ``i`` is exposed when ``x_i`` is a linear combination of the aggregates, i.e. when the unit
    vector ``e_i`` lies in the row space of ``P`` over the rationals. The decision is exact:

    1. a user is exposed only if its class of identical columns has size 1 (every vector of the
       row space takes equal values on a class) and it was aggregated at least once;
    2. collapsing every class to one column ``Q`` preserves the answer for such users, and a basis
       of the row space of ``Q`` (at most one row per class) is found and certified with exact
       ranks (:mod:`fedprivacy.linalg`);
    3. if ``Q`` has full column rank every candidate is exposed; otherwise candidate ``c`` is
       exposed iff appending ``e_c`` to the basis leaves its exact rank unchanged.

    Parameters
    ----------
    participation : array_like of 0/1, shape (rounds, users)
        The participation matrix ``P``.

    Returns
    -------
    ndarray of intp
        The exposed users, increasing.

    Examples
    --------
    The three-round example of Section 3.2: every user is exposed.

    >>> exposed_users([[1, 1, 0], [0, 1, 1], [1, 0, 1]]).tolist()
    [0, 1, 2]
    >>> exposed_users([[1, 1, 0], [0, 0, 1]]).tolist()
    [2]

    """
    p = participation_matrix("participation", participation)
    classes = participation_classes(p)
    reps = np.asarray([int(c[0]) for c in classes], dtype=np.intp)
    singletons = [k for k, c in enumerate(classes) if c.size == 1]
    if not singletons:
        return np.empty(0, dtype=np.intp)
    collapsed = p[:, reps]
    rank = exact_rank(collapsed)
    if rank == len(classes):
        exposed = singletons
    else:
        basis = _row_basis(collapsed, rank)
        exposed = []
        unit = np.zeros((1, len(classes)), dtype=np.uint8)
        for k in singletons:
            unit[0, :] = 0
            unit[0, k] = 1
            if exact_rank(np.vstack([basis, unit])) == rank:
                exposed.append(k)
    return np.sort(reps[np.asarray(exposed, dtype=np.intp)])


# ---------------------------------------------------------------------------------------------
# Closed forms of Multi-RoundSecAgg (eq. (8), Theorem 1)
# ---------------------------------------------------------------------------------------------
def _require_probability(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(name, f"must be a real number in [0, 1), got {value!r}")
    out = float(value)
    if not (math.isfinite(out) and 0.0 <= out < 1.0):
        raise ParameterError(name, f"must lie in [0, 1), got {out!r}")
    return out


def family_size(num_users: int, per_round: int, target_privacy: int) -> int:
    """Size ``R_BP = C(N/T, K/T)`` of the batch-partitioning privacy-preserving family, eq. (8).

    Parameters
    ----------
    num_users : int
        Number of users ``N``.
    per_round : int
        Number of users aggregated per round ``K`` (``1 <= K <= N``).
    target_privacy : int
        Batch size ``T`` (``1 <= T <= K``, dividing both ``N`` and ``K``).

    Returns
    -------
    int
        The exact binomial coefficient. Note that Table 1 of the paper prints 91389 for
        ``N=120, K=12, T=3``, whereas ``C(40, 4) = 91390``.

    Raises
    ------
    ParameterError
        If a parameter is out of range or ``T`` does not divide ``N`` and ``K``.

    Examples
    --------
    >>> family_size(120, 12, 3), family_size(120, 12, 4), family_size(8, 4, 2)
    (91390, 4060, 6)

    """
    n, k, t = validate_batch_parameters(num_users, per_round, target_privacy)
    return math.comb(n // t, k // t)


def theorem1_cardinality(
    num_users: int, per_round: int, target_privacy: int, dropout: float
) -> float:
    """Average aggregation cardinality ``C`` of Multi-RoundSecAgg with a common dropout ``p``.

    Theorem 1: ``C = K (1 - sum_{i=N/T-K/T+1}^{N/T} C(N/T, i) q^i (1-q)^(N/T-i))`` with
    ``q = 1 - (1-p)^T`` the probability that a batch is unavailable; the sum is the probability
    that too few batches are available, so ``C = K * P[Binomial(N/T, q) <= N/T - K/T]``, which is
    evaluated with the binomial CDF (no cancellation when the sum is close to 1).

    Parameters
    ----------
    num_users, per_round, target_privacy : int
        ``N``, ``K`` and ``T`` as in :func:`family_size`.
    dropout : float
        Per-round dropout probability ``p`` of every user, in ``[0, 1)``.

    Returns
    -------
    float
        ``C`` in ``[0, K]``.

    Examples
    --------
    >>> theorem1_cardinality(120, 12, 4, 0.0)
    12.0
    >>> round(theorem1_cardinality(8, 4, 2, 0.5), 6)  # 4 * P[Bin(4, 1/4) >= 2]
    1.046875

    """
    n, k, t = validate_batch_parameters(num_users, per_round, target_privacy)
    p = _require_probability("dropout", dropout)
    batches, needed = n // t, k // t
    q = -math.expm1(t * math.log1p(-p))
    return float(k * stats.binom.cdf(batches - needed, batches, q))


def batch_partition_cardinality(
    num_users: int, per_round: int, target_privacy: int, dropout: ArrayLike
) -> float:
    """Exact average aggregation cardinality of batch partitioning with per-user dropouts.

    Batch ``b`` holds users ``b*T .. b*T+T-1`` and is available in a round with probability
    ``a_b = prod_{i in b} (1 - p_i)``, independently across batches and rounds. A round aggregates
    ``K`` users exactly when at least ``K/T`` batches are available and is skipped otherwise, so
    ``C = K * P[#available batches >= K/T]``; the number of available batches is Poisson-binomial
    and its law is computed by the usual ``O((N/T)^2)`` dynamic programme.

    ``C`` depends only on this availability event, not on which available row of the family is
    chosen, so the formula holds for the uniform and for the fairness-aware selection of
    Algorithm 2, for random (or weighted random) selection with ``T = 1`` and for user partitioning
    with ``T = K`` (groups of ``K`` consecutive users). For a common dropout ``p`` it equals
    :func:`theorem1_cardinality`.

    Parameters
    ----------
    num_users, per_round, target_privacy : int
        ``N``, ``K`` and ``T`` as in :func:`family_size`.
    dropout : array_like
        Dropout probability of each user, a scalar or a vector of length ``N``, entries in
        ``[0, 1)``.

    Returns
    -------
    float
        ``C`` in ``[0, K]``.

    Examples
    --------
    >>> batch_partition_cardinality(4, 2, 2, [0.5, 0.5, 0.0, 0.0])  # batch 1 always available
    2.0
    >>> batch_partition_cardinality(4, 4, 2, [0.5, 0.5, 0.0, 0.0])  # needs batch 0: 1/4
    1.0

    """
    n, k, t = validate_batch_parameters(num_users, per_round, target_privacy)
    p = require_probability_vector("dropout", dropout, n)
    batches, needed = n // t, k // t
    avail = np.exp(np.log1p(-p).reshape(batches, t).sum(axis=1))
    law = np.zeros(batches + 1, dtype=np.float64)
    law[0] = 1.0
    for j, a in enumerate(avail.tolist()):
        # After j batches the count lies in 0..j; add batch j.
        law[1 : j + 2] = law[1 : j + 2] * (1.0 - a) + law[0 : j + 1] * a
        law[0] *= 1.0 - a
    return float(k * min(1.0, float(law[needed:].sum())))
