"""Canaries beside the users: the users' selection, filter and ledger are those of a run without."""

from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import BernoulliDropout
from fedprivacy.participation.canary_selection import (
    CanaryAvailability,
    CanarySelection,
    canaries_per_round,
)
from fedprivacy.participation.ledger import LedgerSlice, ParticipationLedger
from fedprivacy.participation.privacy_filter import PrivacyFilter, max_rounds
from fedprivacy.participation.sampling import PoissonSampler
from fedprivacy.participation.selectors import BatchPartitionSelector, Selector


def _filtered(selector: Selector, ledger: ParticipationLedger) -> Selector:
    return PrivacyFilter(
        selector, ledger, budget=4.0, noise_multiplier=2.0, delta=1e-5, accountant="pld"
    )


def _run(canaries: int, rounds: int = 12) -> ParticipationLedger:
    """Batches of 2 under a privacy filter and 30 % dropout, with ``canaries`` beside."""
    users = BatchPartitionSelector(12, 4, 2)
    availability = BernoulliDropout(12, 0.3)
    selector: Selector = users
    ledger = ParticipationLedger(12 + canaries)
    if canaries:
        taken = canaries_per_round(12, 4, canaries, 2)
        both = CanarySelection(users, BatchPartitionSelector(canaries, taken, 2))
        both.wrap(_filtered, ledger, canaries=True)
        selector = both
        availability = CanaryAvailability(availability, canaries)
    else:
        selector = _filtered(users, ledger)
    for t in range(rounds):
        rng = np.random.default_rng([7, t])
        ledger.record(selector.select(availability.sample(t, rng), ledger.frequency, rng))
    return ledger


def test_the_users_rounds_are_those_of_a_run_without_canaries() -> None:
    alone, beside = _run(0), _run(6)
    assert np.array_equal(beside.matrix()[:, :12], alone.matrix())
    canaries = beside.matrix()[:, 12:]
    ran = alone.cardinalities > 0
    assert set(canaries.sum(axis=1)[ran]) == {2}  # 6 K / N = 2 a round, one batch
    assert not canaries[~ran].any()  # never in a round without users
    # their own filter retires them as the users' retires users
    fit = max_rounds(4.0, 2.0, 1e-5, "pld")
    assert canaries.sum(axis=0).max() == alone.frequency.max() == fit == 3


def test_the_canaries_come_at_the_users_rate_in_whole_units() -> None:
    assert canaries_per_round(12, 4, 6, 2) == 2
    with pytest.raises(ParameterError, match="canaries: must be a multiple of 6"):
        canaries_per_round(12, 4, 3, 2)  # 1 a round is half a batch
    with pytest.raises(ParameterError, match="multiple of 3"):
        canaries_per_round(12, 4, 0, 1)


def test_poisson_canaries_are_drawn_after_the_users() -> None:
    users = PoissonSampler(50, 0.2)
    both = CanarySelection(users, PoissonSampler(10, 0.2))
    free, none = np.ones(60, dtype=bool), np.zeros(60, dtype=np.int64)
    chosen = both.select(free, none, np.random.default_rng(3))
    alone = users.select(free[:50], none[:50], np.random.default_rng(3))
    assert chosen[chosen < 50].tolist() == alone.tolist() and chosen.max() >= 50
    assert both.describe() == "poisson (+10 canaries)"


def test_a_ledger_slice_reads_its_columns_and_records_nothing() -> None:
    ledger = ParticipationLedger.from_matrix([[1, 0, 1, 1], [0, 1, 0, 1]])
    tail = LedgerSlice(ledger, 2, 4)
    assert tail.matrix().tolist() == [[1, 1], [0, 1]]
    assert tail.cardinalities.tolist() == [2, 1] and tail.frequency.tolist() == [1, 2]
    ledger.record([2])
    assert tail.rounds == 3 and tail.selected(2).tolist() == [0]
    with pytest.raises(ParameterError, match="read-only"):
        tail.record([0])
    with pytest.raises(ParameterError, match="users"):
        LedgerSlice(ledger, 3, 5)
