"""Epsilon against the models' observers when a user's batch is secret, checked three ways.

The accountant (reduced Gaussian statistic, importance sampling, an upper confidence bound) is
compared with (a) the closed form where there is nothing to hide (one batch), (b) an independent
simulation of the mechanism (random partitions of users, densities round by round, plain
averages) on three schedules, and (c) the server's epsilon, which it never exceeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.dp.allocation import AllocationSchedule, allocation_epsilon, simulated_delta
from fedprivacy.dp.gaussian_pld import gaussian_epsilon
from fedprivacy.errors import ParameterError


def _schedule(rounds: int, batches: int, per_round: int, seed: int) -> np.ndarray:
    """Each round aggregates ``per_round`` of the batches, uniformly (Multi-RoundSecAgg)."""
    rng = np.random.default_rng(seed)
    runs = np.zeros((rounds, batches), dtype=bool)
    for t in range(rounds):
        runs[t, rng.choice(batches, per_round, replace=False)] = True
    return runs


def test_one_batch_is_the_composed_gaussian_of_its_rounds() -> None:
    runs = np.ones((5, 1), dtype=bool)
    noise = np.array([1.0, 2.0, 1.5, 1.0, 3.0])
    est = allocation_epsilon(AllocationSchedule(runs, noise), 1e-5, seed=0)
    mu = float(np.sqrt(np.sum(noise**-2.0)))
    assert est.epsilon == pytest.approx(float(gaussian_epsilon(mu, 1e-5)), rel=1e-12)


@pytest.mark.parametrize(
    ("users", "batch_size", "runs", "noise"),
    [
        (8, 2, np.eye(4, dtype=bool), 1.0),  # each batch once: random allocation of 4 steps
        (12, 2, _schedule(8, 6, 2, seed=1), 1.2),  # two of six batches a round
        (20, 4, _schedule(12, 5, 2, seed=2), 2.0),  # batches of 4, two of five a round
    ],
)
def test_the_accountant_agrees_with_a_simulation_of_the_mechanism(
    users: int, batch_size: int, runs: np.ndarray, noise: float
) -> None:
    """At delta 1e-3, where plain averages resolve it: the simulated delta at the accountant's
    epsilon is the target within 5 % (a million draws: the simulation's own error is about 2 %)."""
    z = np.full(runs.shape[0], noise)
    est = allocation_epsilon(AllocationSchedule(runs, z), 1e-3, samples=200_000, seed=3)
    assert est.relative_error < 0.02
    simulated = simulated_delta(users, batch_size, runs, z, est.point, samples=10**6, seed=4)
    assert simulated == pytest.approx(1e-3, rel=0.05)


def test_hiding_the_batch_lowers_epsilon_and_the_stated_error_is_small_at_1e_5() -> None:
    runs = _schedule(60, 30, 6, seed=0)  # compose-digits: N = 60, T = 2, K = 12, 60 rounds
    schedule = AllocationSchedule(runs, np.full(60, 1.05))
    est = allocation_epsilon(schedule, 1e-5, seed=0)
    server = float(gaussian_epsilon(schedule.server_mu(), 1e-5))
    assert est.point <= est.epsilon < server - 3.0  # about log(30) = 3.4 below, no more
    assert est.relative_error < 0.05


def test_a_schedule_that_is_not_one_is_refused() -> None:
    with pytest.raises(ParameterError, match="noise"):
        AllocationSchedule(np.ones((2, 2), dtype=bool), np.array([1.0, 0.0]))
    with pytest.raises(ParameterError, match="runs"):
        AllocationSchedule(np.ones((2, 2), dtype=bool), np.array([1.0]))
