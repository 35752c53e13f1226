"""The survivor-list consistency check as a deployment stage: nodes sign S with their node keys.

With node authentication every node's policy names its key and the federation's roster, and the
node unmasks only a set that a strict majority signed (:mod:`fedprivacy.secagg.consistency`).
These tests run the deployment's round logic over the in-process transport with real
:class:`~fedprivacy.flower.nodes.node.Node` objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.crypto.signing import Roster
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.run import run_deployed
from fedprivacy.flower.fedavg.reference import max_abs_error, simulate
from fedprivacy.flower.messaging.stages import Stage
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.node_auth import generate_node_keys
from fedprivacy.flower.nodes.node_policy import training_policy
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.ledger import ParticipationLedger

USERS = 6
CONFIG = TrainConfig(
    users=USERS,
    per_round=6,
    rounds=2,
    scheme="multiround",
    target_privacy=2,
    secagg=True,
    dropout=0.0,
    trainer="loop",
    seed=3,
    eval_every=2,
)


def _signed_nodes(tmp_path: Path, config: TrainConfig = CONFIG) -> tuple[dict[int, Node], Roster]:
    keys = generate_node_keys(tmp_path / "keys", range(USERS))
    roster = Roster({u: k.public.read_text() for u, k in keys.items()})
    (tmp_path / "roster.toml").write_text(roster.to_toml())
    policy = training_policy(config)
    nodes = {
        u: Node(
            u,
            policy=policy.with_overrides(
                signing_key=str(keys[u].private), roster=str(tmp_path / "roster.toml")
            ),
        )
        for u in range(USERS)
    }
    return nodes, roster


def _events(run_dir: Path) -> list[dict[str, Any]]:
    import json

    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def test_signed_rounds_aggregate_what_the_pipeline_aggregates(tmp_path: Path) -> None:
    nodes, roster = _signed_nodes(tmp_path)
    run_dir = tmp_path / "run"
    summary = run_deployed(CONFIG, InProcessTransport(nodes), run_dir, signers=roster)
    assert summary["rounds_aggregated"] == 2
    stages = [e for e in _events(run_dir) if e["event"] == "stage"]
    consistency = [e for e in stages if e["stage"] == "consistency"]
    assert len(consistency) == 2 and all(e["answered"] == USERS for e in consistency)
    with np.load(run_dir / "aggregates.npz") as z:
        deployed = {int(k.removeprefix("round_")): z[k] for k in z.files}
    means = simulate(CONFIG, list(np.load(run_dir / "availability.npy")), {})
    assert max_abs_error(deployed, means) == 0.0
    views = [e for e in _events(run_dir) if e["event"] == "server_view"]  # the live audit
    assert [e["round"] for e in views] == [0, 1]
    audit = audit_ledger(ParticipationLedger.from_csv(run_dir / "participation.csv"), time_limit=9)
    assert views[-1]["exposed_users"] == audit.exposure.exposed.size
    assert views[-1]["t_strong"] == audit.exposure.t_strong
    assert views[-1]["t_weak_lower"] <= audit.t_weak.upper
    assert audit.t_weak.lower <= views[-1]["t_weak_upper"]
    assert "NO NODE AUTHENTICATION" not in (run_dir / "privacy.md").read_text()


def test_without_node_authentication_nodes_refuse_and_an_allowing_policy_is_reported(
    tmp_path: Path,
) -> None:
    """The safe default refuses every secure round; an operator who allows it gets a report
    that says, first, that a server lying about the keys could have read any single input."""
    default = {u: Node(u, policy=training_policy(CONFIG)) for u in range(USERS)}
    summary = run_deployed(CONFIG, InProcessTransport(default), tmp_path / "default")
    refused = [e for e in _events(tmp_path / "default") if e["event"] == "node_refused"]
    assert {(e["round"], e["user"], e["detail"].split(":")[0]) for e in refused} == {
        (r, u, "allow_unauthenticated") for r in range(2) for u in range(USERS)
    }
    assert summary["rounds_aggregated"] == 0
    allowing = training_policy(CONFIG).with_overrides(allow_unauthenticated=True)
    nodes = {u: Node(u, policy=allowing) for u in range(USERS)}
    summary = run_deployed(CONFIG, InProcessTransport(nodes), tmp_path / "allowed")
    assert summary["rounds_aggregated"] == 2
    caveats = summary["privacy"]["caveats"]
    assert caveats[1].startswith("NO NODE AUTHENTICATION: the nodes' SecAgg keys were not signed")
    assert "could have read any single user's input" in caveats[1]
    assert "NO NODE AUTHENTICATION" in (tmp_path / "allowed" / "privacy.md").read_text()


def test_nodes_with_the_check_refuse_a_server_that_skips_it(tmp_path: Path) -> None:
    """A server that does not collect signatures gets no unmasking share from any node."""
    nodes, _ = _signed_nodes(tmp_path)
    run_dir = tmp_path / "run"
    summary = run_deployed(CONFIG, InProcessTransport(nodes), run_dir)
    assert summary["rounds_aggregated"] == 0
    refused = [e for e in _events(run_dir) if e["event"] == "node_refused"]
    assert {e["stage"] for e in refused} == {"unmask"}
    assert {e["user"] for e in refused} == set(range(USERS))
    assert (run_dir / "privacy.md").stat().st_size > 0


def test_a_node_refuses_to_sign_a_partial_batch(tmp_path: Path) -> None:
    """The lying server's partial batch is refused already at the signing stage."""
    nodes, roster = _signed_nodes(tmp_path)
    run_dir = tmp_path / "run"
    summary = run_deployed(
        CONFIG, InProcessTransport(nodes), run_dir, signers=roster, forge="partial=1"
    )
    assert summary["rounds_aggregated"] == 0
    refused = [e for e in _events(run_dir) if e["event"] == "node_refused"]
    assert {e["stage"] for e in refused} == {"consistency"}
    assert {e["detail"].split(":")[0] for e in refused} == {"batch_size"}


