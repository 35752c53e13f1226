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
from fedprivacy.participation.selectors import Selector, UnitSelector

__all__ = ["HIDDEN_BATCH", "NOT_HIDDEN", "LedgerEpsilons", "Method", "hidden_batches"]


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
        :func:`hidden_batches` decides). None: no amplification is claimed.

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


#: Why the models' observers get the server's epsilon, by selection (no batches to hide in).
NOT_HIDDEN: Final = (
    "The epsilon against whoever sees only the released models is the server's: {why}."
)
#: Whom the random-allocation epsilon is against and what it assumes (:attr:`batches`).
HIDDEN_BATCH: Final = (
    "The epsilon against whoever sees only the released models (the public, a downstream user, "
    "an auditor), who may know which batches ran in each round but not which users are in "
    "them, assumes each user's batch is uniformly random and secret (a deployment's nodes draw "
    "the layout jointly; an in-process run groups users by id, so there it describes the "
    "deployed run): random allocation over the batch schedule, a Monte Carlo upper confidence "
    "bound. It never holds against the server or the parties, who know the batches."
)


def hidden_batches(
    selector: Selector, fairness: bool
) -> tuple[NDArray[np.intp] | None, str | None]:
    """The batches a user hides in from the models' observers, or why there are none.

    Multi-RoundSecAgg's batches hide a user when its batch is uniform and secret and the
    schedule of which batches run does not depend on who is in them: true of the uniform
    selection, not of the fairness rule (it picks batches by their users' participation) nor of
    a selection without batches (random selection's amplification by sampling is not claimed
    here).

    Examples
    --------
    >>> from fedprivacy.participation.selectors import make_selector
    >>> batches, why = hidden_batches(make_selector("multiround", 8, 4, 2), False)
    >>> batches.shape, why
    ((4, 2), None)
    >>> hidden_batches(make_selector("random", 8, 4), False)[1]
    'Random selection has no batches to hide a user in'
    """
    if not selector.batched:
        return None, f"{selector.describe()} has no batches to hide a user in"
    if fairness:
        return None, "the fairness rule picks batches by their users' participation"
    assert isinstance(selector, UnitSelector)
    return selector.units, None
