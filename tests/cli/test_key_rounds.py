"""``flower deploy --key-rounds``: checked before any process starts, written into each policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedprivacy.cli.main import main
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.deploy_tasks import deploy_task
from fedprivacy.flower.nodes.operator import write_policies
from fedprivacy.policy import PartyPolicy


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "--key-rounds: reuses the keys of secure rounds: add --secagg"),
        (["--secagg", "--key-rounds", "0"], "--key-rounds: must be >= 1, got 0"),
    ],
)
def test_bad_key_rounds_are_refused_before_any_process(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    out = tmp_path / "run"
    args = ["flower", "deploy", "-N", "6", "--key-rounds", "5", *extra, "--out", str(out)]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_each_nodes_policy_file_says_how_long_it_keeps_its_keys(tmp_path: Path) -> None:
    task = deploy_task(TrainConfig(users=4, per_round=4, secagg=True), None)
    folder = write_policies(task.policy, tmp_path, 4, {}, None, key_rounds=7)
    policies = [PartyPolicy.from_toml(folder / f"node-{u}.toml") for u in range(4)]
    assert [p.key_rounds for p in policies] == [7] * 4
    fresh = write_policies(task.policy, tmp_path / "fresh", 4, {}, None)
    assert PartyPolicy.from_toml(fresh / "node-0.toml").key_rounds == 1
