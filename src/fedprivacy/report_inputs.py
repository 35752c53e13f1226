"""Where a privacy report's epsilons come from: the ledger, and a mechanism or one named only.

:func:`fedprivacy.report.privacy_report` composes every run's epsilons from its participation
ledger (:class:`LedgerEpsilons`), with a :class:`~fedprivacy.fl.mechanism.Mechanism` or a
:class:`Method` that only names one. :mod:`fedprivacy.report` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.accountants import AccountantKind
from fedprivacy.participation.selectors import RandomSelector, Selector, UnitSelector
from fedprivacy.participation.units import innermost

__all__ = [
    "HIDDEN_BATCH",
    "HIDDEN_SAMPLE",
    "NOT_HIDDEN",
    "Hidden",
    "LedgerEpsilons",
    "Method",
    "hidden_selection",
]


@dataclass(frozen=True)
class Method:
    """A mechanism the report only names: a ULDP-FL method.

    It has what the report reads of a :class:`~fedprivacy.fl.mechanism.Mechanism`.

    Attributes
    ----------
    name : str
        How the report names it (``ULDP-AVG-s``).
    noise_multiplier : float or None
        ``sigma`` (None: no DP).
    clip : float or None
        ``C``.
    who_sees_what : str
        A caveat under DP (empty: none).
    adds_noise_in_aggregation : bool
        Whether the parties add the noise inside secure aggregation.
    accountant : str
        The accountant of its epsilons.
    noise_mode : str or None
        How the parties' noise survives dropouts (None: the parties add none in aggregation).

    Examples
    --------
    >>> Method("DEFAULT", None, 1.0).noise_multiplier is None
    True
    """

    name: str
    noise_multiplier: float | None
    clip: float | None
    who_sees_what: str = ""
    adds_noise_in_aggregation: bool = False
    accountant: AccountantKind = "rdp"
    noise_mode: str | None = None


@dataclass(frozen=True)
class LedgerEpsilons:
    """Per-user epsilons the report composes from the ledger (every algorithm and deployment).

    Each user composes only the rounds it was aggregated in, without amplification by
    sub-sampling; the report's epsilon is the largest. Whoever sees only the released models
    gets the amplified epsilon of a hidden Poisson sample (``sampling_rate``).

    Attributes
    ----------
    participation : ndarray of bool, shape (rounds, users)
        The ledger's matrix.
    round_noise : ndarray of float, shape (rounds,), optional
        The noise multiplier of each round's released aggregate (NaN where nothing was
        released); required when the mechanism's noise varies between rounds (distributed DP).
    wrap_log_probability : ndarray of float, shape (rounds,), optional
        Natural log of each round's wrap-around bound (distributed DP; NaN where none).
    sampling_rate : float, optional
        ``q`` of a Poisson user sample hidden from whoever sees only the released models
        (ULDP-FL's ``-s`` methods): their epsilon is the sub-sampled Gaussian mechanism over
        the released rounds. None: no amplification is claimed.
    group_epsilon : float, optional
        ULDP-GROUP-k: every user's epsilon by group privacy of the silos' record-level DP-SGD
        (:func:`~fedprivacy.uldp.group_dp.group_epsilon`), its own rule: its rounds are not
        per-user Gaussian mechanisms.
    batches : ndarray of int, shape (batches, T), optional
        The users of each batch, when every user's batch is uniformly random and hidden from
        whoever sees only the released models (Multi-RoundSecAgg): their epsilon is random
        allocation over the batch schedule (:func:`~fedprivacy.dp.allocation.allocation_epsilon`;
        :func:`hidden_selection` decides). None: no amplification is claimed.
    users : int, optional
        The users whose epsilons the report states: the ledger's first ``users`` columns (the
        others are canaries, :mod:`fedprivacy.fl.canary_users`); None: every column.

    Examples
    --------
    >>> LedgerEpsilons(np.ones((2, 3), dtype=bool)).participation.shape
    (2, 3)
    """

    participation: NDArray[np.bool_]
    round_noise: NDArray[np.float64] | None = None
    wrap_log_probability: NDArray[np.float64] | None = None
    sampling_rate: float | None = None
    group_epsilon: float | None = None
    batches: NDArray[np.intp] | None = None
    users: int | None = None


#: Why the models' observers get the server's epsilon, by selection (no batches to hide in).
NOT_HIDDEN: Final = (
    "The epsilon against whoever sees only the released models is not amplified (each user's "
    "rounds composed, as against the server): {why}."
)
#: Whom the random-allocation epsilon is against and what it assumes (:attr:`batches`).
HIDDEN_BATCH: Final = (
    "The epsilon against whoever sees only the released models (the public, a downstream user, "
    "an auditor), who may know which batches ran in each round but not which users are in "
    "them, assumes each user's batch is uniformly random and secret (a deployment's nodes draw "
    "the layout jointly; an in-process run groups users by id, so there it describes the "
    "deployed run): random allocation over the batch schedule, a Monte Carlo upper confidence "
    "bound; the observer does not know who was available in a round. It never holds against "
    "the server or the parties, who know the batches."
)
#: Whom the sub-sampled epsilon of a hidden uniform selection is against (random selection).
HIDDEN_SAMPLE: Final = (
    "The epsilon against whoever sees only the released models (the public, a downstream user, "
    "an auditor), who does not know who was selected: each round selects K of the N users "
    "uniformly, so a user is in it with probability K / N, independently of the other rounds "
    "(the sub-sampled Gaussian mechanism, dp-accounting). It never holds against the server, "
    "which selects."
)


@dataclass(frozen=True)
class Hidden:
    """What whoever sees only the released models does not know of the selection.

    Attributes
    ----------
    batches : ndarray of int, shape (batches, T), or None
        Secret batches a user hides in (:attr:`LedgerEpsilons.batches`).
    sampling_rate : float or None
        A user's chance to be selected in a round, independently of the other rounds, when the
        selection is uniform and hidden (:attr:`LedgerEpsilons.sampling_rate`).
    why : str or None
        Why neither applies: the report's caveat (:data:`NOT_HIDDEN`).
    """

    batches: NDArray[np.intp] | None = None
    sampling_rate: float | None = None
    why: str | None = None

    @property
    def caveat(self) -> str:
        """The report's sentence on the models' observers' epsilon: its assumption, or why not."""
        if self.batches is not None:
            return HIDDEN_BATCH
        if self.sampling_rate is not None:
            return HIDDEN_SAMPLE
        return NOT_HIDDEN.format(why=self.why)


