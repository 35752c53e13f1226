"""A privacy filter for any selector: a user whose next round would pass its budget is retired.

:class:`PrivacyFilter` wraps a selector. Every round's release is a Gaussian mechanism with
noise multiplier at least ``z`` (central DP: exactly ``z``; distributed DP: each party's noise is
provisioned for the protocol's threshold, so the sum holds at least ``z``). A user aggregated in
``n`` rounds therefore has ``sum z_t^-2 <= n / z^2``, and its epsilon is at most that of ``n``
releases at ``z`` (:func:`~fedprivacy.dp.per_user.per_user_epsilons`, by the run's accountant).
:func:`max_rounds` is the largest ``n`` within the budget; before each round, every user already
aggregated that many times is **retired**: it is marked unavailable, so the selector cannot pick
it. A retirement is permanent and decided from the ledger alone (what was really aggregated,
dropouts counted), never from the data or the model.

Why the guarantee survives the adaptivity: the rounds a user takes part in are chosen adaptively,
but each is a Gaussian mechanism of noise at least ``z``, and the filter stops the user before
``sum z_t^-2`` passes ``n_max / z^2``. For RDP, every order's sum then stays within the budget's
curve, which is Feldman and Zrnic's individual RDP filter (2021, Thm. 3.1); for the exact PLD
value, a bound on ``sum mu_t^2`` of adaptively chosen Gaussian mechanisms is ``mu``-GDP (Smith and
Thakurta 2022, fully adaptive composition for Gaussian DP; Koskela et al. 2023 for individual
filters). Rounds a user is not in do not depend on its data.

A **unit** retires as a whole: a batch of Multi-RoundSecAgg (so ``T_weak >= T`` still holds:
the ledger stays a union of whole batches), a group of the partition scheme, or one user.

Examples
--------
>>> from fedprivacy.participation.ledger import ParticipationLedger
>>> from fedprivacy.participation.selectors import RandomSelector
>>> ledger = ParticipationLedger(4)
>>> f = PrivacyFilter(RandomSelector(4, 2), ledger, budget=2.0, noise_multiplier=5.0,
...                   delta=1e-5, accountant="pld")
>>> f.max_rounds
6
>>> rng = np.random.default_rng(0)
>>> for _ in range(20):
...     ledger.record(f.select(np.ones(4, dtype=bool), ledger.frequency, rng))
>>> ledger.frequency.tolist(), [r.users for r in f.retirements]
([6, 6, 6, 6], [(3,), (1,), (0, 2)])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp._checks import require_delta, require_positive
from fedprivacy.dp.accounting import AccountantKind
from fedprivacy.dp.per_user import per_user_epsilons
from fedprivacy.errors import ParameterError
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import Selector, unit_size

__all__ = ["PrivacyFilter", "Retirement", "filter_summary", "max_rounds"]


def max_rounds(
    budget: float, noise_multiplier: float, delta: float, accountant: AccountantKind
) -> int:
    """The most releases at ``noise_multiplier`` whose epsilon at ``delta`` stays within ``budget``.

    Examples
    --------
    >>> max_rounds(3.0, 5.0, 1e-5, "pld"), max_rounds(3.0, 5.0, 1e-5, "rdp")
    (12, 11)
    """
    e = require_positive("epsilon_budget", budget)
    z = require_positive("noise_multiplier", noise_multiplier)
    d = require_delta("delta", delta)

    def within(n: int) -> bool:
        return bool(per_user_epsilons([n], z, d, accountant)[0] <= e)

    hi = 1
    while within(hi):
        if hi > 2**40:
            raise ParameterError("epsilon_budget", f"{e:g} allows more than 2^40 rounds at z={z:g}")
        hi *= 2
    lo = hi // 2  # within(lo) (0 is within any budget), not within(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if within(mid) else (lo, mid)
    return lo


@dataclass(frozen=True)
class Retirement:
    """Users retired before one round (their next round would pass the budget).

    Attributes
    ----------
    round_index : int
        The round (from 0) they were first kept out of.
    users : tuple of int
        Whole units: a batch or group retires with its user that reached the budget.
    """

    round_index: int
    users: tuple[int, ...]

    def to_event(self) -> dict[str, object]:
        """The run's event for it."""
        return {"event": "retired", "round": self.round_index, "users": list(self.users)}


class PrivacyFilter(Selector):
    """A selector that never takes a user past ``budget`` (see the module).

    The wrapped scheme keeps its name (:attr:`selector`); ``name`` is ``"privacy-filter"``.

    Parameters
    ----------
    selector : Selector
        The scheme that picks among the users still within budget.
    ledger : ParticipationLedger
        The run's ledger (what was really aggregated so far).
    budget : float
        Epsilon no user may pass, > 0.
    noise_multiplier : float
        The least noise multiplier of any round's release.
    delta : float
        The per-user delta of ``budget``.
    accountant : {"rdp", "pld"}
        The run's per-user accountant (the report's).

    Raises
    ------
    ParameterError
        For a bad parameter, or a ledger of another N than the selector's.
    """

    name: ClassVar[str] = "privacy-filter"

    def __init__(
        self,
        selector: Selector,
        ledger: ParticipationLedger,
        *,
        budget: float,
        noise_multiplier: float,
        delta: float,
        accountant: AccountantKind,
    ) -> None:
        if ledger.num_users != selector.num_users:
            raise ParameterError("ledger", "has another number of users than the selector")
        super().__init__(selector.num_users, selector.per_round)
        self.selector, self.ledger = selector, ledger
        self.budget, self.accountant = float(budget), accountant
        self.max_rounds = max_rounds(budget, noise_multiplier, delta, accountant)
        self.unit = unit_size(selector)
        self.retired = np.zeros(selector.num_users, dtype=bool)
        self.retirements: list[Retirement] = []

    def _retire(self) -> None:
        """Retire every unit holding a user at :attr:`max_rounds` (recorded once)."""
        spent = self.ledger.frequency >= self.max_rounds
        units = np.unique(np.flatnonzero(spent) // self.unit)
        now = np.zeros_like(self.retired)
        for u in units.tolist():
            now[u * self.unit : (u + 1) * self.unit] = True
        new = np.flatnonzero(now & ~self.retired)
        if new.size:
            self.retired |= now
            self.retirements.append(Retirement(self.ledger.rounds, tuple(new.tolist())))

    def _choose(
        self, avail: NDArray[np.bool_], freq: NDArray[np.int64], rng: np.random.Generator
    ) -> NDArray[np.intp]:
        """The selector's choice among the users not retired."""
        self._retire()
        return self.selector.select(avail & ~self.retired, freq, rng)


def filter_summary(f: PrivacyFilter) -> dict[str, object]:
    """What a run's summary says of its filter: the budget, the cap and the retirements.

    Examples
    --------
    >>> from fedprivacy.participation.selectors import RandomSelector
    >>> f = PrivacyFilter(RandomSelector(4, 2), ParticipationLedger(4), budget=2.0,
    ...                   noise_multiplier=2.0, delta=1e-5, accountant="rdp")
    >>> filter_summary(f)["users_retired"]
    0
    """
    return {
        "epsilon_budget": f.budget,
        "accountant": f.accountant,
        "max_rounds_per_user": f.max_rounds,
        "users_retired": int(f.retired.sum()),
        "retired": [{"round": r.round_index, "users": list(r.users)} for r in f.retirements],
    }
