"""A guard for any selector: no round may let the server isolate a user, or a group below a target.

:class:`PrivacyGuard` wraps a selector. Before a round goes ahead it asks the
:class:`~fedprivacy.participation.incremental.IncrementalAudit` of everything aggregated so far
(read from the run's ledger, so dropouts are counted as they happened) what the server could
derive once the proposed round is aggregated too. The round passes when nobody would be exposed
and a *certified lower bound* on ``T_weak`` stays at or above ``target`` (so ``T_weak >=
target`` is guaranteed, not merely not disproved); ``target = 2`` asks only that nobody is
exposed. The audit's bounds decide first; when they leave the target undecided, the batch
audit's exact search (:func:`~fedprivacy.participation.audit.audit_ledger`) runs on the log with
the round, within ``search_seconds`` a round, and a round it cannot certify in time fails.
Otherwise, by :data:`GUARD_MODES`:

* ``refuse``: the round is skipped (nobody is aggregated);
* ``shrink``: whole units leave the round, one at a time, until it passes (empty: skipped). A
  unit is a batch of Multi-RoundSecAgg (``T`` users, so batches stay whole), a group of the
  partition scheme, or one user otherwise.

Every decision is kept in :attr:`PrivacyGuard.decisions` (the run's events). The guard checks the
round as selected: users who then drop out of secure aggregation shrink what is aggregated, and
the next round's check sees that (the batch policy ``atomic`` keeps batches whole).

Examples
--------
>>> import numpy as np
>>> from fedprivacy.participation.ledger import ParticipationLedger
>>> from fedprivacy.participation.selectors import RandomSelector
>>> ledger = ParticipationLedger(4)
>>> guard = PrivacyGuard(RandomSelector(4, 2), ledger, prime=1048573)
>>> ledger.record([0, 1])
>>> guard.check([1, 2]), guard.check([0])
(True, False)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.config_sections import GUARD_MODES
from fedprivacy.errors import ParameterError
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.exposure import CertificationError
from fedprivacy.participation.incremental import IncrementalAudit
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import Selector
from fedprivacy.participation.units import unit_index

__all__ = ["GUARD_MODES", "GuardDecision", "PrivacyGuard", "guard_summary"]

#: Below this many seconds left, no search is started.
_MIN_SEARCH_SECONDS = 0.01


@dataclass(frozen=True)
class GuardDecision:
    """One round the guard changed.

    Attributes
    ----------
    round_index : int
    proposed : int
        Users the selector proposed.
    aggregated : int
        Users the guard let through (0: the round was refused).
    reason : str
        What the proposed round would have let the server derive.
    """

    round_index: int
    proposed: int
    aggregated: int
    reason: str

    def to_event(self) -> dict[str, object]:
        """The decision as a run event."""
        action = "guard refused" if self.aggregated == 0 else "guard shrank"
        return {
            "event": action,
            "round": self.round_index,
            "proposed": self.proposed,
            "aggregated": self.aggregated,
            "reason": self.reason,
        }


class PrivacyGuard(Selector):
    """A selector whose rounds never let the server isolate fewer than ``target`` users.

    The wrapped scheme keeps its name (:attr:`selector`); ``name`` is ``"guard"``.

    Parameters
    ----------
    selector : Selector
        The scheme whose proposals are checked.
    ledger : ParticipationLedger
        The run's ledger (what was really aggregated so far).
    target : int
        The certified ``T_weak`` every round must keep (at least 2; 2: nobody exposed).
    mode : {"refuse", "shrink"}
        What happens to a round that fails.
    search_seconds : float
        Seconds a round may spend in the exact ``T_weak`` search when the bounds leave the
        target undecided (shared by the shrinking trials; 0: the bounds alone).
    prime : int, optional
        The audit's modulus (random by default; for reproducible tests).

    Raises
    ------
    ParameterError
        If ``target < 2``, ``mode`` is unknown, ``search_seconds < 0``, or the ledger and selector
        disagree on N.
    """

    name: ClassVar[str] = "guard"

    def __init__(
        self,
        selector: Selector,
        ledger: ParticipationLedger,
        *,
        target: int = 2,
        mode: str = "refuse",
        search_seconds: float = 1.0,
        prime: int | None = None,
    ) -> None:
        if mode not in GUARD_MODES:
            raise ParameterError("guard", f"must be one of {', '.join(GUARD_MODES)}, got {mode!r}")
        if ledger.num_users != selector.num_users:
            raise ParameterError("ledger", "has another number of users than the selector")
        super().__init__(selector.num_users, selector.per_round)
        self.selector, self.ledger, self.mode = selector, ledger, mode
        self.target = require_int("target", target, minimum=2)
        if not search_seconds >= 0:
            raise ParameterError("search_seconds", f"must be >= 0, got {search_seconds!r}")
        self.search_seconds = float(search_seconds)
        self._deadline = 0.0
        self.audit = IncrementalAudit(selector.num_users, prime=prime)
        self.decisions: list[GuardDecision] = []

    def _failure(self, users: ArrayLike) -> str | None:
        """Why aggregating ``users`` next breaks the guarantee, or None when it keeps it."""
        view = self.audit.peek(users)
        if view.exposed:
            return f"would expose {len(view.exposed)} user(s)"
        lower, upper = view.t_weak
        if lower is None or upper is None or lower >= self.target:
            return None
        if upper < self.target:
            return f"T_weak would fall to at most {upper} < {self.target}"
        searched = self._searched_lower(users)
        if searched is not None and searched >= self.target:
            return None
        proved = lower if searched is None else max(lower, searched)
        return f"T_weak >= {self.target} not certified (only >= {proved})"

    def _searched_lower(self, users: ArrayLike) -> int | None:
        """The batch audit's certified lower bound with ``users`` as the next round.

        Within what is left of this round's search time (None: no time left).
        """
        left = self._deadline - time.perf_counter()
        if left <= _MIN_SEARCH_SECONDS:
            return None
        trial = ParticipationLedger(self.num_users)
        for r in range(self.ledger.rounds):
            trial.record(self.ledger.selected(r))
        trial.record(users)
        try:
            return audit_ledger(trial, time_limit=left).t_weak.lower
        except CertificationError:
            return None

    def check(self, users: ArrayLike) -> bool:
        """Whether aggregating ``users`` next keeps the guarantee."""
        self.audit.catch_up(self.ledger)  # what was really aggregated
        self._deadline = time.perf_counter() + self.search_seconds
        return self._failure(users) is None

    def _shrunk(self, users: NDArray[np.intp]) -> NDArray[np.intp]:
        """Drop whole units until the round passes.

        The largest round that one drop makes pass, else the first unit is dropped and the rest
        tried again (empty: nothing passes).
        """
        index = unit_index(self.selector)  # the layout may come after the guard
        while users.size:
            units = np.unique(index[users])
            trials = [users[index[users] != u] for u in units.tolist()]
            passing = [t for t in trials if t.size and self._failure(t) is None]
            if passing:
                return max(passing, key=lambda t: t.size)
            users = trials[0]
        return users

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """The selector's proposal if it passes, else refused or shrunk (see the module)."""
        self.audit.catch_up(self.ledger)  # what was really aggregated
        self._deadline = time.perf_counter() + self.search_seconds
        proposed = self.selector.select(avail, freq, rng)
        reason = self._failure(proposed) if proposed.size else None
        if reason is None:
            return proposed
        chosen = self._shrunk(proposed) if self.mode == "shrink" else proposed[:0]
        self.decisions.append(
            GuardDecision(self.ledger.rounds, int(proposed.size), int(chosen.size), reason)
        )
        return chosen


def guard_summary(guard: PrivacyGuard) -> dict[str, object]:
    """What a run's summary says of its guard: the setting, the counts and every decision.

    Examples
    --------
    >>> from fedprivacy.participation.selectors import RandomSelector
    >>> guard = PrivacyGuard(RandomSelector(4, 2), ParticipationLedger(4), mode="shrink")
    >>> guard_summary(guard)["rounds_changed"]
    0
    """
    decisions = guard.decisions
    return {
        "mode": guard.mode,
        "target": guard.target,
        "rounds_changed": len(decisions),
        "rounds_refused": sum(d.aggregated == 0 for d in decisions),
        "first_round_changed": decisions[0].round_index if decisions else None,
        "events": [d.to_event() for d in decisions],
    }
