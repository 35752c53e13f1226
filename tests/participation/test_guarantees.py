"""The paper's guarantees, checked on simulations: T_weak >= T always, C of Theorem 1, F -> 0.

Multi-RoundSecAgg's guarantees are checked under every fairness rule of
:data:`~fedprivacy.participation.fairness.FAIRNESS_RULES` (the paper's and the authors').
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedprivacy.participation.availability import BernoulliDropout, TraceAvailability
from fedprivacy.participation.fairness import FAIRNESS_RULE_NAMES
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


def _assert_unions_of_whole_batches(p: np.ndarray, t: int, k: int) -> None:
    """Every row of ``p`` is empty or the union of ``K/T`` whole batches of ``T`` users."""
    for row in p.astype(bool):
        batches = row.reshape(-1, t)
        whole = batches.all(axis=1)
        assert np.array_equal(batches.any(axis=1), whole)  # no batch is split
        assert int(whole.sum()) in (0, k // t)


@pytest.mark.parametrize("rule", FAIRNESS_RULE_NAMES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_runs(), st.integers(0, 2**32 - 1))
def test_multiround_never_yields_t_weak_below_t(
    rule: str, run: tuple[int, int, int, np.ndarray, bool], seed: int
) -> None:
    n, k, t, trace, fairness = run
    selector = BatchPartitionSelector(n, k, t, fairness=fairness, fairness_rule=rule)
    ledger = run_selection(
        selector, TraceAvailability(trace), trace.shape[0], np.random.default_rng(seed)
    )
    p = ledger.matrix()
    _assert_unions_of_whole_batches(p, t, k)
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


@pytest.mark.parametrize(
    ("fairness", "rule"), [(False, "paper"), (True, "paper"), (True, "authors")]
)
def test_fairness_gap_vanishes_for_multiround_with_equal_dropout(fairness: bool, rule: str) -> None:
    # Theorem 1's setting (one dropout probability for all users): F -> 0
    selector = BatchPartitionSelector(120, 12, 4, fairness=fairness, fairness_rule=rule)
    ledger = run_selection(selector, BernoulliDropout(120, 0.2), 8000, np.random.default_rng(3))
    gap = fairness_gap_curve(ledger.matrix())
    assert gap[-1] < 0.02
    assert gap[-1] < 0.5 * gap[499]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_runs(), st.integers(0, 2**32 - 1))
def test_authors_rule_selects_the_least_served_available_batches(
    run: tuple[int, int, int, np.ndarray, bool], seed: int
) -> None:
    # each round: the selected batches' scores (their users' counts so far) are the K/T smallest
    n, k, t, trace, _ = run
    selector = BatchPartitionSelector(n, k, t, fairness=True, fairness_rule="authors")
    p = run_selection(
        selector, TraceAvailability(trace), trace.shape[0], np.random.default_rng(seed)
    ).matrix()
    counts = np.cumsum(p, axis=0) - p  # the counts before each round
    for row, before, available in zip(p.astype(bool), counts, trace, strict=True):
        ok = available.reshape(-1, t).all(axis=1)
        scores = before.reshape(-1, t).sum(axis=1)
        chosen = row.reshape(-1, t).all(axis=1)
        if ok.sum() < k // t:
            assert not row.any()
            continue
        assert np.sort(scores[chosen]).tolist() == np.sort(scores[ok])[: k // t].tolist()


def _final_gap(rule: str, seed: int, rounds: int = 3000) -> float:
    rng = np.random.default_rng(seed)
    availability = BernoulliDropout.heterogeneous(120, rng)
    selector = BatchPartitionSelector(120, 12, 4, fairness=True, fairness_rule=rule)
    ledger = run_selection(selector, availability, rounds, rng)
    return float(fairness_gap_curve(ledger.matrix())[-1])


def test_authors_rule_drives_the_gap_towards_zero_under_heterogeneous_dropout() -> None:
    # The paper's Fig. 3b (F -> 0 under heterogeneous dropout) holds for the authors' rule, not
    # for Algorithm 2 as printed. Measured at N = 120, K = 12, T = 4, 3000 rounds, seeds 0-3:
    # F = 0.002-0.032 (authors) versus 0.067-0.116 (paper).
    for seed in (0, 1):
        authors, paper = _final_gap("authors", seed), _final_gap("paper", seed)
        assert authors < 0.03
        assert authors < 0.5 * paper
