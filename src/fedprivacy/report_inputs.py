"""Where a privacy report's epsilons come from: the ledger, and a mechanism or one named only.

:func:`fedprivacy.report.privacy_report` composes every run's epsilons from its participation
ledger (:class:`LedgerEpsilons`), with a :class:`~fedprivacy.fl.mechanism.Mechanism` or a
:class:`Method` that only names one. :mod:`fedprivacy.report` re-exports both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.accountants import AccountantKind

__all__ = ["LedgerEpsilons", "Method"]


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
