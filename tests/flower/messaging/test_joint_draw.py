"""The SecAgg+ graph comes from a seed the nodes drew together: the server cannot grind it.

Issue #50, finding 2: with the graph seed the server's, a server proposing degree 2 in a round
of 10 grinds the seed until its two colluders are the victim's only neighbours and runs the
round honestly; the victim's input comes back exactly. Here the attack runs against the real
:class:`~fedprivacy.flower.nodes.node.Node` (its policy accepting degree 2, the most lenient case),
and the deployed FedAvg round loop (:class:`~fedprivacy.flower.fedavg.training.DeployedTraining`)
runs its sparse rounds on the drawn graph.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import PolicyViolationError
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower.deploy.deploy_tasks import FedAvgTask
from fedprivacy.flower.deploy.run import run_deployed
from fedprivacy.flower.fedavg.reference import observed_layout
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.joint_draw import JOINT, draw_joint, drawn_layout
from fedprivacy.flower.messaging.stages import encode_array
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.node_policy import training_policy
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.joint_seed import commitment, encode_entries
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.params_wire import encode_params

#: In process, without node keys: the nodes must allow it (never the default).
OPEN = PartyPolicy(allow_unauthenticated=True)

N = 10
VICTIM, COLLUDERS = 0, (4, 7)


def _nodes(policy: PartyPolicy) -> tuple[dict[int, Node], StageExchange]:
    nodes = {u: Node(u, policy=policy) for u in range(N)}
    return nodes, StageExchange(InProcessTransport(nodes))


def _params(session: bytes, seed: bytes) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, N, 32)
    return SecAggParameters.create(session, 0, range(N), 4, codec, degree=2, graph_seed=seed)


def _grind(session: bytes) -> tuple[bytes, int]:
    """The server's attack: a seed whose ring makes the colluders the victim's only neighbours."""
    for tries in range(1, 10_000):
        seed = tries.to_bytes(8, "big")
        if _params(session, seed).neighbours[VICTIM] == frozenset(COLLUDERS):
            return seed, tries
    raise AssertionError("no seed found")


def _advertise(node: Node, state: dict[str, bytes], params: SecAggParameters) -> dict[str, Any]:
    request = {
        "stage": "advertise",
        "round": 0,
        "params": encode_params(params),
        "noise": "",
        "selected": encode_array(np.arange(N, dtype=np.int64)),  # the model comes at share
    }
    return node.handle(request, state)


def test_the_victim_refuses_a_ground_graph_and_accepts_the_drawn_one() -> None:
    policy = PartyPolicy(
        min_degree=2, allow_unauthenticated=True
    )  # accepts degree 2: only the seed stands in the way
    nodes, exchange = _nodes(policy)
    session = os.urandom(16)
    ground, tries = _grind(session)
    assert tries < 200  # cheap for the server (the issue measured 1 to 22 tries)
    state: dict[str, bytes] = {}
    # before any draw: a sparse graph is refused, whatever its seed
    refused = _advertise(nodes[VICTIM], state, _params(session, ground))
    assert (refused["error"], refused["detail"].split(":")[0]) == (
        "PolicyViolationError",
        "graph_seed",
    )
    # the draw, as the server runs it before its first sparse round
    draw = draw_joint(exchange, 0, session, range(N))
    assert draw is not None
    drawn = draw.graph_seed
    states = exchange.transport.states  # type: ignore[attr-defined]
    refused = _advertise(nodes[VICTIM], dict(states[VICTIM]), _params(session, ground))
    assert refused["error"] == "PolicyViolationError" and "the server chose it" in refused["detail"]
    accepted = _advertise(nodes[VICTIM], dict(states[VICTIM]), _params(session, drawn))
    assert "message" in accepted  # its keys, on the graph the nodes drew
    # every node drew the same seed: the same graph, the victim's neighbours as the bound assumes
    assert len({states[u][JOINT][17 : 17 + 32] for u in range(N)}) == 1


def test_the_drawn_graph_is_the_one_the_server_cannot_predict() -> None:
    """30 draws among the same nodes: 30 different graphs (a fixed seed would give one)."""
    nodes, exchange = _nodes(PartyPolicy(min_degree=2, allow_unauthenticated=True))
    session = os.urandom(16)
    graphs = set()
    for _ in range(30):
        draw = draw_joint(exchange, 0, session, range(N))
        assert draw is not None
        graphs.add(_params(session, draw.graph_seed).neighbours[VICTIM])
    assert len(graphs) >= 10  # C(9, 2) = 36 neighbour pairs; 30 uniform draws hit >= 10 surely


def _stage(node: Node, state: dict[str, bytes], stage: str, **fields: Any) -> dict[str, Any]:
    return node.handle({"stage": stage, **fields}, state)


def test_a_node_reveals_once_against_a_list_holding_its_own_commitment() -> None:
    node, state, session = Node(3), {}, os.urandom(16)
    c = _stage(node, state, "commit", session=session)["commitment"]
    other = {u: os.urandom(32) for u in (1, 2)}
    without = _stage(node, state, "reveal", session=session, commitments=encode_entries(other))
    assert without["error"] == "ProtocolViolationError"  # its own commitment left out
    listing = encode_entries({**other, 3: c})
    secret = _stage(node, state, "reveal", session=session, commitments=listing)["secret"]
    assert commitment(session, 3, secret) == c
    assert _stage(node, state, "reveal", session=session, commitments=listing)["secret"] == secret
    # a second list after the reveal: a colluder's commitment chosen knowing the secret
    second = encode_entries({**other, 2: os.urandom(32), 3: c})
    again = _stage(node, state, "reveal", session=session, commitments=second)
    assert again["error"] == "ProtocolViolationError" and "revealed already" in again["detail"]
    # secrets that do not open the list the node fixed
    forged = encode_entries({1: os.urandom(32), 2: os.urandom(32), 3: secret})
    assert _stage(node, state, "draw", session=session, secrets=forged)["error"] == (
        "ProtocolViolationError"
    )
    # out of order and malformed
    assert _stage(node, {}, "reveal", session=session, commitments=listing)["error"] == (
        "OutOfOrderError"
    )
    assert _stage(node, state, "draw", session=os.urandom(16), secrets=forged)["error"] == (
        "OutOfOrderError"
    )
    assert _stage(node, state, "commit", session=b"short")["error"] == "MalformedMessageError"
    assert _stage(node, state, "reveal", session=session, commitments=b"x")["error"] == (
        "MalformedMessageError"
    )


def _config(**changes: Any) -> TrainConfig:
    return TrainConfig(
        users=8,
        per_round=8,
        rounds=2,
        scheme="multiround",
        target_privacy=2,
        secagg=True,
        dropout=0.0,
        trainer="loop",
        seed=3,
        eval_every=2,
    ).with_overrides(**changes)


def test_deployed_sparse_rounds_run_on_the_drawn_graph_and_a_ground_one_is_refused(
    tmp_path: Path,
) -> None:
    config = _config(secagg_degree=4)
    policy = training_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(8)})
    summary = run_deployed(config, transport, tmp_path, forge=";graph=1")
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    drawn = [
        e["stage"]
        for e in events
        if e["event"] == "stage" and e["stage"] in ("commit", "reveal", "draw")
    ]
    assert drawn == ["commit", "reveal", "draw"]  # once, before round 0
    refused = [e for e in events if e["event"] == "node_refused"]
    assert {(e["round"], e["user"], e["detail"].split(":")[0]) for e in refused} == {
        (1, u, "graph_seed") for u in range(8)
    }
    assert summary["rounds_aggregated"] == 1  # round 0, on the drawn graph
    assert FedAvgTask(config).compare(tmp_path)["max_abs_error_vs_simulation"] == 0.0


def test_complete_graph_rounds_without_batches_need_no_draw(tmp_path: Path) -> None:
    config = dataclasses.replace(_config(rounds=1), scheme="random", target_privacy=None)
    transport = InProcessTransport({u: Node(u, policy=OPEN) for u in range(8)})
    summary = run_deployed(config, transport, tmp_path)
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert not [e for e in events if e.get("stage") in ("commit", "reveal", "draw")]
    assert summary["rounds_aggregated"] == 1


def _batch_params(session: bytes, positions: tuple[int, ...] = ()) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, N, 32)
    return SecAggParameters.create(session, 0, range(N), 4, codec, positions=positions)


def test_a_node_with_batches_refuses_batch_mates_it_did_not_draw() -> None:
    """Batches by id (whoever numbers the users picks the mates) or the server's own: refused."""
    policy = PartyPolicy(batch_size=2, allow_unauthenticated=True)
    nodes, exchange = _nodes(policy)
    session = os.urandom(16)
    by_id = _advertise(nodes[VICTIM], {}, _batch_params(session))
    assert by_id["error"] == "PolicyViolationError"
    assert by_id["detail"].startswith("batch_layout") and "by id" in by_id["detail"]
    draw = draw_joint(exchange, 0, session, range(N))
    assert draw is not None
    states = exchange.transport.states  # type: ignore[attr-defined]
    layout = draw.layout
    drawn = tuple(layout.position[u] for u in range(N))
    # the server's own: the victim's batch mate a colluder (positions 0 and 1)
    mates = [VICTIM, COLLUDERS[0], *[u for u in range(N) if u not in (VICTIM, COLLUDERS[0])]]
    forged = tuple(mates.index(u) for u in range(N))
    assert forged != drawn or layout.order[:2] == (VICTIM, COLLUDERS[0])
    refused = _advertise(nodes[VICTIM], dict(states[VICTIM]), _batch_params(session, forged))
    if forged != drawn:
        assert refused["detail"].startswith("batch_layout") and "server chose" in refused["detail"]
    accepted = _advertise(nodes[VICTIM], dict(states[VICTIM]), _batch_params(session, drawn))
    assert "message" in accepted
    # every node places everyone as the server's layout does
    assert {drawn_layout(states[u], session) for u in range(N)} == {layout}
    # at unmask, only unions of the drawn batches
    params = _batch_params(session, drawn)
    whole = set(layout.order[:4])
    policy.check_aggregated(whole, params.participants, params.position)
    with pytest.raises(PolicyViolationError, match="part of batch"):
        policy.check_aggregated(set(layout.order[:3]), params.participants, params.position)


