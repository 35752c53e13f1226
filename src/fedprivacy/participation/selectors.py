"""User selection strategies: which available users the server aggregates in each round.

Implements the three baselines of Section 3.3 of "Securing Secure Aggregation: Mitigating
Multi-Round Privacy Leakage in Federated Learning" (random, weighted random and user partitioning)
and Multi-RoundSecAgg (Section 4 and Algorithms 1 and 2 of Appendix D), the latter without ever
materialising the privacy-preserving family ``B`` (see :mod:`fedprivacy.participation.family` for
the literal, materialised version).

Every selector returns the sorted indices of the selected users, or an empty array when the round
is skipped, so that ``||p^(t)||_0`` is always ``0`` or ``K``.

The fairness-aware step of Multi-RoundSecAgg is a
:class:`~fedprivacy.participation.fairness.FairnessRule` chosen by name from
:data:`~fedprivacy.participation.fairness.FAIRNESS_RULES`: ``"paper"`` (Algorithm 2 as printed:
a row containing the least-served user) or ``"authors"`` (the authors' published code: the row of
least total participation).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError
from fedprivacy.participation.fairness import (
    DEFAULT_FAIRNESS_RULE,
    FairnessRule,
    fewest,
    get_fairness_rule,
    sample,
    select_blocks,
)
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.participation.selection_inputs import (
    check_available,
    check_frequency,
    check_sizes,
    validate_batch_parameters,
)


class Selector(ABC):
    """A user selection algorithm ``A^(t)`` (equation (3) of the paper).

    Parameters
    ----------
    num_users : int
        Number of users ``N`` (at least 1).
    per_round : int
        Number of users ``K`` aggregated in each non-skipped round, ``1 <= K <= N``.

    Attributes
    ----------
    name : str
        Scheme name, as accepted by :func:`make_selector`.
    label : str
        How reports name the scheme (:meth:`describe` adds its parameters).
    batched : bool
        Whether the scheme partitions the users into batches of ``T`` (it takes
        ``target_privacy`` and ``fairness``).
    unit : int
        The fewest users the server ever sees aggregated together: 1, unless the scheme
        aggregates whole units (a group of ``K``, batches of ``T``).
    num_users : int
        ``N``.
    per_round : int
        ``K``.

    """

    name: ClassVar[str]
    label: ClassVar[str] = ""
    batched: ClassVar[bool] = False
    unit: int = 1

    @classmethod
    def from_options(
        cls,
        num_users: int,
        per_round: int,
        target_privacy: int | None,
        fairness: bool,
        fairness_rule: str,
    ) -> Selector:
        """The selector of :func:`make_selector`'s options (``N`` and ``K`` by default)."""
        return cls(num_users, per_round)

    def describe(self) -> str:
        """How reports name this selection (:attr:`label`, else :attr:`name`; its parameters)."""
        return self.label or self.name

    def __init__(self, num_users: int, per_round: int) -> None:
        self.num_users, self.per_round = check_sizes(num_users, per_round)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_users={self.num_users}, per_round={self.per_round})"

    def select(
        self,
        available: NDArray[np.bool_],
        frequency: NDArray[np.int64],
        rng: np.random.Generator,
    ) -> NDArray[np.intp]:
        """Choose the users aggregated in this round.

        Parameters
        ----------
        available : numpy.ndarray of bool, shape (num_users,)
            ``True`` where the user is available in this round (``u^(t)``).
        frequency : numpy.ndarray of int, shape (num_users,)
            How many times each user was aggregated before this round (``f^(t-1)``).
        rng : numpy.random.Generator
            Source of randomness.

        Returns
        -------
        numpy.ndarray of intp
            The sorted, distinct indices of the ``K`` selected users, or an empty array if the
            round is skipped.

        Raises
        ------
        ParameterError
            If ``available`` or ``frequency`` does not have length ``num_users``.

        """
        avail = check_available(available, self.num_users)
        freq = check_frequency(frequency, self.num_users)
        return self._choose(avail, freq, rng)

    @abstractmethod
    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """:meth:`select` on checked inputs: the subclass's selection rule."""


