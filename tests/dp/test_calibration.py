from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fedprivacy.dp.accountants import ACCOUNTANTS, RdpBackend
from fedprivacy.dp.accounting import PrivacyAccountant, epsilon_for
from fedprivacy.dp.calibration import noise_multiplier_for
from fedprivacy.dp.rdp import DEFAULT_ORDERS
from fedprivacy.errors import ParameterError


@pytest.mark.parametrize(("epsilon", "steps"), [(1.0, 1), (2.0, 1000), (8.0, 50)])
def test_round_trip_plain_gaussian(epsilon: float, steps: int) -> None:
    z = noise_multiplier_for(epsilon, 1e-5, steps)
    assert epsilon_for(z, steps, 1e-5) <= epsilon
    # tight: 0.01 % less noise overshoots the target
    assert epsilon_for(z * (1 - 1e-4), steps, 1e-5) > epsilon


def test_round_trip_recovers_the_papers_noise() -> None:
    # the paper's record-level setting; orders < 64 (where its optimum 7.8 lies) keep this fast
    orders = DEFAULT_ORDERS[DEFAULT_ORDERS < 64]
    target = PrivacyAccountant(orders=orders).compose_gaussian(5.0, 100_000, 0.01).epsilon(1e-5)
    assert target == pytest.approx(2.8492, abs=5e-4)
    z = noise_multiplier_for(target, 1e-5, 100_000, 0.01, orders=orders)
    assert z == pytest.approx(5.0, rel=1e-4)
    got = PrivacyAccountant(orders=orders).compose_gaussian(z, 100_000, 0.01).epsilon(1e-5)
    assert got <= target


def test_round_trip_pld() -> None:
    z = noise_multiplier_for(1.5, 1e-5, 20, accountant="pld", rtol=1e-4)
    assert epsilon_for(z, 20, 1e-5, accountant="pld") <= 1.5
    assert epsilon_for(z * 0.995, 20, 1e-5, accountant="pld") > 1.5
    # PLD is tighter, so it needs less noise than RDP for the same target
    assert z < noise_multiplier_for(1.5, 1e-5, 20)


def test_unreachable_targets_are_clear_errors() -> None:
    with pytest.raises(ParameterError, match="unreachable.*upper"):
        noise_multiplier_for(1e-4, 1e-5, 1000, upper=10.0)
    with pytest.raises(ParameterError, match="met already.*lower"):
        noise_multiplier_for(1e6, 1e-5, 1, lower=1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon: must be > 0"),
        ({"delta": 1.0}, "delta"),
        ({"steps": 0}, "steps: must be >= 1"),
        ({"sampling_rate": 0.0}, "sampling_rate"),
        ({"lower": 5.0, "upper": 1.0}, "lower: must be < upper"),
        ({"accountant": "moments"}, "kind"),
        ({"accountant": "pld", "orders": [2.0, 3.0]}, "orders"),
    ],
)
def test_bad_parameters(kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {"epsilon": 1.0, "delta": 1e-5, "steps": 10}
    args.update(kwargs)
    with pytest.raises(ParameterError, match=match):
        noise_multiplier_for(**args)  # type: ignore[arg-type]


def test_monotone_in_the_target() -> None:
    zs = [noise_multiplier_for(e, 1e-5, 100) for e in (0.5, 1.0, 2.0, 4.0)]
    assert np.all(np.diff(zs) < 0)


def test_pld_errors_do_not_probe_tiny_noise() -> None:
    with pytest.raises(ParameterError, match="met already"):
        noise_multiplier_for(1e6, 1e-5, 1, accountant="pld", lower=1.0)


@pytest.fixture
def saved_accountants():
    with ACCOUNTANTS.restoring():
        yield ACCOUNTANTS


def test_one_calibration_path_for_registered_accountants(saved_accountants) -> None:
    class SameAsRdp(RdpBackend):
        name = "rdp-again"

    class WarmStarted(RdpBackend):
        name = "rdp-warm"
        calibration_start = "rdp"

    ACCOUNTANTS.register(SameAsRdp.name, SameAsRdp)
    ACCOUNTANTS.register(WarmStarted.name, WarmStarted)
    plain = noise_multiplier_for(1.5, 1e-5, 20)
    calibrate: Any = noise_multiplier_for  # registered kinds are not in AccountantKind
    # the same backend gives the same search, to the last bit
    assert calibrate(1.5, 1e-5, 20, accountant="rdp-again") == plain
    # a warm start from another accountant brackets the same root differently
    warm = calibrate(1.5, 1e-5, 20, accountant="rdp-warm", rtol=1e-6)
    assert warm == pytest.approx(plain, rel=1e-4)
    assert epsilon_for(warm, 20, 1e-5) <= 1.5
    with pytest.raises(ParameterError, match="unreachable"):
        calibrate(1e-4, 1e-5, 1000, accountant="rdp-warm", upper=10.0)
    with pytest.raises(ParameterError) as info:
        calibrate(1.0, 1e-5, 10, accountant="moments")
    assert str(info.value) == (
        "kind: must be 'rdp', 'pld', 'rdp-again' or 'rdp-warm', got 'moments'"
    )
