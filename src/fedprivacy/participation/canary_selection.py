"""Canary users selected beside the real users, never in their place.

An audit's canaries (:mod:`fedprivacy.fl.canary_users`) must leave the users' run as it was.
:class:`CanarySelection` draws each round's users with their own selector exactly as a run without
canaries draws them (the same availability draws, from the same generator, consumed first), then
``K_c`` of the ``M`` canaries with a selector of the same scheme over the canaries alone, at the
users' rate (``K_c / M = K / N``: :func:`canaries_per_round`), from a generator seeded by the
round's generator's state, which is left as it was.
A canary takes part like a user: in its own batches of ``T`` under Multi-RoundSecAgg, through the
privacy filter (one of its own, reading the canaries' columns of the ledger:
:class:`~fedprivacy.participation.ledger.LedgerSlice`), through secure aggregation beside the
round's users; it is always available, and joins only rounds that aggregate users. So each
user's selection, ledger row, ``T_weak`` and epsilon are those of the run without canaries;
only the model moves with the canaries' directions.

Examples
--------
>>> import numpy as np
>>> from fedprivacy.participation.selectors import make_selector
>>> users, canaries = make_selector("random", 10, 4), make_selector("random", 5, 2)
>>> both = CanarySelection(users, canaries)
>>> chosen = both.select(np.ones(15, dtype=bool), np.zeros(15, dtype=np.int64),
...                      np.random.default_rng(0))
>>> alone = users.select(np.ones(10, dtype=bool), np.zeros(10, dtype=np.int64),
...                      np.random.default_rng(0))
>>> chosen[:4].tolist() == alone.tolist(), bool((chosen[4:] >= 10).all())
(True, True)
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.participation.ledger import LedgerSlice, ParticipationLedger
from fedprivacy.participation.sampling import EveryUser, PoissonSampler
from fedprivacy.participation.selectors import Selector

__all__ = [
    "CanaryAvailability",
    "CanarySelection",
    "Wrapper",
    "canaries_per_round",
    "canary_selection",
]

#: Wraps a selector reading a ledger of its users (a privacy filter, a guard).
Wrapper = Callable[[Selector, ParticipationLedger], Selector]


def canaries_per_round(users: int, per_round: int, canaries: int, unit: int) -> int:
    """``K_c = M K / N``, the canaries a round takes at the users' rate, in whole units.

    Raises
    ------
    ParameterError
        Naming ``canaries``, when ``M K / N`` is not a whole number of units (batches of ``T``).

    Examples
    --------
    >>> canaries_per_round(60, 12, 20, 2)
    4
    >>> canaries_per_round(60, 12, 7, 1)
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: canaries: must be a multiple of 5 (so that a round takes \
M K / N of them, the users' rate, in whole units of 1), got 7
    """
    # M = N T always works: the fewest that do
    step = next(
        m
        for m in range(unit, users * unit + 1, unit)
        if m * per_round % users == 0 and m * per_round // users % unit == 0
    )
    if canaries % step or canaries < step:
        raise ParameterError(
            "canaries",
            f"must be a multiple of {step} (so that a round takes M K / N of them, the users' "
            f"rate, in whole units of {unit}), got {canaries}",
        )
    return canaries * per_round // users


def canary_selection(
    users: Selector, canaries: int, build: Callable[[int, int], Selector]
) -> Selector:
    """``users``, and ``canaries`` canaries beside them when any (``build(M, K_c)``: the scheme's).

    Raises
    ------
    ParameterError
        Naming ``canaries``, as :func:`canaries_per_round`.
    """
    if not canaries:
        return users
    taken = canaries_per_round(users.num_users, users.per_round, canaries, users.unit)
    return CanarySelection(users, build(canaries, taken))


#: What selects a group's users: a selector (``K`` a round) or a sampler (ULDP-FL's).
Part = Selector | EveryUser | PoissonSampler


def _per_round(part: Part) -> int:
    """``K`` of a selector; a sampler's most (its users)."""
    return part.per_round if isinstance(part, Selector) else part.num_users


class CanarySelection(Selector):
    """The users' selection over ``0 .. N-1``, then the canaries' over ``N .. N+M-1``.

    Parameters
    ----------
    selector : Selector, EveryUser or PoissonSampler
        The users' (what :func:`~fedprivacy.participation.units.innermost` finds: the report's
        scheme is the users').
    canaries : Selector, EveryUser or PoissonSampler
        The canaries', of the same scheme at the users' rate (every canary every round beside
        every user; Poisson sampling at the users' rate ``q``).
    """

    name: ClassVar[str] = "canaries"

    def __init__(self, selector: Part, canaries: Part) -> None:
        super().__init__(
            selector.num_users + canaries.num_users, _per_round(selector) + _per_round(canaries)
        )
        self.selector, self.canaries = selector, canaries

    @property
    def first(self) -> int:
        """The first canary: ``N``."""
        return self.selector.num_users

    def describe(self) -> str:
        """The users' selection, with the canaries beside it."""
        users = self.selector.describe() if isinstance(self.selector, Selector) else ""
        return f"{users or self.selector.name} (+{self.canaries.num_users} canaries)"

    def wrap(self, wrapper: Wrapper, ledger: ParticipationLedger, *, canaries: bool) -> Selector:
        """Wrap the users' selector (and the canaries', if ``canaries``), each on its columns.

        Returns the users' wrapper (a filter's retirements, a guard's decisions are the users').
        """
        n = self.first
        assert isinstance(self.selector, Selector) and isinstance(self.canaries, Selector)
        self.selector = wrapper(self.selector, LedgerSlice(ledger, 0, n))
        if canaries:
            self.canaries = wrapper(self.canaries, LedgerSlice(ledger, n, self.num_users))
        return self.selector

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """The users' choice as without canaries, then the canaries' (none in a skipped round)."""
        n = self.first
        users = self.selector.select(avail[:n], freq[:n], rng)
        if not users.size:
            return users
        canaries = self.canaries.select(avail[n:], freq[n:], _beside(rng))
        return np.concatenate([users, canaries + n]).astype(np.intp, copy=False)


def _beside(rng: np.random.Generator) -> np.random.Generator:
    """A generator set by ``rng``'s state, which it leaves as it is.

    The canaries' draws then take nothing from the users' randomness (a ULDP-FL run draws its
    minibatches from the generator of its selection), and a resumed run, whose generator state
    is restored, draws the same canaries.
    """
    digest = hashlib.sha256(repr(rng.bit_generator.state).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))


class CanaryAvailability(AvailabilityModel):
    """The users' availability, drawn as without canaries, and the canaries always available.

    Examples
    --------
    >>> from fedprivacy.participation.availability import BernoulliDropout
    >>> model = CanaryAvailability(BernoulliDropout(3, 0.5), 2)
    >>> model.sample(0, np.random.default_rng(0)).tolist()
    [True, False, False, True, True]
    """

    def __init__(self, users: AvailabilityModel, canaries: int) -> None:
        self.users, self.canaries = users, canaries
        self.num_users = users.num_users + canaries

    def sample(self, round_index: int, rng: np.random.Generator) -> NDArray[np.bool_]:
        """The users' draw, then ``True`` for every canary."""
        drawn = self.users.sample(round_index, rng)
        return np.concatenate([drawn, np.ones(self.canaries, dtype=bool)])
