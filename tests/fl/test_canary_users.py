"""Canary users in a training run: selected beside the users, left out of their epsilons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.errors import ParameterError
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.training_config import TrainConfig


def _train(args: list[str], out: object, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*args, "--json", "--out", str(out)]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_canaries_run_beside_the_users_and_change_no_users_epsilon(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # batches of 2, heterogeneous dropout (the default) and 20 % of the selected users lost
    # inside SecAgg with distributed DP: the users' availability draws, batches, protocol
    # dropouts and noise must come out as without canaries
    args = ["train", "-N", "20", "-K", "8", "-R", "6", "--scheme", "multiround", "-T", "2"]
    args += ["--secagg", "--dp", "distributed", "--noise-multiplier", "1.0"]
    args += ["--protocol-dropout", "0.2"]
    out = _train([*args, "--canaries", "10"], tmp_path / "with", capsys)
    plain = _train(args, tmp_path / "without", capsys)
    est = out["epsilon_hat"]
    assert est["canaries"] == 10 and est["low"] <= est["epsilon"] <= est["high"]
    assert plain["epsilon_hat"] is None
    ledger, alone = (
        np.loadtxt(tmp_path / d / "participation.csv", delimiter=",", skiprows=1)
        for d in ("with", "without")
    )
    assert ledger.shape == (6, 30) and alone.shape == (6, 20)
    assert np.array_equal(ledger[:, :20], alone)  # every user's rounds as without canaries
    # 4 canaries (2 batches) beside each round of users, as 8 of 20 users (none in a round
    # that aggregated nobody)
    assert set(ledger[:, 20:].sum(axis=1)[alone.any(axis=1)]) == {4}
    assert not ledger[~alone.any(axis=1), 20:].any()
    assert out["users"] == 20 and out["privacy"]["per_user_epsilon"]["max"] > 0
    for key in (
        "per_user_epsilon",
        "epsilon_server",
        "epsilon_released",
        "accounted_noise_multiplier",
    ):
        assert out["privacy"][key] == plain["privacy"][key]
    assert (out["t_weak"], out["exposed_users"]) == (plain["t_weak"], plain["exposed_users"])


def test_canaries_come_at_the_users_rate_in_whole_batches() -> None:
    config = TrainConfig(users=20, per_round=8, rounds=2, dp="central", noise_multiplier=1.0)
    with pytest.raises(ParameterError, match="canaries: must be a multiple of 5"):
        TrainConfig(**{**config.to_dict(), "canaries": 7}).validate()
    batched = {**config.to_dict(), "scheme": "multiround", "target_privacy": 4}
    with pytest.raises(ParameterError, match="multiple of 20 .* units of 4"):
        TrainConfig(**{**batched, "canaries": 5}).validate()
    TrainConfig(**{**batched, "canaries": 20}).validate()


def test_canaries_need_a_dp_mechanism_and_stay_in_process() -> None:
    with pytest.raises(ParameterError, match="canaries: measure a DP mechanism"):
        TrainConfig(users=10, per_round=4, rounds=2, canaries=3).validate()
    from fedprivacy.flower.deploy.deploy_tasks import FedAvgTask

    config = TrainConfig(users=10, per_round=4, rounds=2, dp="central", noise_multiplier=1.0)
    with pytest.raises(ParameterError, match="not in a deployment"):
        FedAvgTask(TrainConfig(**{**config.to_dict(), "canaries": 3}))


def test_a_canary_sends_its_direction_at_the_clip_and_users_nothing() -> None:
    canaries = CanaryUsers.draw(first=5, count=2, dimension=8, clip=2.0, seed=1)
    updates = canaries.updates(np.array([0, 4, 5, 6]))
    assert sorted(updates) == [5, 6]
    assert np.allclose([np.linalg.norm(v) for v in updates.values()], 2.0)
    again = CanaryUsers.draw(first=5, count=2, dimension=8, clip=2.0, seed=1)
    assert np.array_equal(again.inserted, canaries.inserted)  # a resumed run draws the same