class RandomSelector(Selector):
    """Random selection: ``K`` available users uniformly at random; skip if fewer are available."""

    name: ClassVar[str] = "random"
    label: ClassVar[str] = "Random selection"

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """Select ``K`` available users uniformly at random; see :meth:`Selector.select`."""
        idx = np.flatnonzero(avail)
        if idx.size < self.per_round:
            return np.empty(0, dtype=np.intp)
        return np.sort(sample(idx, self.per_round, rng)).astype(np.intp, copy=False)


class WeightedRandomSelector(Selector):
    """Random weighted selection: the ``K`` available users of minimum participation frequency.

    Ties at the threshold frequency are broken uniformly at random. The round is skipped if fewer
    than ``K`` users are available. Runs in time linear in ``N`` (a partial sort, no full sort).
    """

    name: ClassVar[str] = "weighted-random"
    label: ClassVar[str] = "Weighted random selection"

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """Select the ``K`` least-aggregated available users; see :meth:`Selector.select`."""
        idx = np.flatnonzero(avail)
        if idx.size < self.per_round:
            return np.empty(0, dtype=np.intp)
        return np.sort(fewest(idx, freq[idx], self.per_round, rng)).astype(np.intp, copy=False)


class UnitSelector(Selector):
    """A selection of whole *units* of :attr:`unit` users (batches, groups), by a layout.

    Unit ``g`` holds the users at positions ``g*unit .. g*unit+unit-1`` of :attr:`layout`
    (:class:`~fedprivacy.participation.layout.BatchLayout`): by default the users' ids, so
    unit ``u // unit``; a deployment lays the users out by a seed its nodes drew
    (:func:`~fedprivacy.participation.units.use_layout`), so that no server picks anyone's
    unit mates.
    """

    unit: int
    layout: BatchLayout | None = None

    @property
    def num_units(self) -> int:
        """``N / unit``."""
        return self.num_users // self.unit

    @property
    def units(self) -> NDArray[np.intp]:
        """User indices of each unit, shape ``(N/unit, unit)``."""
        order = np.arange(self.num_users, dtype=np.intp)
        if self.layout is not None:
            order = self.layout.permutation()
        return order.reshape(self.num_units, self.unit)

    def _select_units(
        self,
        avail: NDArray[np.bool_],
        freq: NDArray[np.int64],
        count: int,
        rule: FairnessRule | None,
        rng: np.random.Generator,
    ) -> NDArray[np.intp]:
        """:func:`~fedprivacy.participation.fairness.select_blocks` in the layout's order."""
        if self.layout is None:
            return select_blocks(avail, freq, self.unit, count, rule, rng)
        order = self.layout.permutation()
        picked = select_blocks(avail[order], freq[order], self.unit, count, rule, rng)
        return np.sort(order[picked]).astype(np.intp, copy=False)


class UserPartitionSelector(UnitSelector):
    """User partitioning (grouping): ``N/K`` fixed groups of ``K`` consecutive users.

    Group ``g`` holds users ``g*K .. g*K+K-1``. A group is available if all its users are. Among
    the available groups the server picks one containing a user of minimum frequency among the
    users of available groups (that user drawn uniformly among the ties); the round is skipped if
    no group is available.

    Raises
    ------
    ParameterError
        If ``per_round`` does not divide ``num_users``.

    """

    name: ClassVar[str] = "partition"
    label: ClassVar[str] = "User partition"

    def __init__(self, num_users: int, per_round: int) -> None:
        super().__init__(num_users, per_round)
        if self.num_users % self.per_round:
            raise ParameterError(
                "per_round",
                f"must divide num_users = {self.num_users} for user partitioning, "
                f"got {self.per_round}",
            )
        self.unit = self.per_round

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """Select one fully available group; see :meth:`Selector.select`."""
        return self._select_units(avail, freq, 1, get_fairness_rule(DEFAULT_FAIRNESS_RULE), rng)


