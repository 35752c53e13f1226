"""The paper's guarantees, checked on simulations: T_weak >= T always, C of Theorem 1, F -> 0."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedprivacy.participation.availability import BernoulliDropout, TraceAvailability
from fedprivacy.participation.metrics import fairness_gap_curve, t_strong, theorem1_cardinality
from fedprivacy.participation.privacy import t_weak
from fedprivacy.participation.selectors import BatchPartitionSelector
from fedprivacy.pipeline.selection import run_selection


@st.composite
def batch_runs(draw: st.DrawFn) -> tuple[int, int, int, np.ndarray, bool]:
    t = draw(st.integers(1, 3))
    nb = draw(st.integers(1, 5))
    kb = draw(st.integers(1, nb))
    rounds = draw(st.integers(1, 12))
    n = t * nb
    cells = draw(st.lists(st.booleans(), min_size=rounds * n, max_size=rounds * n))
    trace = np.array(cells, dtype=bool).reshape(rounds, n)
    return n, kb * t, t, trace, draw(st.booleans())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_runs(), st.integers(0, 2**32 - 1))
def test_multiround_never_yields_t_weak_below_t(
    run: tuple[int, int, int, np.ndarray, bool], seed: int
) -> None:
    n, k, t, trace, fairness = run
    selector = BatchPartitionSelector(n, k, t, fairness=fairness)
    ledger = run_selection(
        selector, TraceAvailability(trace), trace.shape[0], np.random.default_rng(seed)
    )
    p = ledger.matrix()
    result = t_weak(p)
    if result.upper is None:
        assert not p.any()
        return
    assert result.exact
    assert result.lower is not None and result.lower >= t
    strong = t_strong(p)
    assert strong is not None and strong >= t


@pytest.mark.parametrize(
    ("n", "k", "t", "p"),
    [(120, 12, 3, 0.1), (120, 12, 4, 0.2), (60, 12, 6, 0.05), (100, 20, 5, 0.1), (40, 8, 2, 0.3)],
)
def test_simulated_cardinality_matches_theorem_1(n: int, k: int, t: int, p: float) -> None:
    rounds = 30_000
    selector = BatchPartitionSelector(n, k, t)
    ledger = run_selection(selector, BernoulliDropout(n, p), rounds, np.random.default_rng(1))
    simulated = ledger.cardinalities.mean()
    expected = theorem1_cardinality(n, k, t, p)
    assert abs(simulated - expected) <= 0.01 * expected, (simulated, expected)


@pytest.mark.parametrize("fairness", [False, True])
def test_fairness_gap_vanishes_for_multiround_with_equal_dropout(fairness: bool) -> None:
    # Theorem 1's setting (one dropout probability for all users): F -> 0
    selector = BatchPartitionSelector(120, 12, 4, fairness=fairness)
    ledger = run_selection(selector, BernoulliDropout(120, 0.2), 8000, np.random.default_rng(3))
    gap = fairness_gap_curve(ledger.matrix())
    assert gap[-1] < 0.02
    assert gap[-1] < 0.5 * gap[499]