def hidden_selection(selector: Selector, fairness: bool, everyone_available: bool) -> Hidden:
    """What a run's selection hides from the models' observers, or why it hides nothing.

    * Multi-RoundSecAgg's uniform selection: the batches (random allocation), when each user's
      batch is uniform and secret and the observer does not know who was available;
    * random selection with everyone available (``everyone_available``: no dropout, which would
      make a user's chance depend on its availability): ``K`` of ``N`` uniformly each
      round, so a user is in a round with probability ``K / N``, independently of the other
      rounds: the sub-sampled Gaussian at that rate;
    * nothing otherwise: the fairness rule and weighted random selection pick by participation;
      a user partition's group is the least served; random selection among the available
      users gives each a chance that depends on its availability.

    Examples
    --------
    >>> from fedprivacy.participation.selectors import make_selector
    >>> hidden_selection(make_selector("multiround", 8, 4, 2), False, True).batches.shape
    (4, 2)
    >>> hidden_selection(make_selector("random", 8, 2), False, True).sampling_rate
    0.25
    >>> hidden_selection(make_selector("random", 8, 2), False, False).why[:40]
    'random selection among the available use'
    """
    selector = innermost(selector)  # a guard or a privacy filter picks among its choices
    if selector.batched:
        if fairness:
            return Hidden(why="the fairness rule picks batches by their users' participation")
        assert isinstance(selector, UnitSelector)
        return Hidden(batches=selector.units)
    if isinstance(selector, RandomSelector):
        if everyone_available:
            return Hidden(sampling_rate=selector.per_round / selector.num_users)
        return Hidden(
            why="random selection among the available users gives each a chance that depends "
            "on its availability"
        )
    return Hidden(why=f"{selector.describe()} picks by participation")
