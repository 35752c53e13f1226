"""A deployment's round logic on the in-process transport: the pipeline's aggregates exactly."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from fedprivacy.fl.training_config import TrainConfig, build_training
from fedprivacy.flower.fedavg.reference import (
    max_abs_error,
    observed_dropouts,
    observed_layout,
    simulate,
)
from fedprivacy.flower.fedavg.training import DeployedTraining, LiveNodes
from fedprivacy.flower.messaging.stages import Stage
from fedprivacy.flower.messaging.transport import InProcessTransport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.node_policy import training_policy
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.driver import Stage as ProtocolStage
from fedprivacy.secagg.errors import MalformedMessageError

#: In process, without node keys: the nodes must allow it (never the default).
OPEN = PartyPolicy(allow_unauthenticated=True)

USERS = 6


def _config(**changes: Any) -> TrainConfig:
    base = TrainConfig(
        users=USERS,
        per_round=4,
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


def _deployed(
    config: TrainConfig,
    nodes: dict[int, Node] | None = None,
    transport_class: type[InProcessTransport] = InProcessTransport,
    **kw: Any,
) -> Any:
    policy = training_policy(config).with_overrides(allow_unauthenticated=True)  # no node keys
    transport = transport_class(nodes or {u: Node(u, policy=policy) for u in range(USERS)}, **kw)
    training = build_training(
        config,
        training_class=DeployedTraining,
        availability=LiveNodes(USERS, transport.users),
        transport=transport,
        config_toml=config.to_toml(),
    )
    training.run(config.rounds)
    return training


def _layout(deployed: DeployedTraining) -> BatchLayout | None:
    """The batches the deployment's nodes drew (secure rounds with batches only)."""
    return getattr(deployed.aggregator, "layout", None)


def _without_batch_of(deployed: DeployedTraining, user: int, selected: list[int]) -> list[int]:
    """``selected`` less ``user``'s batch among those the nodes drew."""
    layout = _layout(deployed)
    assert layout is not None
    (batch,) = [b for b in layout.batches(range(USERS), 2).values() if user in b]
    return sorted(set(selected) - batch)


@pytest.mark.parametrize("secagg", [True, False])
def test_the_deployed_rounds_equal_the_in_process_pipeline_bit_for_bit(secagg: bool) -> None:
    config = _config(secagg=secagg)
    deployed = _deployed(config)
    trace = deployed.availability.trace
    assert np.array(trace).all()  # nobody dropped: the plain pipeline without availability loss
    assert (_layout(deployed) is not None) == secagg  # the nodes drew the batches they check
    means = simulate(config, trace, {}, _layout(deployed))
    assert sorted(deployed.aggregates) == sorted(means) == [0, 1, 2]
    for r, mean in means.items():
        assert np.array_equal(deployed.aggregates[r], mean)
    assert max_abs_error(deployed.aggregates, means) == 0.0


def test_the_reference_replays_the_dropouts_the_deployment_saw() -> None:
    config = _config(per_round=6, rounds=3)
    deployed = _deployed(config, dropouts={1: {5: Stage.MASK}})
    dropouts = observed_dropouts(deployed.events)
    assert dropouts == {1: {5: ProtocolStage.MASKED_INPUT}}
    trace, layout = deployed.availability.trace, _layout(deployed)
    means = simulate(config, trace, dropouts, layout)
    assert max_abs_error(deployed.aggregates, means) == 0.0
    assert max_abs_error(deployed.aggregates, simulate(config, trace, {}, layout)) > 0


def test_a_node_silent_in_the_masked_input_stage_costs_its_whole_batch() -> None:
    config = _config(per_round=6, rounds=2)
    deployed = _deployed(config, dropouts={0: {5: Stage.MASK}})
    first = next(e for e in deployed.events if e["event"] == "round")
    assert first["selected"] == list(range(6))
    assert first["aggregated"] == _without_batch_of(deployed, 5, first["selected"])  # whole
    assert {"round": 0, "stage": "mask", "user": 5, "event": "no_reply"} in deployed.events
    assert not deployed.availability.trace[1][5]  # gone: not asked again
    assert deployed.ledger.matrix()[1].sum() == 0  # K = 6 cannot be met: the round is skipped
    audit = audit_ledger(deployed.ledger)
    assert audit.t_weak.lower is not None and audit.t_weak.lower >= 2
    assert audit.exposure.exposed.size == 0


