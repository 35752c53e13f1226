"""``--guard`` on ``simulate`` and ``train``: the rounds that would expose a user never happen."""

from __future__ import annotations

import json

import pytest

from fedprivacy.cli.main import main

BASE = ["simulate", "--scheme", "random", "-N", "30", "-K", "6", "-R", "80", "--json"]


def run_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    assert main([*BASE, *extra]) == 0
    return dict(json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("mode", ["refuse", "shrink"])
def test_guarded_random_selection_exposes_nobody(
    capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    plain = run_json(capsys)
    assert plain["exposed_users"] and "guard" not in plain
    guarded = run_json(capsys, "--guard", mode)
    assert guarded["exposed_users"] == []
    guard = guarded["guard"]
    assert isinstance(guard, dict) and guard["mode"] == mode and guard["target"] == 2
    assert guard["rounds_changed"] == len(guard["events"]) > 0
    first = guard["events"][0]
    assert first["round"] == guard["first_round_changed"] and "expose" in first["reason"]
    t_weak = guarded["t_weak"]
    assert isinstance(t_weak, dict) and t_weak["lower"] >= 2


def test_a_guard_target_needs_the_guard(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--guard-target", "3"]) == 2
    assert "--guard-target: is the target of --guard" in capsys.readouterr().err
    assert main([*BASE, "--guard", "refuse", "--guard-target", "1"]) == 2
    assert "--guard-target" in capsys.readouterr().err


def test_guarded_training_exposes_nobody(capsys: pytest.CaptureFixture[str]) -> None:
    train = ["train", "-R", "12", "-N", "12", "-K", "4", "--scheme", "random", "--json"]
    assert main([*train, "--metrics", "bounds"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["exposed_users"] > 0 and "guard" not in plain
    assert main([*train, "--metrics", "bounds", "--guard", "refuse"]) == 0
    guarded = json.loads(capsys.readouterr().out)
    assert guarded["exposed_users"] == 0 and guarded["t_weak_lower"] >= 2
    assert guarded["guard"]["rounds_refused"] == guarded["guard"]["rounds_changed"] > 0
    assert guarded["skipped_rounds"] >= guarded["guard"]["rounds_refused"]
