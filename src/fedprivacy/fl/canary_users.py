"""Canary users in a FedAvg run: they take part like any user and send a fixed random direction.

``train --canaries M`` adds ``M`` users after the run's ``N``: they are selected like anyone (in
batches under Multi-RoundSecAgg, through the privacy filter and secure aggregation), hold no
data, and whenever selected send their own random unit direction scaled to the clip, which the
mechanism clips and noises as any update (:meth:`CanaryUsers.updates`). After the run,
:meth:`CanaryUsers.estimate` turns the model's change into ``epsilon_hat``
(:func:`~fedprivacy.dp.canaries.epsilon_hat`, against as many directions never sent). They are
left out of the users' epsilons (the report counts the first ``N`` users only) and have no data,
so no accuracy of theirs; they do take selection slots from the real users.

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

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.canaries import CanaryEstimate, canary_directions, epsilon_hat

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

    def estimate(self, change: NDArray[np.floating], delta: float, seed: int) -> CanaryEstimate:
        """``epsilon_hat`` of the run whose final model minus its initial one is ``change``."""
        return epsilon_hat(change, self.inserted, self.held_out, delta, seed=seed)
