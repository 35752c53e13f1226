"""What wraps a FedAvg run's selection: the batch layout, the privacy guard, the privacy filter.

:class:`WrappedSelection` is a part of :class:`~fedprivacy.fl.engine.FederatedTraining` (in process
and deployed): each method replaces the run's selector by a wrapper reading the run's ledger,
before the first round. With canaries (:mod:`fedprivacy.participation.canary_selection`) the
users' selector and the canaries' are wrapped apart, each on its own columns of the ledger: the
guard guards the users, a filter retires canaries as it retires users.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import Aggregator
from fedprivacy.fl.mechanism import Mechanism
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.participation.canary_selection import CanarySelection, Wrapper
from fedprivacy.participation.guard import PrivacyGuard
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.privacy_filter import PrivacyFilter
from fedprivacy.participation.selectors import Selector
from fedprivacy.participation.units import use_layout
from fedprivacy.pipeline.record import RoundRecord

if TYPE_CHECKING:
    from fedprivacy.pipeline.loop import FederatedRun

__all__ = ["WrappedSelection", "budget_filter"]


class WrappedSelection:
    """The selection wrappers of a run (see the module docstring)."""

    selector: Selector
    loop: FederatedRun[RoundRecord]
    ledger: ParticipationLedger
    aggregator: Aggregator
    mechanism: Mechanism
    records: list[RoundRecord]

    def use_layout(self, layout: BatchLayout) -> None:
        """Place the users in batches (or groups) by ``layout``: selection and secure rounds.

        A deployment's layout, drawn by its nodes (:mod:`fedprivacy.flower.messaging.joint_draw`);
        its reference simulation replays it. Call it before the first round.
        """
        if self.ledger.rounds:
            raise ParameterError("batch_layout", "must be set before the first round")
        use_layout(self.selector, layout)
        if isinstance(self.aggregator, SecureAggregator):
            self.aggregator.layout = layout

    def guard_selection(self, mode: str, target: int) -> PrivacyGuard:
        """Run the selection under :class:`~fedprivacy.participation.guard.PrivacyGuard`.

        The guard reads this run's ledger; call it before the first round.
        """
        if self.ledger.rounds:
            raise ParameterError("guard", "must be set before the first round")
        guard = self._wrap(
            lambda s, ledger: PrivacyGuard(s, ledger, target=target, mode=mode), canaries=False
        )
        assert isinstance(guard, PrivacyGuard)
        return guard

    def budget_selection(self, budget: float, delta: float) -> PrivacyFilter:
        """Retire users before their epsilon passes ``budget`` (a :class:`PrivacyFilter`).

        Each past round is charged at the noise it really released, the next one at the
        mechanism's requested noise (the least any round releases), by the mechanism's per-user
        accountant; call it before the first round, and before :meth:`guard_selection`.
        """
        if self.ledger.rounds:
            raise ParameterError("epsilon_budget", "must be set before the first round")
        self.selector, budgeted = budget_filter(
            self.selector, self.ledger, budget, delta, self.mechanism, lambda: self.records
        )
        self.loop.selector = self.selector
        return budgeted

    def _wrap(self, wrapper: Wrapper, *, canaries: bool) -> Selector:
        """Wrap the selection (the users' and, if ``canaries``, the canaries' apart)."""
        if isinstance(self.selector, CanarySelection):
            return self.selector.wrap(wrapper, self.ledger, canaries=canaries)
        self.selector = self.loop.selector = wrapper(self.selector, self.ledger)
        return self.selector

    @property
    def users_ledger(self) -> ParticipationLedger:
        """The users' columns of the ledger: all of it, but the canaries'."""
        return self.loop.users_ledger


def budget_filter(
    selector: Selector,
    ledger: ParticipationLedger,
    budget: float,
    delta: float,
    mechanism: Mechanism,
    records: Callable[[], Sequence[RoundRecord]],
) -> tuple[Selector, PrivacyFilter]:
    """``selector`` under a privacy filter of ``budget``, and the users' filter.

    Rounds are charged at the noise their ``records()`` say they released; with canaries the
    canaries get a filter of their own (a canary retires as a user would).
    """
    z = mechanism.noise_multiplier
    if z is None:
        raise ParameterError("epsilon_budget", "needs a DP mechanism (--dp)")

    def wrapper(s: Selector, columns: ParticipationLedger) -> Selector:
        return PrivacyFilter(
            s,
            columns,
            budget=budget,
            noise_multiplier=z,
            delta=delta,
            accountant=mechanism.accountant,
            round_noise=lambda: [r.noise_multiplier for r in records()],
        )

    if isinstance(selector, CanarySelection):
        users = selector.wrap(wrapper, ledger, canaries=True)
        assert isinstance(users, PrivacyFilter)
        return selector, users
    wrapped = wrapper(selector, ledger)
    assert isinstance(wrapped, PrivacyFilter)
    return wrapped, wrapped
