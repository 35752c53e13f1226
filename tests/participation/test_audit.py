"""The audit's certified T_weak interval on random and batch-structured logs, on both paths."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fedprivacy.participation import audit
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.ledger import ParticipationLedger

BruteForce = Callable[[np.ndarray], int | None]
BatchLog = Callable[..., np.ndarray]


def check(p: np.ndarray, brute: BruteForce) -> audit.AuditResult:
    """The interval's invariants against the brute-force T_weak, and the witness."""
    res = audit_ledger(ParticipationLedger.from_matrix(p), time_limit=20)
    result, t_strong = res.t_weak, res.exposure.t_strong
    expected = brute(p)
    if expected is None:
        assert result.lower is None and result.upper is None
        return res
    assert result.lower is not None and result.upper is not None and t_strong is not None
    assert result.lower <= expected <= result.upper
    assert result.lower >= t_strong
    if res.exposure.exposed.size:
        assert (result.lower, result.upper) == (1, 1)
    if result.witness:
        combo = np.asarray(result.witness, dtype=object) @ p.astype(object)
        assert tuple(np.flatnonzero(combo != 0).tolist()) == result.support
        assert len(result.support) == result.upper
    return res


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_search_interval_holds_the_brute_force_answer(
    data: st.DataObject, small_logs: st.SearchStrategy[np.ndarray], brute_force_t_weak: BruteForce
) -> None:
    check(data.draw(small_logs), brute_force_t_weak)


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_bounds_alone_hold_the_brute_force_answer(
    data: st.DataObject, small_logs: st.SearchStrategy[np.ndarray], brute_force_t_weak: BruteForce
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(audit, "SEARCH_CELLS", 0)  # the bounds of a log too large to search
        res = check(data.draw(small_logs), brute_force_t_weak)
    assert res.fast_t_weak or res.t_weak.upper is None


@pytest.mark.parametrize("size", [2, 3, 5])
def test_batch_logs_get_the_exact_batch_size(size: int, batch_log: BatchLog) -> None:
    # 800 batches, 8 a round, 800 rounds: the issue's log, too large for the search at 30 s
    p = batch_log(800, size, 8, 800, seed=size)
    res = audit_ledger(ParticipationLedger.from_matrix(p), time_limit=30)
    assert res.fast_t_weak and res.exposure.exposed.size == 0
    assert (res.t_weak.lower, res.t_weak.upper) == (size, size) == (res.exposure.t_strong,) * 2
    combo = np.asarray(res.t_weak.witness, dtype=object) @ p.astype(object)
    assert np.flatnonzero(combo != 0).tolist() == list(res.t_weak.support)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_quotient_of_full_column_rank_gives_the_exact_t_weak_without_search(
    data: st.DataObject, batch_log: BatchLog
) -> None:
    """Random batch logs: where the classes' columns are independent, T_weak = T_strong exactly.

    The rank is checked here independently (floating point, small matrices); the audit may
    neither search (no cells) nor look for a batch's witness, so its exactness comes from the
    rank certificate alone (without it 199 of 275 such logs stay intervals).
    """
    size, batches = data.draw(st.integers(2, 4)), data.draw(st.integers(2, 30))
    per_round = data.draw(st.integers(1, batches))
    rounds = data.draw(st.integers(batches, 3 * batches))
    p = batch_log(batches, size, per_round, rounds, data.draw(st.integers(0, 2**31)))
    used = p[:, p.any(axis=0)]
    quotient = np.unique(used, axis=1)  # one column per class of identical columns
    assume(np.linalg.matrix_rank(quotient.astype(float)) == quotient.shape[1])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(audit, "SEARCH_CELLS", 0)
        mp.setattr(audit, "_class_bound", lambda *_: None)
        res = audit_ledger(ParticipationLedger.from_matrix(p), time_limit=20)
    assert res.exposure.exposed.size == 0 and res.fast_t_weak
    assert res.t_weak.lower == res.t_weak.upper == res.exposure.t_strong
    assert len(res.t_weak.support) == res.t_weak.upper


def test_the_issues_batch_log_is_exact(batch_log: BatchLog) -> None:
    """1,500 batches of 2 over 1,600 rounds of 20 batches: [2, 40] before the rank test."""
    p = batch_log(1500, 2, 20, 1600, seed=0)
    res = audit_ledger(ParticipationLedger.from_matrix(p), time_limit=30)
    assert (res.t_weak.lower, res.t_weak.upper) == (2, 2)


def test_one_column_per_batch_exposed_means_t_weak_one(batch_log: BatchLog) -> None:
    p = batch_log(800, 1, 8, 800, seed=0)  # the same log with one column per batch
    res = audit_ledger(ParticipationLedger.from_matrix(p), time_limit=30)
    assert res.exposure.exposed.size == 800
    assert (res.t_weak.lower, res.t_weak.upper) == (1, 1)


def test_exposed_without_an_explicit_witness_is_still_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "SEARCH_CELLS", 0)
    monkeypatch.setattr(audit, "exposure_witness", lambda *args: None)
    res = audit_ledger(ParticipationLedger.from_matrix([[1, 1, 0], [0, 1, 0]]), time_limit=5)
    assert (res.t_weak.lower, res.t_weak.upper) == (1, 1)
    assert res.t_weak.witness == () and res.t_weak.support == (0,)


def test_time_limit_decides_how_far_the_search_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    p = (rng.random((20, 100)) < 0.2).astype(np.uint8)  # 100 classes x 20 rounds = 2,000 cells
    monkeypatch.setattr(audit, "SEARCH_CELLS", 1_000)  # per 30 s of budget
    ledger = ParticipationLedger.from_matrix(p)
    bounds = audit_ledger(ledger, time_limit=30)
    assert bounds.fast_t_weak and not bounds.t_weak.exact  # bounds alone leave an interval
    searched = audit_ledger(ledger, time_limit=90)
    assert not searched.fast_t_weak and searched.t_weak.rank > 0
    assert bounds.t_weak.lower <= searched.t_weak.lower <= searched.t_weak.upper
    assert searched.t_weak.upper <= bounds.t_weak.upper
