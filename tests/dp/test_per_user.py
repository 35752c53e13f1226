"""Per-user epsilon: each user composes exactly the rounds it was aggregated in."""

from __future__ import annotations

import dp_accounting
import numpy as np
import pytest

from fedprivacy.dp.accountants import ACCOUNTANTS, AccountantBackend, RdpBackend
from fedprivacy.dp.per_user import (
    mu2_budget,
    per_user_epsilons,
    per_user_epsilons_by_round,
    spread,
)
from fedprivacy.errors import ParameterError
from fedprivacy.participation.ledger import ParticipationLedger


def independent_epsilon(noise_multiplier: float, rounds: int, delta: float) -> float:
    """dp-accounting's RDP accountant, driven directly: ``rounds`` Gaussian mechanisms."""
    accountant = dp_accounting.rdp.RdpAccountant()
    gaussian = dp_accounting.GaussianDpEvent(noise_multiplier)
    event = dp_accounting.SelfComposedDpEvent(gaussian, rounds)
    accountant.compose(event)
    return float(accountant.get_epsilon(delta))


def test_matches_an_independent_accountant_on_a_ledgers_counts() -> None:
    rng = np.random.default_rng(0)
    ledger = ParticipationLedger(30)
    for _ in range(40):
        ledger.record(rng.choice(30, size=int(rng.integers(0, 8)), replace=False))
    counts = ledger.frequency
    eps = per_user_epsilons(counts, noise_multiplier=1.3, delta=1e-5)
    for user, count in enumerate(counts):
        expected = 0.0 if count == 0 else independent_epsilon(1.3, int(count), 1e-5)
        assert eps[user] == pytest.approx(expected, rel=1e-9), (user, count)
    assert len(set(counts.tolist())) > 3  # users with different counts get different epsilons
    assert spread(eps)["max"] == pytest.approx(eps.max())


def test_more_rounds_more_epsilon_and_zero_for_the_unaggregated() -> None:
    eps = per_user_epsilons(np.array([0, 1, 2, 5, 50]), noise_multiplier=2.0, delta=1e-6)
    assert eps[0] == 0.0
    assert np.all(np.diff(eps) > 0)


def test_bad_inputs_name_the_parameter() -> None:
    with pytest.raises(ParameterError, match="counts"):
        per_user_epsilons(np.array([1.5]), 1.0, 1e-5)
    with pytest.raises(ParameterError, match="noise_multiplier"):
        per_user_epsilons(np.array([1]), 0.0, 1e-5)
    with pytest.raises(ParameterError, match="delta"):
        per_user_epsilons(np.array([1]), 1.0, 1.0)


def test_by_round_matches_an_independent_accountant_composing_each_round() -> None:
    """Heterogeneous rounds (distributed DP): each user's rounds, each with its own noise."""
    rng = np.random.default_rng(4)
    rounds, users = 25, 12
    participation = rng.random((rounds, users)) < 0.4
    participation[3] = False  # a round that released nothing
    noise = rng.uniform(0.8, 2.5, size=rounds)
    noise[3] = np.nan
    eps = per_user_epsilons_by_round(participation, noise, 1e-5)
    for u in range(users):
        accountant = dp_accounting.rdp.RdpAccountant()
        for t in np.flatnonzero(participation[:, u]):
            accountant.compose(dp_accounting.GaussianDpEvent(float(noise[t])))
        expected = float(accountant.get_epsilon(1e-5)) if participation[:, u].any() else 0.0
        assert eps[u] == pytest.approx(expected, rel=1e-9, abs=1e-12), u


def test_by_round_with_equal_noise_agrees_with_the_counts() -> None:
    rng = np.random.default_rng(5)
    participation = rng.random((30, 9)) < 0.5
    by_round = per_user_epsilons_by_round(participation, np.full(30, 1.7), 1e-6)
    by_count = per_user_epsilons(participation.sum(axis=0), 1.7, 1e-6)
    np.testing.assert_allclose(by_round, by_count, rtol=1e-9)


def test_by_round_refuses_inconsistent_input() -> None:
    p = np.ones((2, 3), dtype=bool)
    with pytest.raises(ParameterError, match="noise_multipliers"):
        per_user_epsilons_by_round(p, [1.0], 1e-5)
    with pytest.raises(ParameterError, match="noise_multipliers"):
        per_user_epsilons_by_round(p, [1.0, float("nan")], 1e-5)  # users in a round without noise
    with pytest.raises(ParameterError, match="participation"):
        per_user_epsilons_by_round(np.ones((2, 3)), [1.0, 1.0], 1e-5)


class _ComposingRdp(AccountantBackend):
    """A kind registered by a user: RDP by composition only, no per-user closed form."""

    name = "composing-rdp"

    def __init__(self) -> None:
        self.inner = RdpBackend.create(None, 1e-4)
        self.orders = self.inner.orders

    @classmethod
    def create(cls, orders: object, pld_discretization: float) -> _ComposingRdp:
        return cls()

    def compose_gaussian(self, noise_multiplier: float, steps: int, sampling_rate: float) -> None:
        self.inner.compose_gaussian(noise_multiplier, steps, sampling_rate)

    def epsilon_and_order(self, delta: float) -> tuple[float, float | None]:
        return self.inner.epsilon_and_order(delta)

    def copy(self) -> _ComposingRdp:
        out = _ComposingRdp()
        out.inner = self.inner.copy()
        return out


def test_a_newly_registered_accountant_gets_per_user_epsilons_and_budgets() -> None:
    ledger = ParticipationLedger(4)
    for row in ([1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 0]):
        ledger.record(np.flatnonzero(row))
    noise = np.array([1.1, 0.9, 1.3])
    with ACCOUNTANTS.restoring():
        ACCOUNTANTS.register(_ComposingRdp.name, _ComposingRdp)
        ours = per_user_epsilons_by_round(
            ledger.matrix().astype(bool), noise, 1e-5, "composing-rdp"
        )
        budget = mu2_budget(2.0, 1e-5, "composing-rdp")
    closed = per_user_epsilons_by_round(ledger.matrix().astype(bool), noise, 1e-5, "rdp")
    assert ours[3] == closed[3] == 0.0  # never aggregated
    np.testing.assert_allclose(ours, closed, rtol=1e-6)  # its own composition, the same curve
    assert budget == pytest.approx(mu2_budget(2.0, 1e-5, "rdp"), rel=1e-6)
    with pytest.raises(ParameterError, match="accountant"):
        mu2_budget(2.0, 1e-5, "composing-rdp")  # unregistered again
