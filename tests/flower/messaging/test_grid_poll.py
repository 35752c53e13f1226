"""Our pull loop over Flower's grid: done as soon as every reply is in, or at the timeout.

A fake clock drives both the loop and the fake grid, so the pauses are checked exactly (no
timing assertion on this machine).
"""

from __future__ import annotations

from typing import Any

import pytest

from fedprivacy.flower.messaging import grid as grid_module
from fedprivacy.flower.messaging.grid import FIRST_POLL, LAST_POLL, send_and_receive


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class _Reply:
    def __init__(self, to: str) -> None:
        self.metadata = type("Metadata", (), {"reply_to_message_id": to})()


class FakeGrid:
    """Replies to message ``i`` once ``delays[i]`` seconds of the clock have passed."""

    def __init__(self, clock: Clock, delays: dict[str, float]) -> None:
        self.clock, self.delays = clock, delays

    def push_messages(self, messages: Any) -> list[str]:
        return list(self.delays)

    def pull_messages(self, ids: Any) -> list[_Reply]:
        return [_Reply(i) for i in sorted(ids) if self.delays[i] <= self.clock.now]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(grid_module.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(grid_module.time, "sleep", fake.sleep)
    return fake


def test_a_fast_stage_ends_right_after_its_last_reply(clock: Clock) -> None:
    replies = send_and_receive(FakeGrid(clock, {"a": 0.0, "b": 0.3}), [], 30.0)  # type: ignore[arg-type]
    assert sorted(r.metadata.reply_to_message_id for r in replies) == ["a", "b"]  # each once
    assert clock.sleeps[0] == FIRST_POLL and clock.sleeps == sorted(clock.sleeps)
    assert 0.3 <= clock.now < 0.5  # Flower's own loop would have slept 3 s


def test_long_stages_pull_at_most_every_last_poll(clock: Clock) -> None:
    send_and_receive(FakeGrid(clock, {"a": 20.0}), [], 60.0)  # type: ignore[arg-type]
    assert max(clock.sleeps) == LAST_POLL and 20.0 <= clock.now <= 20.0 + LAST_POLL
    assert len(clock.sleeps) < 20.0 / LAST_POLL + 10  # four pulls a second once the pause is 0.25


def test_a_node_that_never_answers_is_left_out_at_the_timeout(clock: Clock) -> None:
    replies = send_and_receive(FakeGrid(clock, {"a": 0.0, "b": 1e9}), [], 5.0)  # type: ignore[arg-type]
    assert [r.metadata.reply_to_message_id for r in replies] == ["a"]
    assert clock.now == pytest.approx(5.0)  # not a pause past the deadline
