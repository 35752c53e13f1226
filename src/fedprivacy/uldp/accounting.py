"""What a ULDP-FL method's rounds cost a user: one accounting object per run.

Every run of a method, simulated (:class:`~fedprivacy.uldp.methods.MethodRunner`) or deployed
(the cross-silo server, :mod:`fedprivacy.flower.uldp.silo_rounds`), charges the rounds it released
to one :class:`UldpAccounting` and reads its epsilons from it, so that the two cannot account
differently. Its family chooses which (:meth:`~fedprivacy.uldp.families.MethodFamily.accounting`):

* :class:`GaussianRounds` -- one Gaussian mechanism of noise multiplier ``z`` per round,
  Poisson-sub-sampled at rate ``q`` for the ``-s`` methods (ULDP-NAIVE, ULDP-AVG, ULDP-SGD and
  their variants; RDP, :class:`~fedprivacy.dp.accounting.PrivacyAccountant`);
* :class:`NotPrivate` -- DEFAULT: epsilon infinite;
* ULDP-GROUP-k's group privacy of the silos' DP-SGD (:mod:`fedprivacy.uldp.families.group`).

Two adversaries (see :data:`~fedprivacy.uldp.results.EPSILON_ADVERSARIES`): :meth:`epsilon` is
against whoever sees the released models but not the user sample (amplified by Poisson
sub-sampling, when the sample is hidden); :meth:`epsilon_server` against the server, which
knows the sample: the unsampled mechanism over the rounds of the most-sampled user.

Examples
--------
>>> acc = GaussianRounds(5.0, sampling_rate=1.0, delta=1e-5, num_users=3)
>>> for _ in range(10):
...     acc.charge(None)
>>> round(acc.epsilon(), 2), round(acc.epsilon_server(), 2), acc.rounds
(2.81, 2.81, 10)
>>> s = GaussianRounds(5.0, sampling_rate=0.5, delta=1e-5, num_users=3, sampled=True)
>>> s.charge(np.array([True, False, False]))
>>> s.epsilon() < s.epsilon_server() == unsampled_epsilon(5.0, 1, 1e-5)
True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp.accounting import PrivacyAccountant, quiet_accounting
from fedprivacy.errors import ParameterError

__all__ = ["GaussianRounds", "NotPrivate", "UldpAccounting", "unsampled_epsilon"]


def unsampled_epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
    """Epsilon at ``delta`` of ``rounds`` runs of the Gaussian mechanism, no sub-sampling (RDP).

    The bound against the server, which knows each round's user sample: the most-sampled
    user's rounds.

    Examples
    --------
    >>> unsampled_epsilon(5.0, 0, 1e-5)
    0.0
    >>> round(unsampled_epsilon(5.0, 10, 1e-5), 2)
    2.81
    """
    if rounds == 0:
        return 0.0
    with quiet_accounting():
        accountant = PrivacyAccountant("rdp").compose_gaussian(noise_multiplier, rounds, 1.0)
        return float(accountant.epsilon(delta))


class UldpAccounting(ABC):
    """The privacy cost of a run's released rounds (see the module docstring).

    Attributes
    ----------
    rounds : int
        Rounds charged so far.
    """

    rounds: int = 0

    @abstractmethod
    def charge(self, sampled: NDArray[np.bool_] | None) -> None:
        """Charge one released round; ``sampled`` is its user sample (``None``: every user)."""

    @abstractmethod
    def epsilon(self) -> float:
        """Epsilon of the rounds charged so far, against whoever sees only the models."""

    @abstractmethod
    def epsilon_server(self) -> float:
        """Epsilon of the rounds charged so far, against the aggregation server.

        The server chooses and knows the user sample, so there is no amplification by
        sub-sampling: the unsampled mechanism composed over the rounds of the most-sampled user
        (the sample does not depend on the data, so conditioning on it is allowed). Like the
        paper, it assumes that the server sees only the sum over silos of each round.
        """

    @abstractmethod
    def epsilon_after(self, rounds: int) -> float:
        """:meth:`epsilon` after ``rounds`` rounds like those charged so far.

        Every round costs the same, and RDP adds up over rounds: the privacy half of a figure
        at the paper's number of rounds when fewer are trained.

        Raises
        ------
        ParameterError
            If ``rounds`` is not a positive integer or no round was charged yet.
        """

    @abstractmethod
    def epsilon_server_after(self, rounds: int) -> float:
        """:meth:`epsilon_server` after ``rounds`` rounds, in the worst case."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (plain Python values)."""

    @abstractmethod
    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state` (on a fresh object of the same run)."""


class NotPrivate(UldpAccounting):
    """DEFAULT: no noise, epsilon infinite against everyone, even before any round."""

    def charge(self, sampled: NDArray[np.bool_] | None) -> None:
        """Count the round; there is nothing to compose."""
        self.rounds += 1

    def epsilon(self) -> float:
        """``inf``."""
        return math.inf

    def epsilon_server(self) -> float:
        """``inf``."""
        return math.inf

    def epsilon_after(self, rounds: int) -> float:
        """``inf``."""
        return math.inf

    def epsilon_server_after(self, rounds: int) -> float:
        """``inf``."""
        return math.inf

    def state(self) -> dict[str, Any]:
        """The number of rounds."""
        return {"rounds": self.rounds}

    def restore(self, state: dict[str, Any]) -> None:
        """Take the number of rounds back."""
        self.rounds = int(state["rounds"])


class GaussianRounds(UldpAccounting):
    """One Gaussian mechanism per round, Poisson-sub-sampled at rate ``q`` (RDP).

    Parameters
    ----------
    noise_multiplier : float or None
        ``z`` of the released sum (``None``: no noise, epsilon infinite).
    sampling_rate : float
        ``q`` (1 for the methods without user sub-sampling).
    delta : float
        Delta of the epsilons.
    num_users : int
        ``|U|``.
    sampled : bool
        Whether the method sub-samples users (``-s``).
    amplified : bool
        Whether the sample is Poisson sampling hidden from whoever sees the models (the paper);
        ``False`` when the server chooses it (a selection scheme): :meth:`epsilon` is then
        :meth:`epsilon_server`.
    hidden_from_server : bool
        Whether the parties add the noise, so the server sees only noisy sums (``False``: the
        server adds it, and :meth:`epsilon_server` is infinite).
    """

    def __init__(
        self,
        noise_multiplier: float | None,
        *,
        sampling_rate: float,
        delta: float,
        num_users: int,
        sampled: bool = False,
        amplified: bool = True,
        hidden_from_server: bool = True,
    ) -> None:
        self.noise_multiplier = noise_multiplier
        self.sampling_rate = sampling_rate
        self.delta = delta
        self.sampled = sampled
        self.amplified = amplified
        self.hidden_from_server = hidden_from_server
        self.accountant = PrivacyAccountant("rdp")
        self.times_sampled = np.zeros(num_users, dtype=np.int64)
        self.rounds = 0

    def charge(self, sampled: NDArray[np.bool_] | None) -> None:
        """Compose one round; count the round of every user in ``sampled``."""
        if sampled is not None:
            self.times_sampled += np.asarray(sampled, dtype=np.int64)
        if self.noise_multiplier is not None:
            with quiet_accounting():
                self.accountant.compose_gaussian(self.noise_multiplier, 1, self.sampling_rate)
        self.rounds += 1

    @property
    def _against_server_only(self) -> bool:
        """A server-chosen sample: no amplification is claimed for anyone."""
        return self.sampled and not self.amplified

    def epsilon(self) -> float:
        """Epsilon of the released models (amplified by a hidden Poisson sample only)."""
        if self._against_server_only:
            return self.epsilon_server()
        if self.noise_multiplier is None:
            return math.inf
        return float(self.accountant.epsilon(self.delta))

    def epsilon_server(self) -> float:
        """The unsampled mechanism over the most-sampled user's rounds (``inf``: server noise)."""
        if not self.hidden_from_server or self.noise_multiplier is None:
            return math.inf
        if not self.sampled:
            return self.epsilon()
        most = int(self.times_sampled.max(initial=0))
        return unsampled_epsilon(self.noise_multiplier, most, self.delta)

    def epsilon_after(self, rounds: int) -> float:
        """The composed curve scaled by ``rounds / self.rounds`` (RDP adds up over rounds).

        Raises
        ------
        ParameterError
            If ``rounds`` is not a positive integer or no round has run yet.
        """
        if self._against_server_only:
            return self.epsilon_server_after(rounds)
        require_int("rounds", rounds, minimum=1)
        if self.noise_multiplier is None:
            return math.inf
        if self.rounds == 0:
            raise ParameterError("rounds", "needs at least one round run first")
        orders, rho = self.accountant.rdp()
        scaled = PrivacyAccountant("rdp", orders=orders).compose_rdp(
            orders, rounds / self.rounds * rho
        )
        return float(scaled.epsilon(self.delta))

    def epsilon_server_after(self, rounds: int) -> float:
        """A user sampled in every one of ``rounds`` rounds: the unsampled mechanism composed."""
        if not self.sampled:
            return self.epsilon_after(rounds)
        if not self.hidden_from_server or self.noise_multiplier is None:
            return math.inf
        rounds = require_int("rounds", rounds, minimum=1)
        return unsampled_epsilon(self.noise_multiplier, rounds, self.delta)

    def state(self) -> dict[str, Any]:
        """Rounds, per-user sample counts and the accountant's history."""
        return {
            "rounds": self.rounds,
            "times_sampled": self.times_sampled.tolist(),
            "history": [list(h) for h in self.accountant.history],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Recompose the stored history."""
        self.rounds = int(state["rounds"])
        self.times_sampled[:] = np.asarray(state["times_sampled"], dtype=np.int64)
        with quiet_accounting():
            for z, q, steps in state["history"]:
                self.accountant.compose_gaussian(float(z), int(steps), float(q))
