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

import pytest

from fedprivacy.fl.broken_mechanisms import QuietCentral, ThinDistributed, Unclipped
from fedprivacy.fl.canary_audit import audit_mechanism
from fedprivacy.fl.mechanism import CentralGaussian, DistributedDiscreteGaussian, Mechanism

Z = 6.0  # the claimed noise multiplier: about epsilon 2 for the most-used canary
SETTING = dict(users=100, per_round=40, rounds=20, canaries=50, dimension=300, seed=0)


@pytest.mark.parametrize(
    ("mechanism", "options"),
    [
        (QuietCentral(Z, 1.0), {}),
        (ThinDistributed(Z, 1.0, noise_mode="exact", parties=40), {"secagg": True}),
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