class BatchPartitionSelector(UnitSelector):
    """Multi-RoundSecAgg (Algorithms 1 and 2 of the paper) without materialising the family.

    The users are partitioned into ``N/T`` batches of ``T`` consecutive users (batch ``b`` holds
    users ``b*T .. b*T+T-1``); each round aggregates the union of ``K/T`` batches, so the rows of
    the implicit privacy-preserving family ``B`` are exactly the ``C(N/T, K/T)`` unions of ``K/T``
    batches. A batch is available iff all its users are, and a row of ``B`` lies inside the
    available set iff all its batches are available, so the available sub-family ``B^(t)`` is
    the set of unions of ``K/T`` available batches. The round is skipped if fewer than ``K/T``
    batches are available (``B^(t)`` is empty).

    * Uniform mode (``fairness=False``, ``lambda = 0``): ``K/T`` available batches uniformly at
      random without replacement, i.e. a uniform row of ``B^(t)``.
    * Fairness-aware mode (``fairness=True``, ``lambda = 1``), by ``fairness_rule``:

      - ``"paper"`` (default; Algorithm 2 as printed): ``l_min`` is a user of minimum frequency
        among the users of the available batches (drawn uniformly among the ties); its batch is
        selected together with ``K/T - 1`` batches drawn uniformly without replacement from the
        other available batches, i.e. a uniform row of ``B^(t)`` containing ``l_min``.
      - ``"authors"`` (the authors' published code): each row of ``B^(t)`` scores the sum of its
        users' frequencies and a row of minimum score is taken, uniformly among ties; as a row's
        score is the sum of its batches' scores, that is the ``K/T`` available batches of least
        total participation, ties at the threshold broken uniformly.

    The paper writes ``l_min = argmin_{i in U^(t)} f_i``; here ``l_min`` is taken among the users
    covered by some row of ``B^(t)`` (the users of available batches), since an available user
    whose batch is not fully available lies in no row of ``B^(t)``.

    Each call costs ``O(N)`` vectorised work (about a millisecond at ``N = 10^6``).

    Parameters
    ----------
    num_users : int
        Number of users ``N``.
    per_round : int
        Number of users ``K`` per round.
    target_privacy : int
        Multi-round privacy guarantee ``T`` (batch size), ``1 <= T <= K``, dividing both ``K`` and
        ``N``.
    fairness : bool
        Fairness-aware selection (``lambda = 1``) instead of uniform selection (``lambda = 0``).
    fairness_rule : str
        The rule of fairness-aware selection, a name of
        :data:`~fedprivacy.participation.fairness.FAIRNESS_RULES`: ``"paper"`` (default) or
        ``"authors"``; checked but unused when ``fairness`` is false.

    Raises
    ------
    ParameterError
        If the parameters violate the conditions above, or ``fairness_rule`` is unknown.

    Examples
    --------
    >>> selector = BatchPartitionSelector(8, 4, 2, fairness=True, fairness_rule="authors")
    >>> available = np.array([1, 1, 1, 1, 1, 1, 0, 1], dtype=bool)  # batch 3 is down
    >>> frequency = np.array([3, 0, 1, 1, 0, 4, 0, 0])  # batch scores 3, 2, 4, 0
    >>> selector.select(available, frequency, np.random.default_rng(0)).tolist()
    [0, 1, 2, 3]

    """

    name: ClassVar[str] = "multiround"
    label: ClassVar[str] = "Multi-RoundSecAgg"
    batched: ClassVar[bool] = True

    def __init__(
        self,
        num_users: int,
        per_round: int,
        target_privacy: int,
        fairness: bool = False,
        fairness_rule: str = DEFAULT_FAIRNESS_RULE,
    ) -> None:
        n, k, t = validate_batch_parameters(num_users, per_round, target_privacy)
        rule = get_fairness_rule(fairness_rule)
        super().__init__(n, k)
        self.target_privacy = t
        self.fairness = bool(fairness)
        self.fairness_rule = rule.name
        self._rule = rule if self.fairness else None
        self.unit = t
        self.batches_per_round = k // t

    @classmethod
    def from_options(
        cls,
        num_users: int,
        per_round: int,
        target_privacy: int | None,
        fairness: bool,
        fairness_rule: str,
    ) -> Selector:
        """All five options; ``target_privacy`` is required."""
        if target_privacy is None:
            raise ParameterError(
                "target_privacy", "is required for the 'multiround' scheme (an integer in [1, K])"
            )
        return cls(num_users, per_round, target_privacy, fairness, fairness_rule)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_users={self.num_users}, per_round={self.per_round}, "
            f"target_privacy={self.target_privacy}, fairness={self.fairness}, "
            f"fairness_rule={self.fairness_rule!r})"
        )

    def describe(self) -> str:
        """``Multi-RoundSecAgg, T=4`` (and the fairness rule when it is not the paper's).

        Examples
        --------
        >>> BatchPartitionSelector(12, 4, 2, True, "authors").describe()
        'Multi-RoundSecAgg, T=2, authors rule'
        """
        rule = self.fairness and self.fairness_rule != DEFAULT_FAIRNESS_RULE
        return f"{self.label}, T={self.target_privacy}" + (
            f", {self.fairness_rule} rule" if rule else ""
        )

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """Select the union of ``K/T`` fully available batches; see :meth:`Selector.select`."""
        return self._select_units(avail, freq, self.batches_per_round, self._rule, rng)


