"""A node that sends wrong unmasking shares, through the deployment's round logic and run directory.

Issue #28, finding 5: one wrong share ended the whole FedAvg run in round 0 (an uncaught
``ProtocolViolationError``) and no privacy report was written. The node here is the real
:class:`~fedprivacy.flower.nodes.node.Node` with the fault ``badshare@R`` (every share of its
unmasking response bent by one), on the in-process transport; ``test_deployment.py`` runs the same
fault on real SuperNodes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.run import run_deployed
from fedprivacy.flower.fedavg.reference import max_abs_error, observed_layout, simulate
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.policy import PartyPolicy

#: In process, without node keys: the nodes must allow it (never the default).
OPEN = PartyPolicy(allow_unauthenticated=True)

USERS = 6


def _config(**changes: Any) -> TrainConfig:
    base = TrainConfig(
        users=USERS,
        per_round=6,
        rounds=3,
        scheme="multiround",
        target_privacy=2,
        secagg=True,
        dropout=0.0,
        trainer="loop",
        seed=3,
        eval_every=3,
    )
    return base.with_overrides(**changes)


def _run(config: TrainConfig, faults: dict[int, str], run_dir: Path) -> dict[str, Any]:
    nodes = {u: Node(u, fault=faults.get(u, ""), policy=OPEN) for u in range(config.users)}
    return run_deployed(config, InProcessTransport(nodes), run_dir)


def _events(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _report_written(run_dir: Path) -> None:
    for name in ("privacy.md", "summary.json", "participation.csv", "aggregates.npz"):
        assert (run_dir / name).stat().st_size > 0, name


def test_a_wrong_share_is_left_out_the_sender_named_and_the_run_goes_on(tmp_path: Path) -> None:
    # 6 users a round: each secret has 5 holders and threshold 4, one share to spare
    summary = _run(_config(), {0: "badshare@0"}, tmp_path)
    _report_written(tmp_path)
    assert summary["rounds"] == 3 and summary["rounds_aggregated"] == 3
    assert summary["rounds_aborted"] == 0 and summary["aborted"] == []
    named = {(e["round"], e["user"], e["error"]) for e in summary["bad_shares"]}
    assert named == {(0, 0, "ProtocolViolationError")}
    assert "user 0 sent a wrong share" in summary["bad_shares"][0]["detail"]
    assert any(e["event"] == "bad_share" and e["user"] == 0 for e in _events(tmp_path))
    # the ledger charges what the server unmasked: everyone, the offender's own input included
    first = next(e for e in _events(tmp_path) if e["event"] == "round")
    assert first["aggregated"] == list(range(USERS))
    ledger = np.loadtxt(tmp_path / "participation.csv", delimiter=",", skiprows=1)
    assert ledger[0].tolist() == [1.0] * USERS
    # and every aggregate is the honest pipeline's, bit for bit
    trace = list(np.load(tmp_path / "availability.npy"))
    means = simulate(_config(), trace, {}, observed_layout(_events(tmp_path)))
    with np.load(tmp_path / "aggregates.npz") as z:
        deployed = {int(k.removeprefix("round_")): z[k] for k in z.files}
    assert max_abs_error(deployed, means) == 0.0


def test_a_wrong_share_with_no_share_to_spare_aborts_only_its_round(tmp_path: Path) -> None:
    # 4 users, all in every round: each secret has 3 holders and threshold 3, nothing to choose
    # from (all selected: the offender is in round 0 whatever batches the nodes draw)
    config = _config(users=4, per_round=4)
    run_dir = tmp_path / "attacked"
    summary = _run(config, {0: "badshare@0"}, run_dir)
    _report_written(run_dir)
    assert summary["rounds"] == 3 and summary["rounds_aborted"] == 1
    assert summary["rounds_aggregated"] == 2
    [aborted] = summary["aborted"]
    assert aborted["round"] == 0 and aborted["error"] == "UnrecoverableSecretError"
    assert "matches its commitment" in aborted["detail"]
    ledger = np.loadtxt(run_dir / "participation.csv", delimiter=",", skiprows=1)
    assert ledger[0].sum() == 0 and ledger[1:].sum() == 8  # nothing charged for round 0
    rounds = [e for e in _events(run_dir) if e["event"] == "round"]
    assert rounds[0]["aggregated"] == [] and rounds[0]["aborted"]
