"""Issue #50, finding 4: a party's budget and answered rounds outlive each run.

Flower gives each run a fresh ``context.state``. Each test runs the real node
(:class:`~fedprivacy.flower.nodes.node.Node` over the in-process transport, a fresh state mapping
per run as a SuperNode gives a new run) against a server that starts a new run: the budget and the
answered rounds come back from the party's own file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.run import run_deployed
from fedprivacy.flower.messaging.joint_draw import JOINT
from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.node_policy import training_policy
from fedprivacy.flower.nodes.party_state import load_party_state, state_path
from fedprivacy.policy import PartyPolicy

USERS = 4
CONFIG = TrainConfig(
    users=USERS,
    per_round=4,
    rounds=1,
    scheme="multiround",
    target_privacy=2,
    secagg=True,
    dropout=0.0,
    trainer="loop",
    seed=3,
    eval_every=1,
    dp="distributed",
    noise_multiplier=1.0,
    clip=0.5,
)


class Recording(InProcessTransport):
    """The in-process transport, keeping every request the server sent."""

    def __init__(self, nodes: dict[int, Node]) -> None:
        super().__init__(nodes)
        self.requests: list[tuple[Stage, int, dict[int, Record]]] = []

    def _exchange(
        self, stage: Stage, round_index: int, requests: dict[int, Record]
    ) -> dict[int, Record]:
        self.requests.append((stage, round_index, dict(requests)))
        return super()._exchange(stage, round_index, requests)


def _run(policy: PartyPolicy, run_dir: Path) -> tuple[dict[str, Any], Recording]:
    transport = Recording({u: Node(u, policy=policy) for u in range(USERS)})
    return run_deployed(CONFIG, transport, run_dir), transport


def _refused(run_dir: Path) -> set[tuple[int, str]]:
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return {(e["user"], e["detail"].split(":")[0]) for e in events if e["event"] == "node_refused"}


def test_the_budget_is_spent_once_across_runs(tmp_path: Path) -> None:
    """Budget 5 at delta 1e-5, z = 1: one round. A second run on the same nodes gets nothing."""
    policy = training_policy(CONFIG).with_overrides(
        allow_unauthenticated=True,  # in process: no node keys
        epsilon_budget=5.0,
        delta=1e-5,
        state_dir=str(tmp_path / "state"),
    )
    first, _ = _run(policy, tmp_path / "run-1")
    assert first["rounds_aggregated"] == 1
    second, _ = _run(policy, tmp_path / "run-2")  # fresh state mappings: a new Flower run
    assert second["rounds_aggregated"] == 0
    assert _refused(tmp_path / "run-2") == {(u, "epsilon_budget") for u in range(USERS)}
    for u in range(USERS):
        path = state_path(policy, u)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_round_is_answered_once_across_runs(tmp_path: Path) -> None:
    """The server replays round 0 of the first run's session to the nodes of a new run."""
    policy = training_policy(CONFIG).with_overrides(
        allow_unauthenticated=True,  # in process: no node keys
        state_dir=str(tmp_path / "state"),
    )
    summary, transport = _run(policy, tmp_path / "run-1")
    assert summary["rounds_aggregated"] == 1
    advertise = next(
        requests for stage, _, requests in transport.requests if stage is Stage.ADVERTISE
    )
    again = {u: Node(u, policy=policy).handle(advertise[u], {}) for u in range(USERS)}
    assert {r["error"] for r in again.values()} == {"PolicyViolationError"}
    assert all(
        r["detail"].startswith("round: round 0 requested after round 0") for r in again.values()
    )
    # without the answered rounds (the old per-run state) the same replay was answered: here
    # the node keeps only its draw of the batches from the file
    volatile = policy.with_overrides(state_dir="")
    kept: dict[str, bytes] = {}
    load_party_state(policy, 0, kept)
    answered = Node(0, policy=volatile).handle(advertise[0], {JOINT: kept[JOINT]})
    assert "error" not in answered


@pytest.mark.parametrize(
    ("damage", "why"),
    [("not json", "is not a party state file"), ("mode", "open to other users")],
)
def test_a_damaged_state_file_stops_the_party(tmp_path: Path, damage: str, why: str) -> None:
    policy = training_policy(CONFIG).with_overrides(
        allow_unauthenticated=True,  # in process: no node keys
        state_dir=str(tmp_path),
    )
    path = state_path(policy, 2)
    path.write_text("{}" if damage == "mode" else damage)
    os.chmod(path, 0o644 if damage == "mode" else 0o600)
    reply = Node(2, policy=policy).handle({"stage": "hello"}, {})
    assert reply["error"] == "ParameterError" and why in reply["detail"]


def test_the_clientapp_keeps_the_state_beside_the_nodes_policy(tmp_path: Path) -> None:
    """A node whose configuration names a policy file writes party-ID.state beside it."""
    from fedprivacy.flower.deploy.apps import answer_request

    policy_file = tmp_path / "node-1.toml"
    policy_file.write_text("allow_plaintext = true\n")
    config = TrainConfig(users=USERS, per_round=4, rounds=1, trainer="loop", seed=3)
    from fedprivacy.flower.messaging.stages import encode_array
    from fedprivacy.flower.nodes.node import training_for

    training = training_for(config.to_toml())
    import numpy as np

    request = {
        "stage": "train",
        "round": 0,
        "config": config.to_toml(),
        "model": encode_array(training.global_flat.numpy().astype(np.float32)),
        "selected": encode_array(np.arange(USERS, dtype=np.int64)),
    }
    node_config = {"partition-id": 1, "fedprivacy-policy": str(policy_file)}
    assert "update" in answer_request(node_config, request, {})
    assert (tmp_path / "party-1.state").exists()
    again = answer_request(node_config, request, {})  # a new run: an empty context.state
    assert again["error"] == "PolicyViolationError" and again["detail"].startswith("round:")


def test_a_new_session_asking_an_old_round_with_its_model_is_refused(tmp_path: Path) -> None:
    """The same model in the same round index, in a new session of a new run: a replay."""
    policy = training_policy(CONFIG).with_overrides(
        allow_unauthenticated=True,  # in process: no node keys
        state_dir=str(tmp_path / "state"),
    )
    _, first = _run(policy, tmp_path / "run-1")
    _, second = _run(policy, tmp_path / "run-2")  # a new session, the same initial model
    refused = _refused(tmp_path / "run-2")
    assert refused == {(u, "model") for u in range(USERS)}
    sessions = {
        requests[0]["params"]
        for t in (first, second)
        for s, _, requests in t.requests
        if s is Stage.ADVERTISE
    }
    assert len(sessions) == 2  # two sessions: the round guard alone would have let it through
