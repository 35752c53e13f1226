"""A privacy filter for any selector: a user whose next round would pass its budget is retired.

:class:`PrivacyFilter` wraps a selector. Every round's release is a Gaussian mechanism with
noise multiplier at least ``z`` (central DP: exactly ``z``; distributed DP: each party's noise is
provisioned for the protocol's threshold, so the sum holds at least ``z``). A user's epsilon is a
function of ``mu^2 = sum z_t^-2`` over the rounds it was aggregated in, each with the noise really
released (:mod:`fedprivacy.dp.per_user`, by the run's accountant), and the budget is a bound on
it (:func:`~fedprivacy.dp.per_user.mu2_budget`). Before each round, every user whose ``mu^2``
plus one more round at ``z`` (the least the next round can hold) would pass that bound is
**retired**: it is marked unavailable, so the selector cannot pick it. A retirement is permanent
and decided from the ledger and the released noise alone (what was really aggregated, dropouts
counted), never from the data or the model. Rounds whose noise is not given count at ``z``,
which only retires users earlier. :func:`max_rounds` is how many rounds at ``z`` the budget holds.
A round whose aggregated set is announced before it is recorded (overlapped rounds draw round
``t + 1`` while round ``t`` finishes, :meth:`expect_round`) is charged at ``z`` at once, so the
selection drawn ahead never takes a user that round ``t`` took to its budget.

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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp._checks import require_delta, require_positive
from fedprivacy.dp.accounting import AccountantKind
from fedprivacy.dp.per_user import mu2_budget
from fedprivacy.errors import ParameterError
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import Selector
from fedprivacy.participation.units import unit_index

__all__ = [
    "PrivacyFilter",
    "Retirement",
    "budget_markdown",
    "check_budget",
    "filter_summary",
    "max_rounds",
]


def check_budget(
    budget: object, noise_multiplier: float | None, delta: float, accountant: AccountantKind
) -> float:
    """``epsilon_budget``, refused without DP, unless positive, or if one round passes it.

    Examples
    --------
    >>> check_budget(3.0, 5.0, 1e-5, "pld")
    3.0
    >>> check_budget(0.1, 1.0, 1e-5, "pld")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: epsilon_budget: 0.1 holds not even one round at noise \