def test_deployed_batches_are_the_drawn_ones_and_the_servers_own_are_refused(
    tmp_path: Path,
) -> None:
    config = _config(per_round=4, rounds=3)
    policy = training_policy(config).with_overrides(allow_unauthenticated=True)
    transport = InProcessTransport({u: Node(u, policy=policy) for u in range(8)})
    summary = run_deployed(config, transport, tmp_path, forge=";;layout=1")
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    draws = [e["stage"] for e in events if e["event"] == "stage" and e["stage"] == "commit"]
    assert len(draws) == 1  # one draw, before round 0's selection
    layout = observed_layout(events)
    assert layout is not None and sorted(layout.order) == list(range(8))
    batches = {frozenset(b) for b in layout.batches(range(8), 2).values()}
    rounds = [e for e in events if e["event"] == "round"]
    for e in rounds:
        chosen = set(e["selected"])
        assert all(b <= chosen or not b & chosen for b in batches), (e, layout)
    refused = [e for e in events if e["event"] == "node_refused"]
    assert {(e["round"], e["detail"].split(":")[0]) for e in refused} == {(2, "batch_layout")}
    assert {e["user"] for e in refused} == set(rounds[2]["selected"])
    assert summary["rounds_aggregated"] == 2
    assert FedAvgTask(config).compare(tmp_path)["max_abs_error_vs_simulation"] == 0.0
