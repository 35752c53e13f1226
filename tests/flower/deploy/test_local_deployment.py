"""``LocalDeployment``'s polling follows the number of nodes; an operator's setting wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedprivacy.flower.deploy.local_deployment import LocalDeployment, polling

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)

PULL, POLL = "FEDPRIVACY_SUPERNODE_IDLE_PULL", "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"


def test_polling_is_short_for_a_few_nodes_and_bounded_in_requests_for_many() -> None:
    for nodes in (1, 6, 10):
        assert polling(nodes) == {PULL: "0.5", POLL: "0.25"}
    for nodes in (20, 50, 60):  # up to where the pull reaches its 3 s cap
        intervals = polling(nodes)
        rate = nodes / float(intervals[PULL]) + nodes / float(intervals[POLL])
        assert rate <= 60.0 + 1e-9  # what 10 nodes make: 10 / 0.5 + 10 / 0.25
        assert float(intervals[PULL]) <= 3.0 and float(intervals[POLL]) <= 3.0
    assert polling(1000) == {PULL: "3", POLL: "3"}


def test_the_deployment_tunes_its_nodes_polling_unless_the_environment_sets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PULL, raising=False)
    monkeypatch.delenv(POLL, raising=False)
    dep = LocalDeployment(tmp_path / "a", tls=False, nodes=50)
    assert (dep.env[PULL], dep.env[POLL]) == ("2.5", "1.25")
    monkeypatch.setenv(PULL, "0.1")
    dep = LocalDeployment(tmp_path / "b", tls=False, nodes=50)
    assert (dep.env[PULL], dep.env[POLL]) == ("0.1", "1.25")
