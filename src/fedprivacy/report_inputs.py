"""Where a privacy report's epsilons come from: a mechanism named only, the ledger, or the run.

:func:`fedprivacy.report.privacy_report` takes one of :class:`LedgerEpsilons` (composed there
from the participation ledger) or :class:`StatedEpsilons` (accounted by the run itself, ULDP-FL's
methods), and a :class:`~fedprivacy.fl.mechanism.Mechanism` or a :class:`Method` that only names
one. :mod:`fedprivacy.report` re-exports all three.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.accountants import AccountantKind

__all__ = ["LedgerEpsilons", "Method", "StatedEpsilons"]


@dataclass(frozen=True)
class Method:
    """A mechanism the report only names: a ULDP-FL method, which accounts its own epsilons.

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
    """Per-user epsilons the report composes from the ledger (FedAvg, in process or deployed).

    Each user composes only the rounds it was aggregated in, without amplification by
    sub-sampling; the report's epsilon is the largest. The caveat is :data:`PER_USER_EPSILON`
    (:data:`NO_DP` without DP).

    Attributes
    ----------
    participation : ndarray of bool, shape (rounds, users)
        The ledger's matrix.
    round_noise : ndarray of float, shape (rounds,), optional
        The noise multiplier of each round's released aggregate (NaN where nothing was
        released); required when the mechanism's noise varies between rounds (distributed DP).
    wrap_log_probability : ndarray of float, shape (rounds,), optional
        Natural log of each round's wrap-around bound (distributed DP; NaN where none).

    Examples
    --------
    >>> LedgerEpsilons(np.ones((2, 3), dtype=bool)).participation.shape
    (2, 3)
    """

    participation: NDArray[np.bool_]
    round_noise: NDArray[np.float64] | None = None
    wrap_log_probability: NDArray[np.float64] | None = None


@dataclass(frozen=True)
class StatedEpsilons:
    """Epsilons a run accounted itself (ULDP-FL's methods), and what they mean.

    Attributes
    ----------
    epsilon : float
        Against the released models (ignored without DP).
    epsilon_server : float or None
        Against the server (None: no guarantee against it).
    per_user : mapping of str to float, optional
        ``{"min", "median", "max"}`` of the per-user epsilons against the server; None: every
        user gets ``epsilon_server`` (``epsilon`` when that is None).
    caveats : tuple of str
        What the epsilons mean (without DP: that there are none), after the server-view ones.

    Examples
    --------
    >>> StatedEpsilons(1.0, None).caveats
    ()
    """

    epsilon: float
    epsilon_server: float | None
    per_user: Mapping[str, float] | None = None
    caveats: tuple[str, ...] = ()
