"""Run a user selection strategy against an availability model for many rounds.

Selection simulation is the round loop (:class:`fedprivacy.pipeline.loop.FederatedRun`) with
an algorithm that trains nothing (:class:`~fedprivacy.pipeline.algorithm.SelectionOnly`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fedprivacy._validation import require_int
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.pipeline.algorithm import Aggregation, SelectionOnly
from fedprivacy.pipeline.loop import FederatedRun, UserSampler

__all__ = ["Aggregation", "run_selection"]


def run_selection(
    selector: UserSampler,
    availability: AvailabilityModel,
    rounds: int,
    rng: np.random.Generator,
    ledger: ParticipationLedger | None = None,
    progress: Callable[[int], None] | None = None,
    aggregate: Aggregation | None = None,
) -> ParticipationLedger:
    """Simulate ``rounds`` rounds of user selection and record who was aggregated.

    In each round the availability vector is sampled, the selector picks users given the
    participation frequencies recorded so far, and the selection (empty for a skipped round) is
    appended to the ledger.

    Parameters
    ----------
    selector : UserSampler
        The user selection strategy.
    availability : AvailabilityModel
        Source of the availability vector of each round. Round indices continue from the number of
        rounds already in ``ledger``, so a trace can be resumed.
    rounds : int
        Number of rounds to simulate (at least 0).
    rng : numpy.random.Generator
        Source of randomness for both availability and selection.
    ledger : ParticipationLedger, optional
        Ledger to extend (its frequencies steer fairness-aware selectors); a new one by default.
    progress : callable, optional
        Called as ``progress(1)`` after each round (for example ``tqdm.update``).
    aggregate : callable, optional
        ``aggregate(round, selected)`` returns the users really aggregated (for example by the
        secure aggregation protocol, :func:`fedprivacy.fl.secure_selection.run_secure_selection`);
        the ledger records that set. By default every selected user is aggregated.

    Returns
    -------
    ParticipationLedger
        The ledger, with ``rounds`` more rows.

    Raises
    ------
    ParameterError
        If ``rounds`` is negative or the selector, availability model and ledger disagree on the
        number of users.

    """
    count = require_int("rounds", rounds, minimum=0)
    run: FederatedRun[None] = FederatedRun(
        selector,
        availability,
        SelectionOnly(selector.num_users, aggregate),
        selection_rng=lambda _t: rng,
        ledger=ledger,
    )
    run.run(count, progress=progress)
    return run.ledger
