from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import BernoulliDropout, TraceAvailability
from fedprivacy.participation.family import ExplicitFamilySelector
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import SCHEMES, BatchPartitionSelector, make_selector
from fedprivacy.pipeline.selection import run_selection


@pytest.mark.parametrize("scheme", SCHEMES)
def test_run_selection_records_every_round(scheme: str) -> None:
    rng = np.random.default_rng(0)
    selector = make_selector(scheme, 24, 6, target_privacy=2)
    ledger = run_selection(selector, BernoulliDropout(24, 0.1), 200, rng)
    assert ledger.rounds == 200
    assert set(ledger.cardinalities.tolist()) <= {0, 6}
    assert ledger.cardinalities.sum() > 0
    np.testing.assert_array_equal(ledger.frequency, ledger.matrix().sum(axis=0))


def test_run_selection_is_reproducible() -> None:
    def run(seed: int) -> list[list[int]]:
        rng = np.random.default_rng(seed)
        availability = BernoulliDropout.heterogeneous(24, rng)
        ledger = run_selection(
            BatchPartitionSelector(24, 6, 3, fairness=True), availability, 50, rng
        )
        return ledger.matrix().tolist()

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_run_selection_uses_only_available_users() -> None:
    rng = np.random.default_rng(1)
    trace = rng.random((100, 12)) >= 0.2
    for selector in (
        make_selector("random", 12, 4),
        make_selector("multiround", 12, 4, 2, fairness=True),
        ExplicitFamilySelector.batch_partition(12, 4, 2, fairness=True),
    ):
        ledger = run_selection(selector, TraceAvailability(trace), 100, rng)
        assert np.all(ledger.matrix() <= trace)


def test_run_selection_extends_ledger_and_resumes_trace() -> None:
    trace = np.array([[1, 1, 0, 0], [0, 0, 1, 1], [1, 1, 1, 1]], dtype=bool)
    selector = make_selector("partition", 4, 2)
    rng = np.random.default_rng(0)
    ledger = run_selection(selector, TraceAvailability(trace), 2, rng)
    assert ledger.matrix().tolist() == [[1, 1, 0, 0], [0, 0, 1, 1]]
    run_selection(selector, TraceAvailability(trace), 1, rng, ledger=ledger)
    assert ledger.rounds == 3
    assert ledger.cardinalities.tolist() == [2, 2, 2]
    with pytest.raises(ParameterError) as info:
        run_selection(selector, TraceAvailability(trace), 1, rng, ledger=ledger)
    assert info.value.name == "round_index"


def test_progress_called_once_per_round() -> None:
    calls: list[int] = []
    run_selection(
        make_selector("random", 10, 2),
        BernoulliDropout(10, 0.2),
        17,
        np.random.default_rng(0),
        progress=calls.append,
    )
    assert calls == [1] * 17


def test_zero_rounds() -> None:
    ledger = run_selection(
        make_selector("random", 10, 2), BernoulliDropout(10, 0.2), 0, np.random.default_rng(0)
    )
    assert ledger.rounds == 0


def test_run_selection_validation() -> None:
    rng = np.random.default_rng(0)
    selector = make_selector("random", 10, 2)
    with pytest.raises(ParameterError) as info:
        run_selection(selector, BernoulliDropout(11, 0.1), 5, rng)
    assert info.value.name == "availability"
    with pytest.raises(ParameterError) as info:
        run_selection(selector, BernoulliDropout(10, 0.1), 5, rng, ledger=ParticipationLedger(9))
    assert info.value.name == "ledger"
    with pytest.raises(ParameterError) as info:
        run_selection(selector, BernoulliDropout(10, 0.1), -1, rng)
    assert info.value.name == "rounds"


def test_frequency_view_is_live_and_read_only() -> None:
    ledger = ParticipationLedger(4)
    view = ledger.frequency_view
    ledger.record([0, 2])
    assert view.tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="read-only"):
        view[0] = 5
    ledger.record([2])
    assert view.tolist() == [1, 0, 2, 0]
    assert ledger.frequency.tolist() == [1, 0, 2, 0]


# --------------------------------------------------------------------------------------------
# Aggregation fairness gap F^(t) = (max_i f_i - min_i f_i) / t  (Section 6 of the paper).

ROUNDS = 3000


def _spread(fairness: bool, availability_seed: int, heterogeneous: bool) -> tuple[float, float]:
    rng = np.random.default_rng(availability_seed)
    availability = (
        BernoulliDropout.heterogeneous(120, rng) if heterogeneous else BernoulliDropout(120, 0.3)
    )
    ledger = run_selection(BatchPartitionSelector(120, 12, 4, fairness), availability, ROUNDS, rng)
    rate = ledger.frequency / ROUNDS
    return float(rate.max() - rate.min()), float(rate.min())


def test_fairness_aware_selection_closes_the_gap_with_equal_dropout() -> None:
    fair, _ = _spread(True, 0, heterogeneous=False)
    uniform, _ = _spread(False, 0, heterogeneous=False)
    # Measured with seeds 0-3: 0.003-0.004 versus 0.017-0.026.
    assert fair < 0.01
    assert fair < 0.5 * uniform


def test_fairness_aware_selection_reduces_the_gap_with_heterogeneous_dropout() -> None:
    # With the paper's heterogeneous dropout, lambda = 1 lifts the least served users to close
    # to the target rate, but the gap does not fall below about 0.05 at T = 4: only the batch of
    # l_min is steered, the other K/T - 1 batches are uniform among the available ones, so the
    # batches that are almost always available are over-served. Measured with seeds 0-3: gap
    # 0.07-0.12 (fair) versus 0.15-0.22 (uniform); minimum rate 0.067-0.090 versus 0.031-0.046
    # (the target is about K/N = 0.1).
    for seed in (0, 1):
        fair_gap, fair_min = _spread(True, seed, heterogeneous=True)
        uniform_gap, uniform_min = _spread(False, seed, heterogeneous=True)
        assert fair_gap < 0.75 * uniform_gap
        assert fair_min > 0.06
        assert fair_min > 1.5 * uniform_min


def test_the_ledger_records_what_the_aggregate_step_returns() -> None:
    """The aggregate step (e.g. the secure protocol) decides what the server saw, round by round."""
    selector = BatchPartitionSelector(12, 4, 2)
    seen: list[tuple[int, list[int]]] = []

    def first_batch_only(r: int, selected: np.ndarray) -> np.ndarray:
        seen.append((r, selected.tolist()))
        return selected[:2]

    rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)
    everyone = BernoulliDropout(12, 0.0)
    ledger = run_selection(selector, everyone, 6, rng_a, aggregate=first_batch_only)
    plain = run_selection(selector, everyone, 6, rng_b)
    assert [r for r, _ in seen] == list(range(6))
    for r, selected in seen:
        assert ledger.selected(r).tolist() == selected[:2]
        assert plain.selected(r).tolist() == selected  # the same selections without the step
