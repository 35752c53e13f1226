"""A user's node enforces its own policy: a lying FedAvg server is refused, parameter named.

Each test runs the attack through the real code path of a deployment (the server's
:class:`~fedprivacy.flower.fedavg.training.DeployedTraining` with a forged proposal, the nodes'
:class:`~fedprivacy.flower.nodes.node.Node` over the in-process transport) and checks what the
server obtained from everything it received.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.errors import PolicyViolationError
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.run import run_deployed
from fedprivacy.flower.fedavg.reference import simulate
from fedprivacy.flower.messaging.stages import encode_array
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node, training_for
from fedprivacy.flower.nodes.node_policy import check_training, training_policy
from fedprivacy.policy import PartyPolicy

USERS = 6


def _config(**changes: Any) -> TrainConfig:
    base = TrainConfig(
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
        dp="distributed",
        noise_multiplier=1.0,
        clip=0.5,
    )
    return base.with_overrides(**changes)


def _run(config: TrainConfig, tmp_path: Path, forge: str) -> tuple[dict[str, Any], list[Any]]:
    import json

    policy = training_policy(config).with_overrides(
        allow_unauthenticated=True
    )  # in process: no node keys
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(USERS)})
    summary = run_deployed(config, transport, tmp_path, forge=forge)
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    return summary, events


def _refusals(events: list[Any]) -> set[tuple[int, str, str]]:
    return {
        (e["user"], e["error"], e["detail"].split(":")[0])
        for e in events
        if e["event"] == "node_refused"
    }


# forge -> (stage refused, parameter named, whether the round still aggregates)
FORGES = {
    "noise=": ("advertise", "noise_multiplier", False),
    "noise=1": ("advertise", "noise_multiplier", False),
    "threshold=2": ("advertise", "threshold", False),
    "clip=10": ("advertise", "clip", False),
    "noise_multiplier=0.000001": ("advertise", "noise_multiplier", False),
    "plaintext=1": ("train", "secure", True),
    "repeat=1": ("advertise", "round", True),
    "partial=1": ("unmask", "batch_size", False),
}


@pytest.mark.parametrize("forge", sorted(FORGES))
def test_every_node_refuses_a_forged_proposal_and_names_the_parameter(
    forge: str, tmp_path: Path
) -> None:
    stage, parameter, aggregates = FORGES[forge]
    config = _config()
    summary, events = _run(config, tmp_path, forge)
    refused = [e for e in events if e["event"] == "node_refused"]
    assert {e["stage"] for e in refused} == {stage}
    assert _refusals(events) == {(u, "PolicyViolationError", parameter) for u in range(USERS)}
    assert (tmp_path / "privacy.md").stat().st_size > 0  # the run ended with its report
    if aggregates:  # the refused extra request cost nothing: the rounds are the honest ones
        assert summary["rounds_aggregated"] == 2
        return
    # the server obtained no aggregate at all: nothing to average noise away from, nothing
    # charged to anybody
    assert summary["rounds_aggregated"] == 0
    assert (
        not (tmp_path / "aggregates.npz").exists() or not np.load(tmp_path / "aggregates.npz").files
    )
    assert summary["privacy"]["epsilon"] in (0, 0.0, None)


def test_the_honest_server_is_answered_as_before(tmp_path: Path) -> None:
    config = _config()
    summary, events = _run(config, tmp_path, "")
    assert not _refusals(events)
    assert summary["rounds_aggregated"] == 2


def test_without_the_policy_the_empty_noise_attack_gives_the_noiseless_mean(
    tmp_path: Path,
) -> None:
    """What the issue measured on the old code: a node that takes its noise from the request."""
    config = _config(rounds=1)
    lax = PartyPolicy(allow_unauthenticated=True)  # no noise floor of its own (the old way)
    transport = InProcessTransport({u: Node(u, policy=lax) for u in range(USERS)})
    run_deployed(config, transport, tmp_path, forge="noise=")
    with np.load(tmp_path / "aggregates.npz") as z:
        deployed = z["round_0"]
    # the clipped, noiseless mean (central DP's round 0: its noise comes only at release)
    plain = simulate(config.with_overrides(dp="central"), [np.ones(USERS, bool)], {})[0]
    assert float(np.max(np.abs(deployed - plain))) < 1e-4  # noise std per entry: 0.125


def test_check_training_names_each_weakened_parameter() -> None:
    config = _config()
    policy = training_policy(config)
    check_training(policy, config)
    weaker = {
        "secure": {"secagg": False},
        "noise_multiplier": {"dp": "central"},
        "clip": {"clip": 0.6},
        "batch_size": {"target_privacy": 3},
    }
    for name, change in weaker.items():
        with pytest.raises(PolicyViolationError) as info:
            check_training(policy, config.with_overrides(**change))
        assert info.value.name == name
    check_training(policy, config.with_overrides(clip=0.25, noise_multiplier=2.0))  # stronger


def test_a_node_answers_each_round_once(tmp_path: Path) -> None:
    """Two ``train`` requests for one round: the second is refused, the state kept."""
    config = dataclasses.replace(
        _config(secagg=False, rounds=1), dp="none", noise_multiplier=None, clip=None
    )
    node = Node(0, policy=training_policy(config))
    training = training_for(config.to_toml())

    request = {
        "stage": "train",
        "round": 0,
        "config": config.to_toml(),
        "model": encode_array(training.global_flat.numpy().astype(np.float32)),
        "selected": encode_array(np.arange(USERS, dtype=np.int64)),
    }
    state: dict[str, bytes] = {}
    assert "update" in node.handle(request, state)
    again = node.handle(request, state)
    assert again["error"] == "PolicyViolationError" and again["detail"].startswith("round:")
    assert "update" in node.handle({**request, "round": 1}, state)


def test_a_node_stops_contributing_at_its_epsilon_budget(tmp_path: Path) -> None:
    """Budget 5 at delta 1e-5 with z = 1 fits one round (epsilon 4.73; two: 7.08)."""
    from fedprivacy.dp.accounting import epsilon_for

    assert epsilon_for(1.0, 1, 1e-5) <= 5.0 < epsilon_for(1.0, 2, 1e-5)
    config = _config(rounds=3)
    policy = (
        training_policy(config)
        .with_overrides(epsilon_budget=5.0, delta=1e-5)
        .with_overrides(allow_unauthenticated=True)
    )
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(USERS)})
    summary = run_deployed(config, transport, tmp_path)
    assert summary["rounds_aggregated"] == 1
    events = [e for e in transport_events(tmp_path) if e["event"] == "node_refused"]
    assert {e["round"] for e in events} == {1, 2}
    assert {e["detail"].split(":")[0] for e in events} == {"epsilon_budget"}


def transport_events(run_dir: Path) -> list[Any]:
    import json

    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def test_a_node_reads_its_policy_from_its_own_configuration(tmp_path: Path) -> None:
    """The ClientApp builds the node's policy from the file its node config names, or refuses."""
    from fedprivacy.flower.deploy.apps import answer_request

    path = tmp_path / "policy.toml"
    path.write_text("noise_multiplier = 1.0\nclip = 0.5\nbatch_size = 2\n")
    config = {"partition-id": 2, "fedprivacy-policy": str(path)}
    assert answer_request(config, {"stage": "hello"}, {}) == {"user": 2}
    path.write_text("noise_multiplier = 1.0\n")  # a floor without a clip: invalid
    reply = answer_request(config, {"stage": "hello"}, {})
    assert reply["error"] == "ParameterError"
    assert reply["detail"].startswith(f"{path}: clip:")  # the operator's file, named


