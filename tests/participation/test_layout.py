"""The batch layout: a drawn order places every user uniformly; selection keeps its units whole.

Issue #50: with batches ``u // T`` whoever assigns the ids picks each user's batch mates, so a
server that gives a victim and its colluders neighbouring ids reads the victim in a "batch sum".
A drawn layout places the victim's batch mates uniformly, and the selector, the privacy guard and
the privacy filter then keep the drawn batches whole.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.guard import PrivacyGuard
from fedprivacy.participation.layout import BatchLayout, batches_of
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.privacy_filter import PrivacyFilter
from fedprivacy.participation.selectors import BatchPartitionSelector, UserPartitionSelector
from fedprivacy.participation.units import unit_index, use_layout

N, K, T = 24, 8, 2


def test_a_drawn_layout_gives_the_victim_a_uniform_batch_mate() -> None:
    """1800 draws of N = 10, T = 2: each of the 9 others is the victim's mate about 200 times."""
    mates: Counter[int] = Counter()
    for _ in range(1800):
        layout = BatchLayout.drawn(os.urandom(32), range(10))
        (batch,) = [m for m in layout.batches(range(10), 2).values() if 0 in m]
        (mate,) = batch - {0}
        mates[mate] += 1
    assert set(mates) == set(range(1, 10))
    assert all(140 <= c <= 260 for c in mates.values()), mates  # binomial(1800, 1/9): sd 13


def test_the_layout_is_a_function_of_the_seed_and_the_users_only() -> None:
    seed = os.urandom(32)
    assert BatchLayout.drawn(seed, range(8)) == BatchLayout.drawn(seed, [7, 3, 0, 1, 2, 4, 5, 6])
    assert BatchLayout.drawn(seed, range(8)) != BatchLayout.drawn(os.urandom(32), range(8))
    assert batches_of(range(4), 2) == BatchLayout.consecutive(4).batches(range(4), 2)
    with pytest.raises(ParameterError, match="batch_layout"):
        BatchLayout((0, 1, 1))


def _drawn_selector(fairness: bool) -> tuple[BatchPartitionSelector, BatchLayout]:
    selector = BatchPartitionSelector(N, K, T, fairness=fairness)
    layout = BatchLayout.drawn(os.urandom(32), range(N))
    use_layout(selector, layout)
    return selector, layout


@pytest.mark.parametrize("fairness", [False, True])
def test_selection_takes_whole_drawn_batches(fairness: bool) -> None:
    selector, layout = _drawn_selector(fairness)
    drawn = {frozenset(b) for b in layout.batches(range(N), T).values()}
    assert {frozenset(row.tolist()) for row in selector.units} == drawn
    rng = np.random.default_rng(0)
    frequency = np.zeros(N, dtype=np.int64)
    for _ in range(200):
        available = rng.random(N) < 0.8
        out = selector.select(available, frequency, rng)
        if out.size:
            assert out.size == K and available[out].all() and np.all(np.diff(out) > 0)
            assert all(b <= set(out.tolist()) or not b & set(out.tolist()) for b in drawn)
            frequency[out] += 1


def test_a_layout_of_other_users_is_refused() -> None:
    selector = UserPartitionSelector(8, 4)
    with pytest.raises(ParameterError, match="batch_layout"):
        use_layout(selector, BatchLayout.drawn(bytes(32), range(1, 9)))
    with pytest.raises(ParameterError, match="batch_layout"):
        use_layout(selector, BatchLayout.drawn(bytes(32), range(6)))
    use_layout(selector, BatchLayout.drawn(bytes(32), range(8)))
    assert sorted(selector.units.ravel().tolist()) == list(range(8))


def test_the_guard_shrinks_and_the_filter_retires_whole_drawn_batches() -> None:
    selector, layout = _drawn_selector(False)
    index = unit_index(selector)
    ledger = ParticipationLedger(N)
    guard = PrivacyGuard(selector, ledger, target=T, mode="shrink")
    rng = np.random.default_rng(1)
    for _ in range(30):
        ledger.record(guard.select(rng.random(N) < 0.9, ledger.frequency, rng))
    for r in range(ledger.rounds):
        units = Counter(index[ledger.selected(r)].tolist())
        assert set(units.values()) <= {T}, r
    assert audit_ledger(ledger, time_limit=10).t_weak.lower >= T

    selector, layout = _drawn_selector(False)
    index = unit_index(selector)
    ledger = ParticipationLedger(N)
    budget = PrivacyFilter(
        selector, ledger, budget=2.0, noise_multiplier=5.0, delta=1e-5, accountant="pld"
    )
    for _ in range(40):
        ledger.record(budget.select(np.ones(N, dtype=bool), ledger.frequency, rng))
    assert budget.retirements
    for retirement in budget.retirements:
        units = Counter(index[list(retirement.users)].tolist())
        assert set(units.values()) == {T}  # whole drawn batches, never half of one
