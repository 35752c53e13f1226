"""The round loop: what the ledger records, the callbacks, the final round, resuming, errors."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import AlwaysAvailable, BernoulliDropout
from fedprivacy.participation.guard import PrivacyGuard
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import (
    BatchPartitionSelector,
    RandomSelector,
    make_selector,
)
from fedprivacy.pipeline import Algorithm, FederatedRun, RoundContext, RoundResult, SelectionOnly
from fedprivacy.pipeline.selection import run_selection


class DropFirst(Algorithm[int]):
    """Aggregates all but the lowest selected user; records the round index and the context."""

    def __init__(self, num_users: int) -> None:
        self.num_users = num_users
        self.contexts: list[RoundContext] = []

    def run_round(self, ctx: RoundContext) -> RoundResult[int]:
        self.contexts.append(ctx)
        return RoundResult(ctx.selected[1:], ctx.round_index)


def test_the_ledger_records_what_the_algorithm_aggregated_not_the_selection() -> None:
    algo = DropFirst(8)
    run = FederatedRun(
        RandomSelector(8, 3), AlwaysAvailable(8), algo, selection_rng=np.random.default_rng
    )
    results = run.run(5)
    assert [r.record for r in results] == [0, 1, 2, 3, 4]
    for t, ctx in enumerate(algo.contexts):
        assert ctx.round_index == t and ctx.selected.size == 3
        np.testing.assert_array_equal(run.ledger.selected(t), ctx.selected[1:])
    assert [c.final for c in algo.contexts] == [False] * 4 + [True]
    assert run.ledger.cardinalities.tolist() == [2] * 5


def test_callbacks_see_every_result_and_progress_counts_rounds() -> None:
    seen: list[int] = []
    ticks: list[int] = []
    run = FederatedRun(
        RandomSelector(6, 2),
        AlwaysAvailable(6),
        DropFirst(6),
        selection_rng=np.random.default_rng,
        callbacks=[lambda r: seen.append(r.record)],
    )
    run.run(3, progress=ticks.append)
    assert seen == [0, 1, 2] and ticks == [1, 1, 1]


def test_a_resumed_ledger_continues_the_round_indices_bit_for_bit() -> None:
    """Per-round generators seeded by (seed, t): a run split in two equals one run."""
    sel = BatchPartitionSelector(12, 4, 2)
    avail = BernoulliDropout(12, 0.3)

    def rng(t: int) -> np.random.Generator:
        return np.random.default_rng([7, t])

    whole = FederatedRun(sel, avail, SelectionOnly(12), selection_rng=rng)
    whole.run(20)
    first = FederatedRun(sel, avail, SelectionOnly(12), selection_rng=rng)
    first.run(8)
    rest = FederatedRun(sel, avail, SelectionOnly(12), selection_rng=rng, ledger=first.ledger)
    assert rest.round == 8
    rest.run(12)
    np.testing.assert_array_equal(whole.ledger.matrix(), rest.ledger.matrix())


def test_run_selection_is_the_loop_with_selection_only() -> None:
    """The old hand-written loop, replayed: the same draws in the same order."""
    sel, avail = RandomSelector(30, 5), BernoulliDropout(30, 0.2)
    ledger = run_selection(sel, avail, 40, np.random.default_rng(3))
    rng = np.random.default_rng(3)
    expected = ParticipationLedger(30)
    for t in range(40):
        expected.record(sel.select(avail.sample(t, rng), expected.frequency_view, rng))
    np.testing.assert_array_equal(ledger.matrix(), expected.matrix())


def test_an_aggregate_step_decides_what_selection_only_records() -> None:
    def half(_t: int, selected: NDArray[np.intp]) -> NDArray[np.intp]:
        return selected[: selected.size // 2]

    ledger = run_selection(
        RandomSelector(10, 4), AlwaysAvailable(10), 6, np.random.default_rng(0), aggregate=half
    )
    assert ledger.cardinalities.tolist() == [2] * 6


def test_disagreeing_user_counts_are_refused() -> None:
    rng = np.random.default_rng
    with pytest.raises(ParameterError, match="availability"):
        FederatedRun(RandomSelector(5, 2), AlwaysAvailable(6), SelectionOnly(5), selection_rng=rng)
    with pytest.raises(ParameterError, match="users"):
        FederatedRun(RandomSelector(5, 2), AlwaysAvailable(5), SelectionOnly(4), selection_rng=rng)
    with pytest.raises(ParameterError, match="ledger"):
        FederatedRun(
            RandomSelector(5, 2),
            AlwaysAvailable(5),
            SelectionOnly(5),
            selection_rng=rng,
            ledger=ParticipationLedger(7),
        )
    run = FederatedRun(
        RandomSelector(5, 2), AlwaysAvailable(5), SelectionOnly(5), selection_rng=rng
    )
    with pytest.raises(ParameterError, match="rounds"):
        run.run(-1)


def test_a_progress_with_a_status_gets_the_server_view_after_every_round() -> None:
    seen: list[str] = []
    ticks: list[int] = []

    def progress(n: int) -> None:
        ticks.append(n)

    progress.status = seen.append  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    users = (RandomSelector(6, 2), AlwaysAvailable(6), SelectionOnly(6))
    run = FederatedRun(*users, selection_rng=lambda t: rng, live_audit=True)
    run.run(4, progress=progress)
    assert ticks == [1, 1, 1, 1] and len(seen) == 4
    assert run.view is not None and seen[-1] == run.view.describe() and "T_weak" in seen[0]
    quiet = FederatedRun(*users, selection_rng=lambda t: rng)
    quiet.run(1, progress=progress)  # no live audit: no status, the tick only
    assert len(seen) == 4 and ticks == [1] * 5


class AheadDropFirst(DropFirst):
    """As :class:`DropFirst`, drawing the next round's selection before it returns."""

    def __init__(self, num_users: int, abort: int | None = None) -> None:
        super().__init__(num_users)
        self.early: list[NDArray[np.intp] | None] = []
        self.abort = abort

    def run_round(self, ctx: RoundContext) -> RoundResult[int]:
        self.contexts.append(ctx)
        aggregating = ctx.selected[1:]
        if ctx.ahead is not None:
            self.early.append(ctx.ahead(aggregating.tolist()))
        if ctx.round_index == self.abort:
            aggregating = aggregating[:0]
        return RoundResult(aggregating, ctx.round_index)