def test_a_node_adds_noise_only_in_its_own_mode_and_the_exact_one_only_with_the_check(
    tmp_path: Path,
) -> None:
    """Against a server that lies about the noise mode: each node decides its own."""
    from fractions import Fraction

    from fedprivacy.crypto.fixed_point import FixedPointCodec
    from fedprivacy.crypto.signing import Roster
    from fedprivacy.flower.nodes.node_auth import generate_node_keys
    from fedprivacy.flower.nodes.node_policy import check_secure_round, party_draw
    from fedprivacy.secagg.params import SecAggParameters

    params = SecAggParameters.create(bytes(16), 0, range(12), 50, FixedPointCodec(1.0, 2.0**16, 32))
    keys = generate_node_keys(tmp_path / "keys", range(12))
    (tmp_path / "roster.toml").write_text(
        Roster({u: k.public.read_text() for u, k in keys.items()}).to_toml()
    )
    signed = {"signing_key": str(keys[0].private), "roster": str(tmp_path / "roster.toml")}
    over = PartyPolicy(noise_multiplier=1.0, clip=1.0, **signed)  # type: ignore[arg-type]
    exact = over.with_overrides(noise_mode="exact")
    big = "exact:" + str(10**12)
    with pytest.raises(PolicyViolationError, match="noise_mode"):
        check_secure_round(over, params, big, {})  # more variance, but removable
    with pytest.raises(PolicyViolationError, match="noise_mode"):
        check_secure_round(exact, params, str(10**12), {})
    with pytest.raises(PolicyViolationError, match="noise_mode.*consistency"):
        check_secure_round(
            PartyPolicy(noise_mode="exact", allow_unauthenticated=True), params, big, {}
        )
    with pytest.raises(PolicyViolationError, match="noise_multiplier"):
        check_secure_round(exact, params, "exact:1", {})  # below the node's own floor
    assert check_secure_round(exact, params, big, {}) == big
    draw = party_draw(params, big)  # components and total from the round's own parameters
    assert draw is not None and draw.variance == Fraction(10**12)
    assert (draw.components, draw.kept_total) == (-(-12 // params.threshold), 12)
    assert party_draw(params, "") is None


def test_a_node_with_a_degree_floor_refuses_a_sparser_graph(tmp_path: Path) -> None:
    """A lying server proposes SecAgg+ with 2 neighbours to nodes whose floor is 4."""
    config = _config()
    policy = dataclasses.replace(training_policy(config), min_degree=4).with_overrides(
        allow_unauthenticated=True
    )
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(USERS)})
    summary = run_deployed(config, transport, tmp_path, forge="degree=2")
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert _refusals(events) == {(u, "PolicyViolationError", "degree") for u in range(USERS)}
    assert {e["stage"] for e in events if e["event"] == "node_refused"} == {"advertise"}
    assert summary["rounds_aggregated"] == 0  # the server obtained nothing
    assert summary["privacy"]["epsilon"] in (0, 0.0, None)


