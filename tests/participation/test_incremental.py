"""The incremental audit against the batch audit and the brute force, after every round."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedprivacy.errors import ParameterError
from fedprivacy.linalg import exact_rank
from fedprivacy.participation import audit as audit_module
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.incremental import AuditView, IncrementalAudit, random_prime
from fedprivacy.participation.ledger import ParticipationLedger

BruteForce = Callable[[np.ndarray], int | None]


def check_prefix(p: np.ndarray, view: AuditView, brute: BruteForce | None) -> None:
    """``view`` (after the rounds of ``p``) against the batch audit of ``p``: equal exposure and
    ``T_strong``, an interval inside the batch audit's bounds; with ``brute``, it holds the
    brute-force answer and meets the interval of the batch audit's search."""
    ledger = ParticipationLedger.from_matrix(p)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(audit_module, "SEARCH_CELLS", 0)  # the batch audit's bounds alone
        batch = audit_ledger(ledger, time_limit=20)
    assert view.rounds == p.shape[0]
    assert view.exposed == tuple(batch.exposure.exposed.tolist())
    assert view.t_strong == batch.exposure.t_strong
    assert view.rank == exact_rank(p)
    lower, upper = view.t_weak
    if batch.t_weak.upper is None:
        assert (lower, upper) == (None, None)
        return
    assert lower is not None and upper is not None
    assert batch.t_weak.lower <= lower <= upper <= batch.t_weak.upper  # never wider
    if view.exposed:
        assert (lower, upper) == (1, 1)
    else:
        assert lower >= max(2, batch.exposure.t_strong)
    if brute is not None:
        assert lower <= brute(p) <= upper
        searched = audit_ledger(ledger, time_limit=20).t_weak
        assert max(lower, searched.lower) <= min(upper, searched.upper)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_equals_the_batch_audit_after_every_round(
    data: st.DataObject, small_logs: st.SearchStrategy[np.ndarray], brute_force_t_weak: BruteForce
) -> None:
    p = data.draw(small_logs)
    audit = IncrementalAudit(p.shape[1])
    for r in range(p.shape[0]):
        check_prefix(p[: r + 1], audit.add_round(np.flatnonzero(p[r])), brute_force_t_weak)


@pytest.mark.parametrize("density", [0.05, 0.3])
def test_larger_random_logs_match_the_batch_audit(density: float) -> None:
    rng = np.random.default_rng(7)
    p = (rng.random((60, 50)) < density).astype(np.uint8)
    audit = IncrementalAudit(50)
    for r in range(p.shape[0]):
        view = audit.add_round(np.flatnonzero(p[r]))
        if r % 10 == 9:
            check_prefix(p[: r + 1], view, None)


def test_batch_logs_are_exact_once_a_batch_is_exposed(batch_log: Callable[..., np.ndarray]) -> None:
    p = batch_log(40, 3, 4, 60, seed=3, alone=5)
    audit = IncrementalAudit(p.shape[1])
    views = [audit.add_round(np.flatnonzero(row)) for row in p]
    assert views[-1].t_weak == (3, 3) and views[-1].exposed == ()
    check_prefix(p, views[-1], None)


def test_a_skipped_round_changes_nothing_but_the_count() -> None:
    audit = IncrementalAudit(3, prime=1048573)
    before = audit.add_round([0, 1])
    after = audit.add_round([])
    assert after.rounds == 2 and (after.rank, after.t_weak) == (before.rank, before.t_weak)
    assert IncrementalAudit(2).view().t_weak == (None, None)


def test_peek_leaves_the_audit_unchanged() -> None:
    audit = IncrementalAudit(4, prime=1048573)
    audit.add_round([0, 1, 2])
    peeked = audit.peek([2])
    assert peeked.exposed == (2,) and audit.view().exposed == ()
    assert audit.add_round([2]) == peeked


def test_of_ledger_replays_every_round() -> None:
    ledger = ParticipationLedger.from_matrix([[1, 1, 0, 0], [0, 1, 1, 0], [1, 0, 1, 1]])
    audit = IncrementalAudit.of_ledger(ledger)
    assert audit.view() == IncrementalAudit.of_ledger(ledger, prime=random_prime()).view()
    check_prefix(ledger.matrix(), audit.view(), None)


@pytest.mark.parametrize(
    ("users", "word"), [([0, 0], "twice"), ([3], "must lie"), ([-1], "must lie")]
)
def test_bad_rounds_are_refused(users: list[int], word: str) -> None:
    with pytest.raises(ParameterError, match=word):
        IncrementalAudit(3).add_round(users)


@pytest.mark.parametrize("prime", [4, 2, 2**31 + 11])
def test_bad_primes_are_refused(prime: int) -> None:
    with pytest.raises(ParameterError, match="prime"):
        IncrementalAudit(3, prime=prime)
