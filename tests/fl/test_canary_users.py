"""Canary users in a training run: selected like anyone, left out of the users' epsilons."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedprivacy.cli.main import main
from fedprivacy.errors import ParameterError
from fedprivacy.fl.canary_users import CanaryUsers
from fedprivacy.fl.training_config import TrainConfig


def test_a_run_with_canaries_reports_epsilon_hat_and_only_the_users_epsilons(
    capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    args = ["train", "-N", "20", "-K", "8", "-R", "6", "--dropout", "0", "--dp", "central"]
    args += ["--noise-multiplier", "1.0", "--canaries", "10", "--json", "--out", str(tmp_path)]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    est = out["epsilon_hat"]
    assert est["canaries"] == 10 and est["low"] <= est["epsilon"] <= est["high"]
    ledger = np.loadtxt(tmp_path / "participation.csv", delimiter=",", skiprows=1)  # type: ignore[operator]
    assert ledger.shape == (6, 30) and ledger[:, 20:].any()  # the canaries were selected
    # the report's per-user epsilons and the server's view are the 20 users': the canaries'
    # updates are known to whoever inserted them (6 rounds, 20 users: nobody isolated)
    assert out["users"] == 20 and out["privacy"]["per_user_epsilon"]["max"] > 0
    assert out["t_weak"] is not None and out["exposed_users"] == 0


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