@pytest.mark.parametrize(
    ("scheme", "fairness"), [("random", False), ("multiround", False), ("multiround", True)]
)
def test_a_selection_drawn_ahead_is_the_one_the_loop_would_have_drawn(
    scheme: str, fairness: bool
) -> None:
    """Per-round generators and the round's aggregated set counted: the same selections."""

    def run(algo: DropFirst) -> tuple[FederatedRun[int], list[list[int]]]:
        sel = make_selector(scheme, 12, 4, target_privacy=2, fairness=fairness)
        loop = FederatedRun(
            sel,
            BernoulliDropout(12, 0.2),
            algo,
            selection_rng=lambda t: np.random.default_rng([7, t]),
        )
        loop.run(8)
        return loop, [c.selected.tolist() for c in algo.contexts]

    ahead = AheadDropFirst(12)
    plain_loop, plain = run(DropFirst(12))
    ahead_loop, drawn = run(ahead)
    assert drawn == plain
    assert [e.tolist() for e in ahead.early if e is not None] == drawn[1:]
    assert len(ahead.early) == 7  # the final round draws nothing ahead
    assert ahead_loop.ledger.frequency.tolist() == plain_loop.ledger.frequency.tolist()


def test_after_an_abort_the_next_round_keeps_the_selection_drawn_ahead() -> None:
    algo = AheadDropFirst(12, abort=2)
    loop = FederatedRun(
        make_selector("random", 12, 4),
        AlwaysAvailable(12),
        algo,
        selection_rng=lambda t: np.random.default_rng([3, t]),
    )
    loop.run(4)
    assert loop.ledger.selected(2).size == 0  # what the server really aggregated
    early = algo.early[2]
    assert early is not None and algo.contexts[3].selected.tolist() == early.tolist()


def test_a_privacy_guard_is_never_asked_ahead() -> None:
    """The guard must see what round t really aggregated before round t + 1 goes ahead."""
    ledger = ParticipationLedger(8)
    guard = PrivacyGuard(RandomSelector(8, 4), ledger, prime=1048573)
    algo = AheadDropFirst(8)
    loop = FederatedRun(
        guard, AlwaysAvailable(8), algo, selection_rng=np.random.default_rng, ledger=ledger
    )
    loop.run(3)
    assert algo.early == [None, None]


class AheadAll(DropFirst):
    """Aggregates every selected user and draws the next round ahead (overlapped rounds)."""

    def run_round(self, ctx: RoundContext) -> RoundResult[int]:
        if ctx.ahead is not None:
            ctx.ahead(ctx.selected.tolist())
        return RoundResult(ctx.selected, ctx.round_index)


def test_a_privacy_filter_charges_the_round_before_the_next_is_drawn_ahead() -> None:
    """Issue #50, finding 5: with a cap of one round a user, drawn ahead, nobody gets two."""
    from fedprivacy.participation.privacy_filter import PrivacyFilter

    ledger = ParticipationLedger(8)
    budgeted = PrivacyFilter(
        RandomSelector(8, 2),
        ledger,
        budget=0.9,
        noise_multiplier=5.0,
        delta=1e-5,
        accountant="pld",
    )
    assert budgeted.max_rounds == 1
    loop = FederatedRun(
        budgeted,
        AlwaysAvailable(8),
        AheadAll(8),
        selection_rng=lambda t: np.random.default_rng([5, t]),
        ledger=ledger,
    )
    loop.run(8)
    assert ledger.frequency.max() == 1 and ledger.frequency.sum() == 8
