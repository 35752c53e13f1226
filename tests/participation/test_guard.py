"""The guard: a guarded run never lets the server isolate a user or a group below the target."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedprivacy.errors import ParameterError
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.availability import AlwaysAvailable, BernoulliDropout
from fedprivacy.participation.guard import PrivacyGuard
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import make_selector
from fedprivacy.participation.units import unit_size
from fedprivacy.pipeline.selection import run_selection

BruteForce = Callable[[np.ndarray], int | None]


def guarded_run(
    scheme: str,
    n: int,
    k: int,
    target: int,
    mode: str,
    seed: int,
    rounds: int,
    t: int | None = None,
) -> tuple[ParticipationLedger, PrivacyGuard]:
    ledger = ParticipationLedger(n)
    selector = make_selector(scheme, n, k, target_privacy=t)
    guard = PrivacyGuard(selector, ledger, target=target, mode=mode)
    rng = np.random.default_rng(seed)
    availability = BernoulliDropout.heterogeneous(n, rng)
    run_selection(guard, availability, rounds, rng, ledger=ledger)
    return ledger, guard


@settings(max_examples=25, deadline=None)
@given(
    scheme=st.sampled_from(["random", "weighted-random"]),
    target=st.integers(2, 4),
    mode=st.sampled_from(["refuse", "shrink"]),
    seed=st.integers(0, 10_000),
)
def test_a_guarded_run_keeps_its_target(
    scheme: str, target: int, mode: str, seed: int, brute_force_t_weak: BruteForce
) -> None:
    ledger, guard = guarded_run(scheme, 8, 3, target, mode, seed, rounds=12)
    p = ledger.matrix()
    result = audit_ledger(ledger, time_limit=10)
    assert result.exposure.exposed.size == 0
    truth = brute_force_t_weak(p)
    assert truth is None or truth >= target
    assert all(d.aggregated < d.proposed for d in guard.decisions)
    if mode == "refuse":
        assert all(d.aggregated == 0 for d in guard.decisions)


@pytest.mark.parametrize("mode", ["refuse", "shrink"])
def test_without_the_guard_random_selection_exposes_users(mode: str) -> None:
    n, k, rounds = 30, 6, 80
    plain = ParticipationLedger(n)
    selector = make_selector("random", n, k)
    run_selection(selector, AlwaysAvailable(n), rounds, np.random.default_rng(1), ledger=plain)
    assert audit_ledger(plain, time_limit=10).exposure.exposed.size > 0
    ledger, guard = guarded_run("random", n, k, 2, mode, 1, rounds)
    assert audit_ledger(ledger, time_limit=10).exposure.exposed.size == 0
    assert guard.decisions and guard.decisions[0].reason.startswith("would expose")


def test_shrinking_multiround_keeps_batches_whole() -> None:
    ledger, guard = guarded_run("multiround", 24, 12, 6, "shrink", 3, 40, t=3)
    assert unit_size(guard) == 3 and guard.decisions
    for r in range(ledger.rounds):
        members = ledger.selected(r)
        batches, counts = np.unique(members // 3, return_counts=True)
        assert np.all(counts == 3), (r, members)
    assert audit_ledger(ledger, time_limit=10).t_weak.lower >= 6


def test_multiround_at_its_own_target_is_never_refused() -> None:
    ledger, guard = guarded_run("multiround", 24, 12, 4, "refuse", 0, 60, t=4)
    assert guard.decisions == [] and ledger.cardinalities.max() == 12


def test_events_and_refusals() -> None:
    ledger = ParticipationLedger(4)
    guard = PrivacyGuard(make_selector("random", 4, 2), ledger, prime=1048573)
    ledger.record([0, 1])
    available = np.ones(4, dtype=bool)
    rng = np.random.default_rng(0)
    while not guard.decisions:
        ledger.record(guard.select(available, ledger.frequency, rng))
    event = guard.decisions[0].to_event()
    assert event["event"] == "guard refused" and event["aggregated"] == 0
    with pytest.raises(ParameterError, match="guard"):
        PrivacyGuard(make_selector("random", 4, 2), ledger, mode="warn")
    with pytest.raises(ParameterError, match="target"):
        PrivacyGuard(make_selector("random", 4, 2), ledger, target=1)
    with pytest.raises(ParameterError, match="ledger"):
        PrivacyGuard(make_selector("random", 5, 2), ledger)
