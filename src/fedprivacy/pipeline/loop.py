"""The one federated round loop: availability -> selection -> algorithm -> ledger -> callbacks.

Every federated run of the package goes through :class:`FederatedRun`: selection simulation
(:func:`fedprivacy.pipeline.selection.run_selection`, with
:class:`~fedprivacy.pipeline.algorithm.SelectionOnly`), the selection driven by the real secure
aggregation protocol (:func:`fedprivacy.fl.secure_selection.run_secure_selection`), FedAvg with
any mechanism and aggregator (:class:`fedprivacy.fl.engine.FederatedTraining`) and the ULDP-FL
methods (:func:`fedprivacy.uldp.run.run_uldp`). Per round::

    available = availability.sample(t, rng(t))
    selected  = selector.select(available, ledger frequency, rng(t))
    result    = algorithm.run_round(RoundContext(t, available, selected, final))
    ledger.record(result.aggregated)          # what the server observed
    view = audit.add_round(result.aggregated) # what it can derive from it so far
    callback(result) for each callback        # progress, CSV, checkpoints, ...

The ledger is what every privacy figure of the run is computed from: the server-view metrics
(:mod:`fedprivacy.participation.metrics`) and the per-user epsilons
(:mod:`fedprivacy.dp.per_user`), which compose only the rounds in which a user was aggregated.
The live audit (:class:`~fedprivacy.participation.incremental.IncrementalAudit`) follows the
ledger round by round: :attr:`FederatedRun.view` is what the server can derive after the last
round (exposed users, ``T_strong``, certified ``T_weak`` bounds), for the callbacks' events, CSV
rows and progress lines; the run's final report still certifies over the rationals.

Examples
--------
>>> import numpy as np
>>> from fedprivacy.participation.availability import AlwaysAvailable
>>> from fedprivacy.participation.selectors import RandomSelector
>>> from fedprivacy.pipeline.algorithm import SelectionOnly
>>> rng = np.random.default_rng(0)
>>> run = FederatedRun(RandomSelector(6, 2), AlwaysAvailable(6), SelectionOnly(6),
...                    selection_rng=lambda t: rng, live_audit=True)
>>> results = run.run(3)
>>> run.ledger.rounds, int(run.ledger.frequency.sum())
(3, 6)
>>> run.view.rounds, run.view.t_weak[1] <= 2
(3, True)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.participation.canary_selection import CanarySelection
from fedprivacy.participation.guard import PrivacyGuard
from fedprivacy.participation.incremental import AuditView, IncrementalAudit
from fedprivacy.participation.ledger import LedgerSlice, ParticipationLedger
from fedprivacy.participation.privacy_filter import PrivacyFilter
from fedprivacy.pipeline.algorithm import Algorithm, RoundContext, RoundResult

__all__ = ["FederatedRun", "UserSampler"]

R = TypeVar("R")


class UserSampler(Protocol):
    """What the loop needs of a selector.

    Every :class:`~fedprivacy.participation.selectors.Selector` is one, and so are the samplers
    of :mod:`fedprivacy.participation.sampling`.
    """

    @property
    def num_users(self) -> int:
        """Number of users."""

    def select(
        self,
        available: NDArray[np.bool_],
        frequency: NDArray[np.int64],
        rng: np.random.Generator,
    ) -> NDArray[np.intp]:
        """The sorted users chosen in this round (empty: skipped)."""


class FederatedRun(Generic[R]):
    """Round after round of one algorithm, with one selection and one ledger.

    Parameters
    ----------
    selector : UserSampler
        Who is asked each round.
    availability : AvailabilityModel
        Who is reachable each round.
    algorithm : Algorithm
        What a round does with the selection.
    selection_rng : callable
        ``selection_rng(t)`` is the generator of round ``t``'s availability and selection (one
        shared generator, or one per round seeded by ``(seed, t)`` so that a resumed run
        continues bit for bit).
    ledger : ParticipationLedger, optional
        The ledger to extend (a resumed run's); a new one by default. Round indices continue
        from its number of rounds.
    callbacks : sequence of callable
        Each called as ``callback(result)`` after every round.
    live_audit : bool
        Keep :attr:`view` up to date after every round. Its cost grows as ``rank x classes`` a
        round (:mod:`fedprivacy.participation.incremental`): runs that train (or deploy) turn it
        on, where a round costs far more; selection-only simulation leaves it off and audits
        the whole ledger once at the end.

    Attributes
    ----------
    view : AuditView or None
        The server's view after the last round (None before the first, or without the live
        audit).
    exposed_after_round : list of int
        Users exposed after each round of the ledger (empty without the live audit).

    Raises
    ------
    ParameterError
        If the selector, availability model, algorithm and ledger disagree on the number of
        users.
    """

    def __init__(
        self,
        selector: UserSampler,
        availability: AvailabilityModel,
        algorithm: Algorithm[R],
        *,
        selection_rng: Callable[[int], np.random.Generator],
        ledger: ParticipationLedger | None = None,
        callbacks: Sequence[Callable[[RoundResult[R]], None]] = (),
        live_audit: bool = False,
    ) -> None:
        n = selector.num_users
        if availability.num_users != n:
            raise ParameterError(
                "availability", f"has {availability.num_users} users but the selector has {n}"
            )
        if algorithm.num_users != n:
            raise ParameterError(
                "users", f"the algorithm has {algorithm.num_users} users but the selector has {n}"
            )
        if ledger is None:
            ledger = ParticipationLedger(n)
        elif ledger.num_users != n:
            raise ParameterError("ledger", f"has {ledger.num_users} users but the selector has {n}")
        self.selector = selector
        self.availability = availability
        self.algorithm = algorithm
        self.selection_rng = selection_rng
        self.ledger = ledger
        self.callbacks = tuple(callbacks)
        self._frequency = ledger.frequency_view  # live: record() updates it in place
        # the server's view of the users: canaries' updates are their inserter's own
        users = selector.first if isinstance(selector, CanarySelection) else n
        self.users_ledger = ledger if users == n else LedgerSlice(ledger, 0, users)
        self.audit = IncrementalAudit(users) if live_audit else None
        self._ahead: tuple[int, NDArray[np.bool_], NDArray[np.intp]] | None = None
        self.view: AuditView | None = None
        self.exposed_after_round: list[int] = []
        self.catch_up()

    @property
    def round(self) -> int:
        """The index of the next round."""
        return self.ledger.rounds

    def step(self, *, final: bool = False) -> RoundResult[R]:
        """Run one round; ``final`` tells the algorithm it is the last of a run."""
        t = self.round
        if self._ahead is not None and self._ahead[0] == t:
            _, available, selected = self._ahead
        else:
            rng = self.selection_rng(t)
            available = self.availability.sample(t, rng)
            selected = self.selector.select(available, self._frequency, rng)
        self._ahead = None
        ahead = None if final else self.select_ahead
        ctx = RoundContext(t, available, selected, final, ahead, self._frequency)
        result = self.algorithm.run_round(ctx)
        self.ledger.record(np.asarray(result.aggregated, dtype=np.intp))
        self.catch_up()
        for callback in self.callbacks:
            callback(result)
        return result

    def select_ahead(self, aggregating: Sequence[int]) -> NDArray[np.intp] | None:
        """Draw the next round's availability and selection now; the next :meth:`step` uses them.

        Called by an algorithm during round ``t`` once it knows whom the round will aggregate
        (``aggregating``: the server fixed the set it unmasks) and before the round is over:
        the selection of ``t + 1`` sees the ledger's frequencies with ``aggregating`` counted,
        and ``t + 1``'s generator, so when round ``t`` does aggregate ``aggregating`` it is the
        selection :meth:`step` would have drawn. If round ``t`` then aborts, the next round
        keeps this selection (its nodes were already asked): only a frequency-aware selector
        can differ, by having counted the aborted round.

        Returns ``None`` (nothing is drawn) for a :class:`~fedprivacy.participation.guard.
        PrivacyGuard`, which must see what round ``t`` really aggregated before it lets round
        ``t + 1`` go ahead.
        """
        parts = _parts(self.selector)
        if any(isinstance(part, PrivacyGuard) for part, _ in parts):
            return None
        t = self.round + 1
        users = np.asarray(list(aggregating), dtype=np.intp)
        for part, first in parts:  # charged before the draw, not after the round
            if isinstance(part, PrivacyFilter):
                mine = users[(users >= first) & (users < first + part.num_users)]
                part.expect_round(mine - first)
        frequency = self._frequency.copy()
        frequency[users] += 1
        rng = self.selection_rng(t)
        available = self.availability.sample(t, rng)
        selected = self.selector.select(available, frequency, rng)
        self._ahead = (t, available, selected)
        return selected

    def catch_up(self) -> None:
        """Bring the live audit up to the ledger (also rounds a resumed run loaded into it)."""
        if self.audit is None:
            return
        views = self.audit.catch_up(self.users_ledger)
        self.exposed_after_round += [len(v.exposed) for v in views]
        if views:
            self.view = views[-1]

    def run(
        self, rounds: int, *, progress: Callable[[int], None] | None = None
    ) -> list[RoundResult[R]]:
        """Run ``rounds`` more rounds (at least 0); ``progress(1)`` after each.

        A ``progress`` with a ``status`` attribute (the command line's bars) is also given the
        live audit's view after each round, ``progress.status(view.describe())``, and the
        algorithm's :meth:`~fedprivacy.pipeline.algorithm.Algorithm.progress_note`.
        """
        count = require_int("rounds", rounds, minimum=0)
        results = []
        for i in range(count):
            results.append(self.step(final=i == count - 1))
            if progress is not None:
                self.tell(progress)
        return results

    def tell(self, progress: Callable[[int], None]) -> None:
        """``progress(1)``, after ``progress.status`` of the view and the note where both exist."""
        status = getattr(progress, "status", None)
        if status is not None and self.view is not None:
            note = self.algorithm.progress_note()
            status(self.view.describe() + (f"; {note}" if note else ""))
        progress(1)


def _parts(selector: UserSampler) -> list[tuple[UserSampler, int]]:
    """The selections a round draws and the first user of each: the users' and the canaries'."""
    if isinstance(selector, CanarySelection):
        return [(selector.selector, 0), (selector.canaries, selector.first)]
    return [(selector, 0)]
