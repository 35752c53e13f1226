"""The canary audit catches a mechanism that does less than it claims, and passes honest ones.

Three mechanisms are broken on purpose, each still claiming its noise multiplier to the
accountant: central noise at a tenth of its standard deviation; distributed noise whose parties
each add 1/n of their share's variance (so the sum carries 1/n of the target); clipping switched
off while the canaries send updates 30 times the clip. In each, the canaries' ``epsilon_hat``
interval lies above the accountant's epsilon (about 2); for the honest central and distributed
(over-provisioned and exact) mechanisms it reaches down to it. With 50 canaries the estimate is
coarse (its interval spans several units of epsilon), so the audit catches a mechanism off by a
large factor, as these are, not a small error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
from numpy.typing import NDArray

from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.canary_audit import audit_mechanism
from fedprivacy.fl.mechanism import CentralGaussian, DistributedDiscreteGaussian, Mechanism

Z = 6.0  # the claimed noise multiplier: about epsilon 2 for the most-used canary
SETTING = dict(users=100, per_round=40, rounds=20, canaries=50, dimension=300, seed=0)


@dataclass
class QuietCentral(CentralGaussian):
    """Adds a tenth of the noise it claims."""

    name: ClassVar[str] = "test-quiet-central"

    def release(self, mean: NDArray[np.float64], aggregated: int) -> NDArray[np.float64]:
        """The mean plus noise of standard deviation ``z C / (10 n)``."""
        std = self.noise_multiplier * self.clip / aggregated / 10
        out: NDArray[np.float64] = mean + np.random.default_rng().normal(0, std, mean.shape)
        return out


@dataclass
class ThinDistributed(DistributedDiscreteGaussian):
    """Each party's share divided by n once more; the accountant is told the target."""

    name: ClassVar[str] = "test-thin-distributed"

    @property
    def party_noise(self) -> PartyNoise:
        """The target noise multiplier over ``sqrt(n)``: 1/n of the target variance."""
        n = SETTING["per_round"]
        return PartyNoise(self.noise_multiplier / math.sqrt(n), self.clip, self.noise_mode)

    def accounted_noise(self, outcome: AggregateOutcome) -> float | None:
        """The claim, not the noise really in the sum."""
        return self.noise_multiplier


@dataclass
class Unclipped(CentralGaussian):
    """Does not clip."""

    name: ClassVar[str] = "test-unclipped"

    def prepare(
        self, updates: dict[int, NDArray[np.float32]], weights: dict[int, float]
    ) -> tuple[dict[int, NDArray[np.float32]], dict[int, float]]:
        """Every update as it is, with equal weights."""
        return updates, dict.fromkeys(updates, 1.0)


@pytest.mark.parametrize(
    ("mechanism", "options"),
    [
        (QuietCentral(Z, 1.0), {}),
        (ThinDistributed(Z, 1.0, noise_mode="exact"), {"secagg": True}),
        (Unclipped(Z, 1.0), {"update_norm": 30.0}),
    ],
    ids=["noise-a-tenth", "distributed-1-over-n", "clipping-off"],
)
def test_a_broken_mechanism_fails_the_audit(
    mechanism: Mechanism, options: dict[str, object]
) -> None:
    audit = audit_mechanism(mechanism, **SETTING, **options)  # type: ignore[arg-type]
    assert 1.0 < audit.epsilon < 3.0  # a claim the estimate can resolve
    assert audit.estimate.low > audit.epsilon and not audit.passed


@pytest.mark.parametrize(
    ("mechanism", "options"),
    [
        (CentralGaussian(Z, 1.0), {}),
        (DistributedDiscreteGaussian(Z, 1.0), {"secagg": True}),
        (DistributedDiscreteGaussian(Z, 1.0, noise_mode="exact"), {"secagg": True}),
    ],
    ids=["central", "distributed", "distributed-exact"],
)
def test_an_honest_mechanism_passes_it(mechanism: Mechanism, options: dict[str, object]) -> None:
    audit = audit_mechanism(mechanism, **SETTING, **options)  # type: ignore[arg-type]
    assert 0.5 < audit.epsilon < 3.0  # over-provisioned noise: more than claimed, so below 1
    assert audit.passed  # the interval reaches down to the claim (its point is noisy: 50 canaries)
