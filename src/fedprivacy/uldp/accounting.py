"""What a ULDP-FL method's released rounds cost a user, read from the round loop's ledger.

The round loop's :class:`~fedprivacy.participation.ledger.ParticipationLedger` is the only
record of who was aggregated when; an accounting object keeps nothing of its own and turns the
number of released rounds and the ledger's frequencies into the two epsilons of a run. Every
run of a method, simulated or deployed (the cross-silo server,
:mod:`fedprivacy.flower.uldp.silo_rounds`), reads them from its family's object
(:meth:`~fedprivacy.uldp.families.MethodFamily.accounting`):

* :class:`GaussianRounds` -- one Gaussian mechanism of noise multiplier ``z`` per round: against
  the server, the most-aggregated user's rounds composed (the largest of the report's per-user
  figures, :func:`~fedprivacy.dp.per_user.per_user_epsilons`); against whoever sees only the
  models, the same, or the Poisson-sub-sampled mechanism over every released round when the
  sample is hidden from it;
* :class:`NotPrivate` -- DEFAULT: epsilon infinite;
* ULDP-GROUP-k's group privacy of the silos' DP-SGD (:mod:`fedprivacy.uldp.families.group`).

Examples
--------
>>> acc = GaussianRounds(5.0, sampling_rate=1.0, delta=1e-5)
>>> [round(e, 2) for e in acc.epsilons(10, np.full(3, 10))]
[2.81, 2.81]
>>> s = GaussianRounds(5.0, sampling_rate=0.5, delta=1e-5, amplified=True)
>>> released, server = s.epsilons(1, np.array([1, 0, 0]))
>>> released < server == epsilon_for(5.0, 1, 1e-5)
True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp.accounting import epsilon_for
from fedprivacy.errors import ParameterError

__all__ = ["GaussianRounds", "NotPrivate", "UldpAccounting"]


class UldpAccounting(ABC):
    """The privacy cost of a run's released rounds (see the module docstring).

    Attributes
    ----------
    noise_multiplier : float or None
        ``z`` of the one Gaussian mechanism a released round is (``None``: a round is not one,
        or adds no noise).
    """

    noise_multiplier: float | None

    @abstractmethod
    def epsilons(self, released: int, frequency: NDArray[np.int64]) -> tuple[float, float]:
        """``(epsilon, epsilon_server)`` after ``released`` rounds of the ledger ``frequency``.

        ``epsilon`` holds against whoever sees only the released models; ``epsilon_server``
        against the aggregation server, which chooses and knows the user sample (so no
        amplification by sub-sampling) and, like the paper assumes, sees only the sum over silos
        of each round. ``frequency[u]`` counts the released rounds that aggregated user ``u``.
        """

    def after(self, released: int, rounds: int) -> tuple[float, float]:
        """:meth:`epsilons` after ``rounds`` rounds like the ``released`` ones run so far.

        Every round costs the same; against the server in the worst case (a user in every
        round): the privacy half of a figure at the paper's number of rounds when fewer are
        trained.

        Raises
        ------
        ParameterError
            If ``rounds`` is not a positive integer or no round was released yet.
        """
        rounds = require_int("rounds", rounds, minimum=1)
        if released == 0:
            raise ParameterError("rounds", "needs at least one round run first")
        return self.scaled(released, rounds)

    def scaled(self, released: int, rounds: int) -> tuple[float, float]:
        """:meth:`after`, its arguments checked: :meth:`epsilons` of a user in every round."""
        return self.epsilons(rounds, np.full(1, rounds, dtype=np.int64))


class NotPrivate(UldpAccounting):
    """DEFAULT: no noise, epsilon infinite against everyone, even before any round."""

    noise_multiplier = None

    def epsilons(self, released: int, frequency: NDArray[np.int64]) -> tuple[float, float]:
        """``(inf, inf)``."""
        return math.inf, math.inf


@dataclass(frozen=True)
class GaussianRounds(UldpAccounting):
    """One Gaussian mechanism of noise multiplier ``z`` per round (RDP).

    Attributes
    ----------
    noise_multiplier : float or None
        ``z`` of the released sum (``None``: no noise, epsilon infinite).
    sampling_rate : float
        ``q`` of the Poisson user sample (1 for the methods without user sub-sampling).
    delta : float
        Delta of the epsilons.
    amplified : bool
        Whether the sample is Poisson sampling hidden from whoever sees the models (the paper's
        ``-s`` methods): their epsilon is then the sub-sampled mechanism over every released
        round; otherwise it is the server's (the server chose the sample: no amplification).
    hidden_from_server : bool
        Whether the parties add the noise, so the server sees only noisy sums (``False``: the
        server adds it, and ``epsilon_server`` is infinite).
    """

    noise_multiplier: float | None
    sampling_rate: float
    delta: float
    amplified: bool = False
    hidden_from_server: bool = True

    def epsilons(self, released: int, frequency: NDArray[np.int64]) -> tuple[float, float]:
        """The amplified or the most-aggregated user's epsilon; the latter for the server."""
        z = self.noise_multiplier
        if z is None:
            return math.inf, math.inf
        count = int(frequency.max(initial=0))  # the most-aggregated user's, as the report's
        most = epsilon_for(z, count, self.delta) if count else 0.0
        epsilon = most
        if self.amplified and released:
            epsilon = epsilon_for(z, released, self.delta, self.sampling_rate)
        return epsilon, most if self.hidden_from_server else math.inf
