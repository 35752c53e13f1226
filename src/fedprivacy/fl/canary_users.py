"""Canary users in a FedAvg run: selected beside the users, each sending a fixed random direction.

``train --canaries M`` (and ``PrivateFedAvgConfig.canaries``) adds ``M`` users after the run's
``N``: they are selected as the users are, beside them and at their rate
(:mod:`fedprivacy.participation.canary_selection`: in batches of their own under
Multi-RoundSecAgg, through a privacy filter of their own), hold no data, and whenever selected
send their own random unit direction scaled to the clip, which the mechanism clips as any update
(:meth:`CanaryUsers.updates`). :meth:`CanaryUsers.join` adds them to the sum the round's
aggregation releases, from the server's side: they are the auditor's own updates, and as parties
of the secure aggregation they would change the users' round (its threshold, its noise
provisioning, which rounds complete under dropouts), hence the users' epsilons. So every user's
selection, noise and epsilon are those of the run without canaries; a round that aggregates no
user takes no canary. The noise protecting the canaries is the users' noise in the sum, exactly
what protects a user. After the run, :meth:`CanaryUsers.estimate` turns the model's change into
``epsilon_hat`` (:func:`~fedprivacy.dp.canaries.epsilon_hat`, against as many directions never
sent). They are left out of the users' epsilons, ``T_weak``, F and C (the first ``N`` users'),
and have no data, so no accuracy of theirs.

Examples
--------
>>> import numpy as np
>>> canaries = CanaryUsers.draw(first=10, count=3, dimension=50, clip=0.5, seed=0)
>>> sorted(canaries.updates(np.array([2, 10, 12])))
[10, 12]
>>> float(np.linalg.norm(canaries.updates(np.array([11]))[11]))
0.5
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.canaries import CanaryEstimate, canary_directions, epsilon_hat
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.mechanism import Mechanism

__all__ = ["CanaryUsers"]


@dataclass(frozen=True)
class CanaryUsers:
    """Users ``first .. first + count - 1``, each with a direction sent and one held out."""

    first: int
    inserted: NDArray[np.float64]
    held_out: NDArray[np.float64]
    clip: float

    @classmethod
    def draw(cls, *, first: int, count: int, dimension: int, clip: float, seed: int) -> CanaryUsers:
        """The directions from the run's seed (a resumed run draws the same)."""
        rng = np.random.default_rng([seed, 0x6361])
        inserted, held_out = canary_directions(2, count, dimension, rng)
        return cls(first, inserted, held_out, clip)

    @property
    def count(self) -> int:
        """How many canaries."""
        return int(self.inserted.shape[0])

    def updates(self, selected: NDArray[np.intp]) -> dict[int, NDArray[np.float32]]:
        """The selected canaries' updates: their directions at the clip."""
        return {
            int(u): (self.clip * self.inserted[int(u) - self.first]).astype(np.float32)
            for u in selected
            if u >= self.first
        }

    def join(
        self, outcome: AggregateOutcome, selected: NDArray[np.intp], mechanism: Mechanism
    ) -> AggregateOutcome:
        """``outcome`` with the selected canaries' updates, clipped by ``mechanism``, added.

        Each weighs 1; nothing is added to a round that aggregated no user.

        Examples
        --------
        >>> from fedprivacy.fl.mechanism import CentralGaussian
        >>> users = AggregateOutcome((0, 1), np.ones(2), np.full(2, 2.0), 2.0, 0, 0.1)
        >>> canaries = CanaryUsers.draw(first=5, count=2, dimension=2, clip=1.0, seed=0)
        >>> both = canaries.join(users, np.array([0, 1, 5]), CentralGaussian(1.0, 1.0))
        >>> both.aggregated, both.total_weight, round(float(np.linalg.norm(
        ...     both.weighted_sum - users.weighted_sum)), 6)
        ((0, 1, 5), 3.0, 1.0)
        """
        updates = self.updates(selected)
        if outcome.weighted_sum is None or not updates:
            return outcome
        clipped, _ = mechanism.prepare(updates, dict.fromkeys(updates, 1.0))
        added = np.sum([np.asarray(v, dtype=np.float64) for v in clipped.values()], axis=0)
        total = outcome.weighted_sum + added
        weight = outcome.total_weight + len(clipped)
        return replace(
            outcome,
            aggregated=(*outcome.aggregated, *sorted(int(u) for u in clipped)),
            mean_update=total / weight,
            weighted_sum=total,
            total_weight=weight,
        )

    def estimate(self, change: NDArray[np.floating], delta: float, seed: int) -> CanaryEstimate:
        """``epsilon_hat`` of the run whose final model minus its initial one is ``change``."""
        return epsilon_hat(change, self.inserted, self.held_out, delta, seed=seed)
