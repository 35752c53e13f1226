"""The exact per-user PLD epsilon, checked against independent accountants.

dp-accounting's PLD accountant composes each user's rounds one Gaussian event at a time, straight
from a ledger and the per-round noise (no merging into one Gaussian, no closed form); Opacus's PRV
accountant and Flower's RDP accountant check the configurations they support.
"""

from __future__ import annotations

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import PLDAccountant
from hypothesis import given, settings
from hypothesis import strategies as st

from fedprivacy.dp.accounting import epsilon_for
from fedprivacy.dp.gaussian_pld import (
    gaussian_delta,
    gaussian_epsilon,
    mu_for_epsilon,
    total_variation,
)
from fedprivacy.dp.per_user import (
    epsilons_of_mu2,
    per_user_epsilons,
    per_user_epsilons_by_round,
)
from fedprivacy.errors import ParameterError


def _dp_accounting_pld(noises: list[float], delta: float) -> float:
    """One user's epsilon: dp-accounting's PLD over its rounds, one Gaussian event each."""
    acc = PLDAccountant(value_discretization_interval=1e-4)
    for z in noises:
        acc.compose(dp_accounting.GaussianDpEvent(z))
    return float(acc.get_epsilon(delta)) if noises else 0.0


@settings(max_examples=15, deadline=None)
@given(
    rounds=st.integers(1, 10),
    users=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
    delta=st.sampled_from([1e-3, 1e-5, 1e-7]),
)
def test_per_user_pld_is_within_one_percent_of_dp_accounting_and_below_rdp(
    rounds: int, users: int, seed: int, delta: float
) -> None:
    rng = np.random.default_rng(seed)
    ledger = rng.random((rounds, users)) < 0.6
    noise = rng.uniform(0.6, 8.0, rounds)  # distributed DP's noise varies by round
    pld = per_user_epsilons_by_round(ledger, noise, delta, "pld")
    rdp = per_user_epsilons_by_round(ledger, noise, delta, "rdp")
    for u in range(users):
        independent = _dp_accounting_pld([float(z) for z in noise[ledger[:, u]]], delta)
        assert pld[u] == pytest.approx(independent, rel=0.01, abs=1e-3)
        assert pld[u] <= independent + 1e-9  # the grid rounds dp-accounting up, never us down
        assert pld[u] <= rdp[u]


def test_epsilon_is_zero_exactly_when_delta_covers_the_total_variation() -> None:
    mu = np.sqrt(2.0) / np.array([1e6, 1e5, 1e4])  # z twice
    tv = total_variation(mu)
    assert np.allclose(tv, [5.64e-7, 5.64e-6, 5.64e-5], rtol=1e-2)
    eps = gaussian_epsilon(mu, 1e-5)
    assert eps[0] == eps[1] == 0.0 and eps[2] > 0.0  # (0, 1e-5)-DP exactly, then not
    assert np.allclose(gaussian_delta(mu, 0.0), tv)
    assert float(gaussian_epsilon(mu[2], float(tv[2]) * 0.999)) > 0.0  # just below: positive
    assert float(gaussian_epsilon(mu[2], float(tv[2]) * 1.001)) == 0.0


@pytest.mark.parametrize("mu", [1e-3, 0.05, 0.5, 2.0, 20.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-10])
def test_epsilon_inverts_the_privacy_profile(mu: float, delta: float) -> None:
    eps = float(gaussian_epsilon(mu, delta))
    if eps == 0.0:
        assert float(total_variation(mu)) <= delta
    else:
        assert float(gaussian_delta(mu, eps)) == pytest.approx(delta, rel=1e-6)
        assert float(gaussian_delta(mu, eps)) <= delta  # rounded up: still (eps, delta)-DP


def test_mu_for_epsilon_is_the_largest_mu_within_the_budget() -> None:
    for budget in (0.1, 1.0, 8.0):
        mu = mu_for_epsilon(budget, 1e-5)
        assert float(gaussian_epsilon(mu, 1e-5)) <= budget
        assert float(gaussian_epsilon(mu * (1 + 1e-9), 1e-5)) > budget * (1 - 1e-6)


def test_bad_inputs_are_refused_by_name() -> None:
    with pytest.raises(ParameterError, match="mu"):
        gaussian_epsilon(-1.0, 1e-5)
    with pytest.raises(ParameterError, match="delta"):
        gaussian_epsilon(1.0, 0.0)
    with pytest.raises(ParameterError, match="epsilon"):
        mu_for_epsilon(0.0, 1e-5)
    with pytest.raises(ParameterError, match="accountant"):
        per_user_epsilons([1], 1.0, 1e-5, "prv")  # type: ignore[arg-type]


def test_opacus_prv_accountant_agrees_on_unsampled_gaussian_compositions() -> None:
    prv = pytest.importorskip("opacus.accountants").PRVAccountant
    for z, rounds in ((2.0, 10), (1.0, 3), (5.0, 50)):
        acc = prv()
        for _ in range(rounds):
            acc.step(noise_multiplier=z, sample_rate=1.0)
        with np.errstate(divide="ignore"):
            theirs = acc.get_epsilon(1e-5)
        ours = float(per_user_epsilons([rounds], z, 1e-5, "pld")[0])
        assert ours == pytest.approx(theirs, rel=0.01) and ours <= theirs


def test_flowers_accountant_gives_the_rdp_epsilon_of_a_user_in_every_round() -> None:
    pa = pytest.importorskip("flwr.supercore.privacy_accounting")
    from flwr.supercore.privacy_accounting.rdp_accountant import RdpAccountant

    config = pa.PrivacyConfig(
        target_delta=1e-5,
        population_size=100,
        neighboring_relation=pa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        sampling_method=pa.SamplingMethod.NO_AMPLIFICATION,
    )
    acc = RdpAccountant(config)
    acc.compose(pa.GaussianPrivacyEvent(1.5, sample_size=10, population_size=100), count=20)
    flower = acc.get_epsilon(1e-5)
    rdp, pld = (float(per_user_epsilons([20], 1.5, 1e-5, k)[0]) for k in ("rdp", "pld"))
    assert rdp == pytest.approx(flower, rel=0.01)  # one global RDP epsilon: the same number
    assert pld < 0.95 * flower  # the exact per-user value is tighter
    assert rdp == pytest.approx(epsilon_for(1.5, 20, 1e-5), rel=1e-9)


def test_the_vectorised_rdp_conversion_is_dp_accountings_to_rounding() -> None:
    rng = np.random.default_rng(3)
    mu2 = np.concatenate([10 ** rng.uniform(-12, 3, 200), [0.0, 1e-250]])
    ours = epsilons_of_mu2(mu2, 1e-5, "rdp")
    theirs = [0.0 if m == 0 else epsilon_for(min(m**-0.5, 1e100), 1, 1e-5) for m in mu2]
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0.0)