def test_by_default_a_node_refuses_a_sparser_graph_than_the_complete_one(tmp_path: Path) -> None:
    """Issue #50, finding 2: the degree downgrade. Up to 32 parties a node computes its floor
    as the complete graph (what the server's default proposes), never taken from the server.

    Without DP, so that the refusal is the degree's and not the noise floor's.
    """
    config = dataclasses.replace(_config(rounds=1), dp="none", noise_multiplier=None, clip=None)
    summary, events = _run(config, tmp_path, "degree=2")
    assert _refusals(events) == {(u, "PolicyViolationError", "degree") for u in range(USERS)}
    assert summary["rounds_aggregated"] == 0


def test_an_operators_own_min_degree_accepts_a_sparser_graph(tmp_path: Path) -> None:
    """``min_degree`` set by the operator (``flower deploy --secagg-degree`` writes it)."""
    config = dataclasses.replace(_config(rounds=1), dp="none", noise_multiplier=None, clip=None)
    assert training_policy(config.with_overrides(secagg_degree=2)).min_degree == 2
    policy = dataclasses.replace(training_policy(config), min_degree=2).with_overrides(
        allow_unauthenticated=True
    )
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(USERS)})
    summary = run_deployed(config, transport, tmp_path, forge="degree=2")
    assert summary["rounds_aggregated"] == 1
