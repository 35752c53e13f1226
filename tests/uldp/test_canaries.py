"""Canaries in ULDP-FL: beside the users (no user's epsilon moves), and an audit that can fail.

The audit runs the real round of ULDP-AVG and ULDP-SGD (the silos' clipped, weighted sums, each
silo's noise share, the sum over silos) on the synthetic Creditcard stand-in: 5 rounds at
sigma 5 claim epsilon about 1.9 against the models' observers, and the canaries' ``epsilon_hat``
interval reaches down to it. A central mechanism that adds a tenth of the noise it claims is
caught: the interval lies above the claim.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.fl.broken_mechanisms import QuietCentral
from fedprivacy.fl.mechanism import MECHANISMS
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.run import run_uldp

AUDIT = dict(dataset="creditcard-synthetic", users=100, rounds=5, canaries=40, seed=1)


@pytest.fixture
def quiet() -> Iterator[str]:
    with MECHANISMS.restoring():
        MECHANISMS.register(QuietCentral.name, QuietCentral)
        yield QuietCentral.name


@pytest.mark.parametrize("method", ["ULDP-AVG", "ULDP-SGD"])
def test_the_audit_passes_an_honest_user_level_method(method: str) -> None:
    result = run_uldp(UldpConfig(method=method, **AUDIT))  # type: ignore[arg-type]
    hat, claimed = result.epsilon_hat, result.final.get("epsilon")
    assert hat is not None and hat["canaries"] == 40 and 1.0 < claimed < 3.0
    assert hat["low"] <= claimed  # no evidence of a leak


def test_the_audit_catches_a_mechanism_with_a_tenth_of_its_noise(quiet: str) -> None:
    result = run_uldp(UldpConfig(method="ULDP-AVG", dp=quiet, **AUDIT))  # type: ignore[arg-type]
    hat, claimed = result.epsilon_hat, result.final.get("epsilon")
    assert hat is not None and 1.0 < claimed < 3.0
    assert hat["low"] > claimed  # the model moved along the canaries far more than claimed


def test_canaries_change_no_users_epsilon_and_no_users_round(data_dir: object) -> None:
    config = dict(
        dataset="heart_disease", method="ULDP-AVG-s", users=60, rounds=4, sampling_rate=0.5
    )
    plain = run_uldp(UldpConfig(data_dir=str(data_dir), **config))  # type: ignore[arg-type]
    beside = run_uldp(UldpConfig(data_dir=str(data_dir), canaries=10, **config))  # type: ignore[arg-type]
    assert np.array_equal(beside.participation[:, :60], plain.participation)
    assert beside.participation[:, 60:].any()  # Poisson at the users' q
    for key in ("epsilon", "epsilon_server"):
        assert [r.get(key) for r in beside.records] == [r.get(key) for r in plain.records]
    assert beside.server_view == plain.server_view
    assert (
        beside.summary()["privacy"]["per_user_epsilon"]
        == (plain.summary()["privacy"]["per_user_epsilon"])
    )
    assert plain.epsilon_hat is None and beside.epsilon_hat is not None
    assert math.isfinite(beside.epsilon_hat["epsilon"])


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"method": "ULDP-NAIVE"}, "canaries: measure the user-level methods"),
        ({"method": "ULDP-AVG-w", "secure_weighting": True}, "canaries: join the silos'"),
        (
            {"method": "ULDP-AVG-ws", "scheme": "multiround", "per_round": 20, "target_privacy": 5},
            "canaries: must be a multiple of 25",
        ),
    ],
)
def test_canaries_are_refused_where_they_measure_nothing(
    changes: dict[str, object], match: str
) -> None:
    with pytest.raises(ParameterError, match=match):
        UldpConfig(dataset="creditcard-synthetic", canaries=10, **changes).validate()  # type: ignore[arg-type]


def test_a_cross_silo_deployment_refuses_canaries() -> None:
    from fedprivacy.uldp.deployment import check_deployable

    config = UldpConfig(dataset="creditcard-synthetic", method="ULDP-AVG-w", canaries=10)
    with pytest.raises(ParameterError, match="canaries: are inserted in process"):
        check_deployable(config)