def test_a_replayed_message_is_rejected_with_the_protocols_typed_error() -> None:
    nodes = {u: Node(u, policy=OPEN) for u in range(USERS)}
    nodes[2] = Node(2, fault="replay@0", policy=OPEN)
    deployed = _deployed(_config(per_round=6, rounds=1), nodes)
    rejected = [e for e in deployed.events if e["event"] == "rejected"]
    assert [(e["user"], e["stage"], e["error"]) for e in rejected] == [
        (2, "mask", "DuplicateMessageError")
    ]
    rounds = [e for e in deployed.events if e["event"] == "round"]
    assert rounds[0]["aggregated"] == _without_batch_of(deployed, 2, rounds[0]["selected"])


def test_a_node_refuses_a_stage_out_of_order_with_a_typed_error() -> None:
    node, state = Node(1, policy=OPEN), {}
    reply = node.handle({"stage": "mask", "round": 0, "message": b"x"}, state)
    assert reply["error"] == "OutOfOrderError"
    assert state == {}
    assert node.handle({"stage": "bogus"}, state)["error"] == "MalformedMessageError"


@pytest.mark.parametrize("dp", ["central", "distributed"])
def test_dp_runs_through_the_deployment_and_the_run_directory_reports_it(
    dp: str, tmp_path: Any
) -> None:
    from fedprivacy.flower.deploy.run import run_deployed

    config = _config(dp=dp, noise_multiplier=1.0, clip=0.5, rounds=2)
    transport = InProcessTransport({u: Node(u, policy=OPEN) for u in range(USERS)})
    summary = run_deployed(config, transport, tmp_path)
    assert summary["rounds_aggregated"] == 2
    privacy = summary["privacy"]
    assert privacy["mechanism"] == dp and privacy["epsilon"] > 0
    assert privacy["t_weak"]["lower"] >= 2
    events = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    trace = list(np.load(tmp_path / "availability.npy"))
    means = simulate(config, trace, {}, observed_layout(events))
    with np.load(tmp_path / "aggregates.npz") as z:
        deployed = {int(k.removeprefix("round_")): z[k] for k in z.files}
    assert sorted(deployed) == sorted(means) == [0, 1]
    first = deployed[0] - means[0]
    if dp == "central":  # the server adds its noise to the released mean: round 0's aggregates
        assert not first.any()  # agree; the next models (and aggregates) carry different noise
    else:  # each party's noise is fresh OS randomness, inside the aggregate: two independent
        # draws of about z * C / K = 0.125 per entry differ by about 0.18
        assert 0.05 < float(np.std(first)) < 0.5
    for name in ("participation.csv", "privacy.md", "events.jsonl", "roster.json"):
        assert (tmp_path / name).stat().st_size > 0


def test_a_reply_claiming_another_user_is_rejected() -> None:
    class Swapping(InProcessTransport):
        """Delivers user 2's share-stage reply as user 3's and the other way round."""

        def _exchange(self, stage: Stage, round_index: int, requests: Any) -> Any:
            replies = super()._exchange(stage, round_index, requests)
            if stage is Stage.SHARE and {2, 3} <= set(replies):
                replies[2], replies[3] = replies[3], replies[2]
            return replies

    training = _deployed(_config(per_round=6, rounds=1), transport_class=Swapping)
    rejected = {(e["user"], e["error"]) for e in training.events if e["event"] == "rejected"}
    assert rejected == {(2, "UnknownSenderError"), (3, "UnknownSenderError")}
    round_event = next(e for e in training.events if e["event"] == "round")
    # with the two rejected, each of the 4 others holds 3 shares, below the majority threshold
    # of 6 parties (4): the round aborts rather than aggregate [0, 1, 4, 5]
    assert round_event["aggregated"] == [] and round_event["aborted"]


def test_the_stored_update_is_float32_when_exact_and_float64_otherwise() -> None:
    from fedprivacy.flower.nodes.node import _compact, _expand

    exact = np.arange(4, dtype=np.float32).astype(np.float64)
    assert len(_compact(exact)) == 1 + 4 * 4 and np.array_equal(_expand(_compact(exact)), exact)
    clipped = np.array([np.nextafter(0.1, 0.0), 1.0])  # not a float32 value
    assert len(_compact(clipped)) == 1 + 8 * 2
    assert np.array_equal(_expand(_compact(clipped)), clipped)
    with pytest.raises(MalformedMessageError):
        _expand(b"x" + _compact(exact)[1:])
