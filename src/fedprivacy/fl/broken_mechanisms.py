"""Mechanisms broken on purpose, each still claiming its noise multiplier: what an audit must catch.

:func:`~fedprivacy.fl.canary_audit.audit_mechanism` and a run's canaries
(:mod:`fedprivacy.fl.canary_users`) should show ``epsilon_hat`` above the accountant's epsilon
for each of these, as for the failures reported of real libraries (noise drawn too small, a
party's share scaled twice, clipping lost):

* :class:`QuietCentral`: central noise at a tenth of its standard deviation;
* :class:`ThinDistributed`: each party's share of distributed noise divided by ``n`` once more,
  so the sum carries ``1 / n`` of the target variance;
* :class:`Unclipped`: no clipping (a large update goes through whole).

They are never registered: a test or a study registers one under its ``name`` for a run
(``MECHANISMS.restoring()``), or passes an instance to the audit.

Examples
--------
>>> quiet = QuietCentral(6.0, 1.0)
>>> float(np.std(quiet.release(np.zeros(100_000), 1))) < 0.7  # a tenth of z C = 6
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.mechanism import CentralGaussian, DistributedDiscreteGaussian

__all__ = ["QuietCentral", "ThinDistributed", "Unclipped"]


@dataclass
class QuietCentral(CentralGaussian):
    """Adds a tenth of the noise it claims."""

    name: ClassVar[str] = "broken-quiet-central"

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The mean plus noise of standard deviation ``z C / (10 n)``."""
        std = self.noise_multiplier * self.clip / aggregated / 10
        out: NDArray[np.float64] = mean + np.random.default_rng().normal(0, std, mean.shape)
        return out


@dataclass
class ThinDistributed(DistributedDiscreteGaussian):
    """Each party's share divided by ``n`` once more; the accountant is told the target.

    ``parties``: the ``n`` of the rounds it runs in.
    """

    name: ClassVar[str] = "broken-thin-distributed"
    parties: int = 40

    @property
    def party_noise(self) -> PartyNoise:
        """The target noise multiplier over ``sqrt(n)``: 1/n of the target variance."""
        z = self.noise_multiplier / math.sqrt(self.parties)
        return PartyNoise(z, self.clip, self.noise_mode)

    def accounted_noise(self, outcome: AggregateOutcome) -> float | None:
        """The claim, not the noise really in the sum."""
        return self.noise_multiplier


@dataclass
class Unclipped(CentralGaussian):
    """Does not clip."""

    name: ClassVar[str] = "broken-unclipped"

    def prepare(
        self, updates: dict[int, NDArray[np.float32]], weights: dict[int, float]
    ) -> tuple[dict[int, NDArray[np.float32]], dict[int, float]]:
        """Every update as it is, with equal weights."""
        return updates, dict.fromkeys(updates, 1.0)
