"""The materialised privacy-preserving family ``B`` of Multi-RoundSecAgg (Algorithms 1 and 2).

:func:`generate_family` is Algorithm 1 of the paper, building the explicit ``R_BP x N`` matrix
``B``; :class:`ExplicitFamilySelector` is Algorithm 2 run literally on that matrix, as the paper's
official code does ("materialised codebook"). Both are exponential in ``K/T`` and serve as the
small-case reference and the benchmark baseline for the implicit
:class:`~fedprivacy.participation.selectors.BatchPartitionSelector`.
"""

from __future__ import annotations

import itertools
import math
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_binary_matrix, require_int
from fedprivacy.errors import ParameterError
from fedprivacy.participation.fairness import DEFAULT_FAIRNESS_RULE, get_fairness_rule
from fedprivacy.participation.selection_inputs import check_available, validate_batch_parameters
from fedprivacy.participation.selectors import Selector


def generate_family(
    num_users: int, per_round: int, target_privacy: int, max_rows: int = 2_000_000
) -> NDArray[np.uint8]:
    """Algorithm 1: the explicit privacy-preserving family ``B`` (``R_BP x N``, entries 0/1).

    The users are partitioned into ``N/T`` batches of ``T`` consecutive users; each row of ``B``
    is the characteristic vector of the union of ``K/T`` batches, in
    :func:`itertools.combinations` order over the batch indices.

    Parameters
    ----------
    num_users, per_round, target_privacy : int
        ``N``, ``K`` and ``T``.
    max_rows : int
        Refuse to build a family with more rows than this (``R_BP`` is about ``1e16`` for
        ``N = 120, K = 12, T = 1``).

    Raises
    ------
    ParameterError
        If the sizes are invalid or ``R_BP`` exceeds ``max_rows``.

    Examples
    --------
    >>> generate_family(4, 2, 1).tolist()
    [[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1]]

    """
    n, k, t = validate_batch_parameters(num_users, per_round, target_privacy)
    limit = require_int("max_rows", max_rows, minimum=1)
    rows = math.comb(n // t, k // t)
    if rows > limit:
        raise ParameterError(
            "max_rows",
            f"the family has C({n // t}, {k // t}) = {rows} rows, more than max_rows = {limit}",
        )
    per = k // t
    combos = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(n // t), per)),
        dtype=np.intp,
        count=rows * per,
    ).reshape(rows, per)
    users = (combos[:, :, None] * t + np.arange(t, dtype=np.intp)).reshape(rows, k)
    family = np.zeros((rows, n), dtype=np.uint8)
    family[np.arange(rows)[:, None], users] = 1
    return family


class ExplicitFamilySelector(Selector):
    """Algorithm 2 (available batch selection) run literally on a materialised family ``B``.

    Each round keeps the rows ``B^(t)`` of ``B`` whose support lies inside the available set and
    skips the round if there are none. Uniform mode (``lambda = 0``) returns a uniform row of
    ``B^(t)``. Fairness-aware mode (``lambda = 1``) returns a uniform row among the candidates of
    ``fairness_rule``: for ``"paper"`` (Algorithm 2 as printed) it draws ``l_min`` uniformly among
    the users of minimum frequency among the users covered by ``B^(t)`` (an available user covered
    by no row of ``B^(t)`` cannot be served), and the candidates are the rows containing
    ``l_min``; for ``"authors"`` (the authors' notebook) the candidates are the rows of minimum
    score, the sum of their users' frequencies.

    Works for any family with rows of equal weight ``K``; build the batch-partitioning family of
    the paper with :meth:`batch_partition`. Memory and time per round are ``O(R x N)``.

    Parameters
    ----------
    family : array_like
        The 0/1 matrix ``B`` (rows x users); every row must have the same weight ``K >= 1``.
    fairness : bool
        Fairness-aware selection (``lambda = 1``) instead of uniform selection (``lambda = 0``).
    fairness_rule : str
        A name of :data:`~fedprivacy.participation.fairness.FAIRNESS_RULES`: ``"paper"``
        (default) or ``"authors"``.

    Raises
    ------
    ParameterError
        If ``family`` is not a non-empty 0/1 matrix with rows of equal, non-zero weight, or
        ``fairness_rule`` is unknown.

    Examples
    --------
    >>> selector = ExplicitFamilySelector.batch_partition(8, 4, 2, True, fairness_rule="authors")
    >>> available = np.array([1, 1, 1, 1, 1, 1, 0, 1], dtype=bool)  # batch 3 is down
    >>> frequency = np.array([3, 0, 1, 1, 0, 4, 0, 0])  # row scores 5, 7, 6 (B^(t) rows 0-2)
    >>> selector.select(available, frequency, np.random.default_rng(0)).tolist()
    [0, 1, 2, 3]

    """

    name: ClassVar[str] = "multiround-explicit"

    def __init__(
        self,
        family: ArrayLike,
        fairness: bool = False,
        fairness_rule: str = DEFAULT_FAIRNESS_RULE,
    ) -> None:
        rule = get_fairness_rule(fairness_rule)
        arr = require_binary_matrix("family", family)
        if arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ParameterError(
                "family", f"must have at least one row and column, got {arr.shape}"
            )
        weights = arr.sum(axis=1, dtype=np.int64)
        if weights[0] == 0 or np.any(weights != weights[0]):
            raise ParameterError("family", "every row must have the same non-zero weight K")
        super().__init__(int(arr.shape[1]), int(weights[0]))
        arr.flags.writeable = False
        self._family = arr
        self._mask = arr.astype(np.bool_)
        self.fairness = bool(fairness)
        self.fairness_rule = rule.name
        self._rule = rule if self.fairness else None

    @classmethod
    def batch_partition(
        cls,
        num_users: int,
        per_round: int,
        target_privacy: int,
        fairness: bool = False,
        max_rows: int = 2_000_000,
        fairness_rule: str = DEFAULT_FAIRNESS_RULE,
    ) -> ExplicitFamilySelector:
        """Build the selector over :func:`generate_family` ``(N, K, T)``."""
        family = generate_family(num_users, per_round, target_privacy, max_rows)
        return cls(family, fairness, fairness_rule)

    @property
    def family(self) -> NDArray[np.uint8]:
        """The materialised family ``B`` (a read-only view)."""
        return self._family

    @property
    def num_rows(self) -> int:
        """Number of rows ``R`` of ``B``."""
        return int(self._family.shape[0])

    def available_rows(self, available: ArrayLike) -> NDArray[np.intp]:
        """Return the indices of the rows of ``B`` inside the available set (``B^(t)``)."""
        return self._rows_inside(check_available(available, self.num_users))

    def _rows_inside(self, avail: NDArray[np.bool_]) -> NDArray[np.intp]:
        return np.flatnonzero(~self._mask[:, ~avail].any(axis=1))

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """Select one row of ``B^(t)`` by Algorithm 2; see :meth:`Selector.select`."""
        rows = self._rows_inside(avail)
        if rows.size == 0:
            return np.empty(0, dtype=np.intp)
        if self._rule is not None:
            rows = rows[self._rule.candidate_rows(self._mask[rows], freq, rng)]
        row = int(rows[rng.integers(rows.size)])
        return np.flatnonzero(self._mask[row]).astype(np.intp, copy=False)