#: The selector class of every scheme name accepted by :func:`make_selector`.
SELECTORS: Registry[type[Selector]] = Registry("scheme")
for _selector in (
    RandomSelector,
    WeightedRandomSelector,
    UserPartitionSelector,
    BatchPartitionSelector,
):
    SELECTORS.register(_selector.name, _selector)

#: Names accepted by :func:`make_selector` (the built-in schemes of :data:`SELECTORS`).
SCHEMES: tuple[str, ...] = tuple(SELECTORS)


def make_selector(
    scheme: str,
    num_users: int,
    per_round: int,
    target_privacy: int | None = None,
    fairness: bool = False,
    fairness_rule: str = DEFAULT_FAIRNESS_RULE,
) -> Selector:
    """Build a selector by scheme name.

    Parameters
    ----------
    scheme : str
        A name of :data:`SELECTORS`: ``"random"``, ``"weighted-random"``, ``"partition"``,
        ``"multiround"`` (:data:`SCHEMES`) or a :class:`Selector` subclass added by
        ``SELECTORS.register``.
    num_users, per_round : int
        ``N`` and ``K``.
    target_privacy : int, optional
        ``T``; required for ``"multiround"`` and ignored otherwise.
    fairness : bool
        Fairness-aware selection for ``"multiround"``; ignored otherwise.
    fairness_rule : str
        Which fairness-aware selection, a name of
        :data:`~fedprivacy.participation.fairness.FAIRNESS_RULES` (``"paper"``, the default, or
        ``"authors"``); always checked, used by ``"multiround"`` with ``fairness``.

    Raises
    ------
    ParameterError
        For an unknown scheme or fairness rule (the message lists the valid ones), a missing
        ``target_privacy``, or invalid sizes.

    Examples
    --------
    >>> make_selector("multiround", 12, 4, target_privacy=2)  # doctest: +NORMALIZE_WHITESPACE
    BatchPartitionSelector(num_users=12, per_round=4, target_privacy=2, fairness=False,
                           fairness_rule='paper')
    >>> make_selector("multiround", 12, 4, 2, fairness=True, fairness_rule="authors").fairness_rule
    'authors'
    >>> try:
    ...     make_selector("greedy", 12, 4)
    ... except ParameterError as exc:
    ...     print(exc)
    scheme: must be one of random, weighted-random, partition, multiround; got 'greedy'

    """
    kind = SELECTORS.lookup(scheme)
    rule = get_fairness_rule(fairness_rule).name
    return kind.from_options(num_users, per_round, target_privacy, fairness, rule)