def test_nodes_in_the_exact_noise_mode_release_exactly_the_target(tmp_path: Path) -> None:
    """Each node keeps its components in its state from the mask to the unmask stage (its
    ClientApp may run in a new process for each) and removes the excess the sum does not need:
    6 summed hold the target, not the sqrt(6 / 4) of the over-provisioned mode."""
    config = CONFIG.with_overrides(
        dp="distributed", noise_multiplier=1.0, clip=0.5, noise_mode="exact"
    )
    nodes, roster = _signed_nodes(tmp_path, config)
    assert all(n.policy.noise_mode == "exact" for n in nodes.values())
    transport = InProcessTransport(nodes, {1: {0: Stage.UNMASK}})  # 0 submits, then leaves
    run_dir = tmp_path / "run"
    summary = run_deployed(config, transport, run_dir, signers=roster)
    assert summary["rounds_aggregated"] == 2 and summary["privacy"]["noise_mode"] == "exact"
    rounds = [e for e in _events(run_dir) if e["event"] == "round"]
    assert [len(r["aggregated"]) for r in rounds] == [6, 6]
    lines = (run_dir / "metrics.csv").read_text().splitlines()[1:]
    noise = [float(line.rsplit(",", 1)[1]) for line in lines]
    assert noise[0] == pytest.approx(1.0, rel=1e-9)
    # user 0 kept 1 of its 2 components and left: its excess stayed (7 draws), and is accounted
    assert noise[1] == pytest.approx((7 / 6) ** 0.5, rel=1e-9)


def test_key_substitution_is_refused_before_any_share_is_sealed(tmp_path: Path) -> None:
    """Issue #50, finding 1, on the deployment's code path: the server's forged key rosters.

    Every node refuses the roster at ``share`` (its neighbours' keys do not carry their owners'
    signatures), so no share is sealed to the server's keys and nothing is masked: the server
    obtains no aggregate, and the honest rounds of the same nodes still run.
    """
    nodes, roster = _signed_nodes(tmp_path)
    summary = run_deployed(
        CONFIG, InProcessTransport(nodes), tmp_path / "run", signers=roster, forge="keys=1;"
    )
    refused = [e for e in _events(tmp_path / "run") if e["event"] == "node_refused"]
    assert {(e["round"], e["user"], e["stage"], e["error"]) for e in refused} == {
        (0, u, "share", "UnsignedKeyError") for u in range(USERS)
    }
    assert summary["rounds_aggregated"] == 1  # round 1 is honest


def test_a_model_sent_to_one_node_only_leaves_the_server_noise(tmp_path: Path) -> None:
    """Issue #50, finding 6, on the deployment's code path (Pasquini et al., CCS 2022).

    The lying server sends user 0 the real model and every other node an all-zero one, so that
    the sum would be user 0's update alone. Each node binds its masks and its signature to the
    digest of the model it received: user 0's signature is on another model (the server cannot
    count it), the others unmask, and what the server unmasks is noise, not user 0's update:
    uniform over the grid's range, or, when the noise in the total weight comes out negative,
    nothing (the round is aborted, ``ProtocolViolationError``).
    """
    config = CONFIG.with_overrides(rounds=1)
    nodes, roster = _signed_nodes(tmp_path, config)
    run_dir = tmp_path / "run"
    summary = run_deployed(
        config, InProcessTransport(nodes), run_dir, signers=roster, forge="model=1"
    )
    rejected = [e for e in _events(run_dir) if e["event"] == "rejected"]
    assert {(e["user"], e["stage"], e["error"]) for e in rejected} == {
        (0, "consistency", "ConsistencyError")
    }
    (round_0,) = [e for e in _events(run_dir) if e["event"] == "round"]
    if round_0["aborted"]:
        assert summary["rounds_aggregated"] == 0
        assert "ProtocolViolationError: the unmasked total weight" in round_0["aborted"]
        return
    mean = np.load(run_dir / "aggregates.npz")["round_0"]
    clip = config.clip if config.clip is not None else 1.0
    # an honest mean of updates clipped to L2 norm `clip` has a norm within it; this one is
    # uniform noise over the grid's range divided by a noise weight
    assert np.linalg.norm(mean) > 10 * clip
    assert summary["rounds_aggregated"] == 1