multiplier 1
    """
    if noise_multiplier is None:
        raise ParameterError("epsilon_budget", "needs a DP mechanism (--dp)")
    value = require_positive("epsilon_budget", budget)
    if max_rounds(value, noise_multiplier, delta, accountant) < 1:
        raise ParameterError(
            "epsilon_budget",
            f"{value:g} holds not even one round at noise multiplier {noise_multiplier:g}",
        )
    return value


def max_rounds(
    budget: float, noise_multiplier: float, delta: float, accountant: AccountantKind
) -> int:
    """The most releases at ``noise_multiplier`` whose epsilon at ``delta`` stays within ``budget``.

    Examples
    --------
    >>> max_rounds(3.0, 5.0, 1e-5, "pld"), max_rounds(3.0, 5.0, 1e-5, "rdp")
    (12, 11)
    """
    z = require_positive("noise_multiplier", noise_multiplier)
    return _rounds_within(mu2_budget(budget, require_delta("delta", delta), accountant), z, budget)


def _rounds_within(mu2: float, z: float, budget: float) -> int:
    """How many releases at ``z`` fit in ``mu2`` (the bound of ``budget``), at most 2^40."""
    rounds = math.floor(mu2 * z**2)
    if rounds > 2**40:
        raise ParameterError(
            "epsilon_budget", f"{budget:g} allows more than 2^40 rounds at z={z:g}"
        )
    return rounds


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
    round_noise : callable, optional
        The noise multiplier really released in each round so far (NaN or missing: counted at
        ``noise_multiplier``).

    Raises
    ------
    ParameterError
        For a bad parameter (a budget that holds not even one round), or a ledger of another N
        than the selector's.
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
        round_noise: Callable[[], Sequence[float]] | None = None,
    ) -> None:
        if ledger.num_users != selector.num_users:
            raise ParameterError("ledger", "has another number of users than the selector")
        super().__init__(selector.num_users, selector.per_round)
        self.selector, self.ledger, self.round_noise = selector, ledger, round_noise
        self.budget, self.accountant = float(budget), accountant
        self.noise_multiplier = require_positive("noise_multiplier", noise_multiplier)
        self.mu2_budget = mu2_budget(budget, require_delta("delta", delta), accountant)
        self.max_rounds = _rounds_within(self.mu2_budget, self.noise_multiplier, budget)
        if self.max_rounds < 1:
            raise ParameterError(
                "epsilon_budget",
                f"{budget:g} holds not even one round at noise multiplier {noise_multiplier:g}",
            )
        self.step = self.noise_multiplier**-2.0
        self.mu2 = np.zeros(selector.num_users)
        self._charged = 0  # ledger rounds already in mu2
        self._expected: tuple[int, NDArray[np.intp]] | None = None  # (round, aggregating)
        self.retired = np.zeros(selector.num_users, dtype=bool)
        self.retirements: list[Retirement] = []

    def _charge(self) -> None:
        """Add the rounds recorded since the last call to every user's ``mu^2``."""
        released = list(self.round_noise()) if self.round_noise is not None else []
        for r in range(self._charged, self.ledger.rounds):
            z = released[r] if r < len(released) else math.nan
            z_t = float(z) if math.isfinite(z) and z > 0 else self.noise_multiplier
            self.mu2[self.ledger.selected(r)] += z_t**-2.0
        self._charged = self.ledger.rounds

    def expect_round(self, aggregating: NDArray[np.intp]) -> None:
        """Charge the round the ledger records next at ``z`` until it is recorded.

        Called during that round, once its aggregated set ``aggregating`` is fixed and before
        the next round is drawn ahead (:meth:`FederatedRun.select_ahead
        <fedprivacy.pipeline.loop.FederatedRun.select_ahead>`).
        """
        self._expected = (self.ledger.rounds, np.asarray(aggregating, dtype=np.intp))

    def _pending(self) -> NDArray[np.float64]:
        """Each user's charge for an announced round the ledger has not recorded yet."""
        pending = np.zeros_like(self.mu2)
        if self._expected is not None and self._expected[0] >= self.ledger.rounds:
            pending[self._expected[1]] = self.step
        else:
            self._expected = None
        return pending

    def _retire(self) -> None:
        """Retire every unit holding a user that one more round would take past the budget."""
        self._charge()
        spent = self.mu2 + self._pending() + self.step > self.mu2_budget
        index = unit_index(self.selector)  # the layout may come after the filter
        now = np.isin(index, index[spent])
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
    >>> f = PrivacyFilter(RandomSelector(4, 2), ParticipationLedger(4), budget=3.0,
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


def budget_markdown(f: PrivacyFilter | None) -> str:
    """The ``## Budget`` section of ``privacy.md``: the cap and the users retired by round.

    Examples
    --------
    >>> print(budget_markdown(None), end="")
    >>> from fedprivacy.participation.selectors import RandomSelector
    >>> f = PrivacyFilter(RandomSelector(4, 2), ParticipationLedger(4), budget=3.0,
    ...                   noise_multiplier=2.0, delta=1e-5, accountant="rdp")
    >>> f.retirements.append(Retirement(3, (0, 1)))
    >>> print(budget_markdown(f).splitlines()[-1])
    - before round 4: users 0, 1
    """
    if f is None:
        return ""
    lines = [
        "",
        "## Budget",
        "",
        f"Epsilon budget {f.budget:g} per user ({f.accountant}): at most {f.max_rounds} "
        f"aggregated round(s) each; {int(f.retired.sum())} user(s) retired.",
    ]
    if f.retirements:
        lines.append("")
    for r in f.retirements:
        lines.append(f"- before round {r.round_index + 1}: users {', '.join(map(str, r.users))}")
    return "\n".join(lines) + "\n"
