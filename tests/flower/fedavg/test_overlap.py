"""Overlapped secure rounds: round t's unmasking travels with round t + 1's keys (3 exchanges).

The app and its nodes are a Flower user's (a model defined only here, the real ClientApp with the
mod, each node its own context); the server is :class:`PrivateFedAvg` with ``overlap_rounds``.
The adversary of the privacy checks is the honest-but-curious server: everything it received is
recorded and inspected; a node's refusals are checked from what it answered.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.fl.training_config import TrainConfig, build_training
from fedprivacy.flower.dropin.app_transport import ClientAppTransport
from fedprivacy.flower.dropin.arrays import ArrayLayout
from fedprivacy.flower.dropin.mod import ARRAYS, MOD_WIRE, fedprivacy_mod
from fedprivacy.flower.dropin.private_fedavg import PrivateFedAvg, PrivateFedAvgConfig
from fedprivacy.flower.fedavg.reference import (
    max_abs_error,
    observed_dropouts,
    observed_layout,
    simulate,
)
from fedprivacy.flower.fedavg.training import DeployedTraining, LiveNodes
from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.flower.messaging.transport import InProcessTransport, Transport
from fedprivacy.flower.nodes.node import Node
from fedprivacy.flower.nodes.node_policy import training_policy
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.secagg.driver import Stage as ProtocolStage
from fedprivacy.secagg.messages import (
    MaskedInput,
    ShareKind,
    UnmaskResponse,
    decode_message,
)
from fedprivacy.secagg.messages import (
    Message as ProtocolMessage,
)
from fedprivacy.secagg.params_wire import decode_params
from fedprivacy.secagg.server_view import ReceivedState, server_view

USERS = 6


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(3, 5)
        self.head = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.body(x)))


app = ClientApp(mods=[fedprivacy_mod])


@app.train()
def train(msg: Message, context: Context) -> Message:
    model = SmallNet()
    model.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    g = torch.Generator().manual_seed(int(context.node_config["partition-id"]))
    x = torch.randn(24, 3, generator=g)
    y = (x[:, 0] > x[:, 1]).long()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3, foreach=False)
    for _ in range(2):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "m": MetricRecord({"n": 24})})
    return Message(content, reply_to=msg)


class Recording(Transport):
    """Every exchange and reply kept; ``silent`` users do not answer one exchange."""

    def __init__(self, tmp_path: Path, policy: str = "", silent: Any = ()) -> None:
        super().__init__()
        folder = Path(tempfile.mkdtemp(dir=tmp_path))  # the nodes' state beside their policy
        self.folder = folder
        configs: dict[int, dict[str, Any]] = {}
        for u in range(USERS):
            (folder / f"p{u}.toml").write_text("allow_unauthenticated = true\n" + policy)
            configs[u] = {"partition-id": u, "fedprivacy-policy": str(folder / f"p{u}.toml")}
        self.inner = ClientAppTransport(app, configs, MOD_WIRE)
        self.silent = set(silent)  # (stage, round, user)
        self.calls: list[tuple[Stage, int]] = []
        self.log: list[tuple[Stage, int, int, Record, Record]] = []

    @property
    def users(self) -> tuple[int, ...]:
        return self.inner.users

    def _exchange(self, stage: Stage, r: int, requests: dict[int, Record]) -> dict[int, Record]:
        self.calls.append((stage, r))
        asked = {u: q for u, q in requests.items() if (stage, r, u) not in self.silent}
        replies = self.inner._exchange(stage, r, asked)
        self.log += [(stage, r, u, requests[u], reply) for u, reply in replies.items()]
        return replies


def _initial() -> ArrayRecord:
    torch.manual_seed(1)
    return ArrayRecord(SmallNet().state_dict())


def _run(transport: Transport, **config: Any) -> Any:
    settings = {"users": USERS, "per_round": 4, "rounds": 3, "scheme": "multiround"}
    settings |= {"target_privacy": 2, **config}
    return PrivateFedAvg(PrivateFedAvgConfig(**settings)).run(transport, _initial())


def _flat(arrays: ArrayRecord) -> np.ndarray:
    return ArrayLayout.of(arrays).flatten(arrays)


def test_overlapped_rounds_take_three_exchanges_and_give_the_same_rounds(tmp_path: Path) -> None:
    plain_nodes, nodes = Recording(tmp_path), Recording(tmp_path)
    unbatched = {"scheme": "random", "target_privacy": None}  # no draw: the same selections
    plain = _run(plain_nodes, **unbatched)
    overlapped = _run(nodes, overlap_rounds=True, **unbatched)
    assert len(plain_nodes.calls) == 4 * 3
    assert len(nodes.calls) == 3 * 3 + 1  # the last round's unmasking goes alone
    assert [r.selected for r in overlapped.rounds] == [r.selected for r in plain.rounds]
    assert [r.aggregated for r in overlapped.rounds] == [r.aggregated for r in plain.rounds]
    assert all(len(r.aggregated) == 4 for r in overlapped.rounds)
    # the same training, the same sums, up to the stochastic rounding on the grid
    assert np.abs(_flat(overlapped.arrays) - _flat(plain.arrays)).max() < 1e-5
    assert np.abs(_flat(overlapped.arrays) - _flat(_initial())).max() > 1e-2
    assert overlapped.report().epsilon == plain.report().epsilon
    stages = [e for e in overlapped.events if e.get("event") == "stage"]
    joint = [(e["round"], e["stage"]) for e in stages if e.get("joint")]
    assert joint == [(1, "advertise"), (2, "advertise")]


def test_the_server_receives_protocol_messages_only_and_sends_the_model_with_share(
    tmp_path: Path,
) -> None:
    nodes = Recording(tmp_path)
    _run(nodes, overlap_rounds=True)
    for stage, r, _u, request, reply in nodes.log:
        if stage in DRAW_STAGES:  # the nodes' draw of their batches, before round 0
            assert set(reply) <= {"commitment", "secret", "drawn"} and ARRAYS not in request
            continue
        assert ARRAYS not in reply  # never a model or an update
        assert set(reply) <= {"message", "unmask-message"} and "message" in reply
        assert (ARRAYS in request) == (stage is Stage.SHARE)  # the nodes train at share
        if "unmask-message" in request:
            assert stage is Stage.UNMASK and request["unmask-round"] == r
            assert request["round"] == r + 1 and request["stage"] == "advertise"
    masked = [decode_message(rep["message"]) for s, _, _, _, rep in nodes.log if s is Stage.MASK]
    assert len(masked) == 12 and all(isinstance(m, MaskedInput) for m in masked)


def test_a_node_silent_in_the_joint_exchange_misses_both_rounds_parts(tmp_path: Path) -> None:
    """Six users a round (threshold 4): one silent at round 0's unmasking does not stop it."""
    victim = 0
    nodes = Recording(tmp_path, silent={(Stage.UNMASK, 0, victim)})
    result = _run(nodes, overlap_rounds=True, per_round=USERS)
    assert result.rounds[0].aggregated == tuple(range(USERS))  # enough shares came
    assert victim in result.rounds[1].selected and victim not in result.rounds[1].aggregated
    assert len(result.rounds[1].aggregated) == USERS - 2  # its batch leaves with it (atomic)
    missed = {
        (e["round"], e["stage"])
        for e in result.events
        if e.get("event") == "no_reply" and e["user"] == victim
    }
    assert missed == {(0, "unmask"), (1, "advertise")}


def test_a_node_unmasks_a_round_once_even_when_asked_again_alone(tmp_path: Path) -> None:
    """A lying server replays round 0's unmask request after the joint exchange: refused."""
    nodes = Recording(tmp_path)
    _run(nodes, overlap_rounds=True)
    stage, r, user, request, _ = next(e for e in nodes.log if "unmask-message" in e[3])
    again = {"stage": "unmask", "round": r, "message": request["unmask-message"]}
    reply = nodes.inner._exchange(Stage.UNMASK, r, {user: again})[user]
    assert reply["error"] in {"OutOfOrderError", "DuplicateMessageError", "PolicyViolationError"}


def test_the_run_config_names_the_option() -> None:
    config = PrivateFedAvgConfig.from_run_config({"users": 6, "overlap-rounds": True})
    assert config.overlap_rounds is True


class Tampering(Recording):
    """A lying server: ``change(stage, round, user, request)`` rewrites each request first."""

    def __init__(self, tmp_path: Path, change: Any) -> None:
        super().__init__(tmp_path)
        self.change = change

    def _exchange(self, stage: Stage, r: int, requests: dict[int, Record]) -> dict[int, Record]:
        changed = {u: self.change(stage, r, u, dict(q)) for u, q in requests.items()}
        return super()._exchange(stage, r, changed)


def _refusals(result: Any) -> set[tuple[int, str, int, str]]:
    return {
        (e["round"], e["stage"], e["user"], e["error"])
        for e in result.events
        if e.get("event") == "node_refused"
    }


def test_a_node_trains_once_a_round_whatever_the_server_sends(tmp_path: Path) -> None:
    """The model sent again with ``share`` (a second training, a second update): refused."""

    def model_twice(stage: Stage, r: int, u: int, request: Record) -> Record:
        if stage is Stage.SHARE and r == 0 and u == 1:
            request[ARRAYS] = _initial()
        return request

    result = _run(Tampering(tmp_path, model_twice), per_round=USERS)
    assert _refusals(result) == {(0, "share", 1, "OutOfOrderError")}
    assert 1 not in result.rounds[0].aggregated and len(result.rounds[0].aggregated) == 4


def test_a_node_without_the_model_shares_no_keys(tmp_path: Path) -> None:
    """Overlapped, a share request without the model: the node has nothing to mask; refused."""

    def no_model(stage: Stage, r: int, u: int, request: Record) -> Record:
        if stage is Stage.SHARE and r == 1 and u == 4:
            request.pop(ARRAYS, None)
        return request

    result = _run(Tampering(tmp_path, no_model), per_round=USERS, overlap_rounds=True)
    assert _refusals(result) == {(1, "share", 4, "OutOfOrderError")}
    assert 4 not in result.rounds[1].aggregated


def test_only_a_rounds_opening_request_carries_an_unmasking(tmp_path: Path) -> None:
    def carried_by_share(stage: Stage, r: int, u: int, request: Record) -> Record:
        if stage is Stage.SHARE and r == 1 and u == 2:
            request |= {"unmask-round": 0, "unmask-message": b"x"}
        return request

    result = _run(Tampering(tmp_path, carried_by_share), per_round=USERS, overlap_rounds=True)
    assert _refusals(result) == {(1, "share", 2, "MalformedMessageError")}


# ---------------------------------------------------------------- FedAvg with the pipeline's nodes


DRAW = 3
"""Exchanges of the nodes' draw of their batches (commit, reveal, draw), once a session."""
DRAW_STAGES = {Stage.COMMIT, Stage.REVEAL, Stage.DRAW}


def _layout(deployed: DeployedTraining) -> BatchLayout | None:
    """The batches the deployment's nodes drew."""
    assert isinstance(deployed.aggregator, SecureAggregator)
    return deployed.aggregator.layout


def _train_config(**changes: Any) -> TrainConfig:
    base = TrainConfig(
        users=USERS,
        per_round=4,
        rounds=3,
        scheme="multiround",
        target_privacy=2,
        secagg=True,
        dropout=0.0,
        trainer="loop",
        seed=5,
        eval_every=3,
    )
    return base.with_overrides(**changes)


class Counting(InProcessTransport):
    """The in-process nodes; every exchange counted."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.calls = 0

    def _exchange(self, stage: Stage, r: int, requests: dict[int, Record]) -> dict[int, Record]:
        self.calls += 1
        return super()._exchange(stage, r, requests)


def _deployed(
    config: TrainConfig, overlap: bool, key_rounds: int = 1, **kw: Any
) -> tuple[Any, Counting]:
    policy = (
        training_policy(config)
        .with_overrides(key_rounds=key_rounds)
        .with_overrides(allow_unauthenticated=True)
    )
    transport = Counting({u: Node(u, policy=policy) for u in range(USERS)}, **kw)
    training = build_training(
        config,
        training_class=DeployedTraining,
        availability=LiveNodes(USERS, transport.users),
        transport=transport,
        config_toml=config.to_toml(),
        overlap=overlap,
    )
    training.run(config.rounds)
    return training, transport


def test_overlapped_deployed_rounds_equal_the_in_process_pipeline_bit_for_bit() -> None:
    config = _train_config(rounds=4)
    deployed, transport = _deployed(config, overlap=True)
    assert transport.calls == DRAW + 3 * 4 + 1
    means = simulate(config, deployed.availability.trace, {}, _layout(deployed))
    assert sorted(deployed.aggregates) == sorted(means) == [0, 1, 2, 3]
    assert max_abs_error(deployed.aggregates, means) == 0.0
    plain, plain_transport = _deployed(config, overlap=False)
    assert plain_transport.calls == DRAW + 4 * 4
    # the same rounds, once each run is replayed on the batches its nodes drew
    replayed = simulate(config, plain.availability.trace, {}, _layout(plain))
    assert max_abs_error(plain.aggregates, replayed) == 0.0


def test_the_reference_replays_a_dropout_in_the_joint_exchange() -> None:
    """User 5 silent in round 0's unmask + round 1's keys: both rounds replayed exactly."""
    config = _train_config(per_round=USERS, rounds=3)
    deployed, _ = _deployed(config, overlap=True, dropouts={0: {5: Stage.UNMASK}})
    dropouts = observed_dropouts(deployed.events)
    assert dropouts == {0: {5: ProtocolStage.UNMASK}, 1: {5: ProtocolStage.ADVERTISE_KEYS}}
    assert 5 in deployed.ledger.selected(0)  # its input was unmasked by the others' shares
    means = simulate(config, deployed.availability.trace, dropouts, _layout(deployed))
    assert max_abs_error(deployed.aggregates, means) == 0.0
    assert len(deployed.ledger.selected(1)) == USERS - 2  # its batch left round 1 with it


def test_reused_deployed_keys_equal_the_in_process_pipeline_in_two_exchanges_a_round() -> None:
    config = _train_config(per_round=USERS, rounds=4)
    deployed, transport = _deployed(config, overlap=True, key_rounds=10)
    assert transport.calls == DRAW + 3 + 2 * 3 + 1  # round 0 advertises; then unmask + share, mask
    means = simulate(config, deployed.availability.trace, {}, _layout(deployed))
    assert max_abs_error(deployed.aggregates, means) == 0.0


# ---------------------------------------------------------------- reused keys (a node's policy)

REUSE = "key_rounds = 10\n"


def _received(log: list[tuple[Stage, int, int, Record, Record]]) -> dict[int, list[Any]]:
    """Every protocol message the server received, by the round it belongs to."""
    out: dict[int, list[ProtocolMessage]] = {}
    for _, _, _, _, reply in log:
        for key in ("message", "unmask-message"):
            if key in reply:
                message = decode_message(reply[key])
                out.setdefault(message.header.round_index, []).append(message)
    return out


def _view(log: list[tuple[Stage, int, int, Record, Record]], r: int) -> ReceivedState:
    """What the server received in round ``r``, rebuilt from the bytes it got."""
    params = next(
        decode_params(q["params"]) for *_, q, _ in log if q.get("round") == r and "params" in q
    )
    return ReceivedState.from_messages(params, _received(log)[r])


def test_reused_keys_open_rounds_at_share_two_exchanges_a_round(tmp_path: Path) -> None:
    fresh, reuse = Recording(tmp_path), Recording(tmp_path, policy=REUSE)
    plain = _run(fresh, overlap_rounds=True, per_round=USERS, rounds=4)
    reused = _run(reuse, overlap_rounds=True, per_round=USERS, rounds=4)
    assert len(fresh.calls) == DRAW + 3 * 4 + 1
    assert len(reuse.calls) == DRAW + 3 + 2 * 3 + 1
    assert [r.aggregated for r in reused.rounds] == [r.aggregated for r in plain.rounds]
    assert np.abs(_flat(reused.arrays) - _flat(plain.arrays)).max() < 1e-5
    stages = [e for e in reused.events if e.get("event") == "stage"]
    assert [(e["round"], e["stage"]) for e in stages if e.get("joint")] == [
        (1, "share"),
        (2, "share"),
        (3, "share"),
    ]
    assert {e["round"] for e in stages if e["stage"] == "advertise"} == {0}
    for stage, r, _u, request, _ in reuse.log:  # the model: at share in round 0, then at mask
        carries = ARRAYS in request
        assert carries == ((stage, r == 0) in {(Stage.SHARE, True), (Stage.MASK, False)})
    kinds = {
        k
        for ms in _received(reuse.log).values()
        for m in ms
        if isinstance(m, UnmaskResponse)
        for _, k, _ in m.shares
    }
    assert kinds == {ShareKind.SELF_MASK_SEED}  # nobody dropped: no masking key, no pair key


def test_a_dropout_under_reused_keys_reveals_round_keys_and_the_sum_only(tmp_path: Path) -> None:
    """User 3 shares in round 2, then is silent at mask; its batch (the nodes drew) is left out."""
    nodes = Recording(tmp_path, policy=REUSE, silent={(Stage.MASK, 2, 3)})
    result = _run(nodes, overlap_rounds=True, per_round=USERS, rounds=3)
    layout = observed_layout(result.events)
    assert layout is not None
    (batch,) = [b for b in layout.batches(range(USERS), 2).values() if 3 in b]
    (mate,) = batch - {3}
    rest = sorted(set(range(USERS)) - batch)
    assert list(result.rounds[2].aggregated) == rest
    state = _view(nodes.log, 2)
    assert state.mask_keys == frozenset() and mate not in state.seeds
    assert state.pair_keys == {(min(u, v), max(u, v)) for u in rest for v in batch}
    assert server_view(state).components == (frozenset(rest),)
    for r in (0, 1):
        assert server_view(_view(nodes.log, r)).components == (frozenset(range(USERS)),)


class Restarting(Recording):
    """Node ``user`` loses its state just before exchange ``(stage, round)``.

    Its run's state and, with ``disk``, the state file beside its policy (a machine wiped); a
    restart alone keeps the file, and with it the key epoch.
    """

    def __init__(self, tmp_path: Path, at: tuple[Stage, int, int], disk: bool = True) -> None:
        super().__init__(tmp_path, policy=REUSE)
        self.at, self.disk = at, disk

    def _exchange(self, stage: Stage, r: int, requests: dict[int, Record]) -> dict[int, Record]:
        if (stage, r) == self.at[:2]:
            self.inner.contexts[self.at[2]].state = RecordDict()
            if self.disk:
                (self.folder / f"party-{self.at[2]}.state").unlink()
        return super()._exchange(stage, r, requests)


def test_a_node_that_lost_its_keys_refuses_and_advertises_again(tmp_path: Path) -> None:
    # without batches: a node whose machine was wiped also lost its draw of them, and refuses
    # every round of the session with batches (it cannot check its batch mates)
    result = _run(
        Restarting(tmp_path, (Stage.UNMASK, 1, 1)),
        overlap_rounds=True,
        per_round=USERS,
        rounds=4,
        scheme="random",
        target_privacy=None,
    )
    assert _refusals(result) >= {(2, "share", 1, "OutOfOrderError")}
    assert 1 not in result.rounds[2].aggregated and 1 in result.rounds[3].aggregated
    stages = [e for e in result.events if e.get("event") == "stage"]
    opening = {(e["round"], e["stage"], e["asked"]) for e in stages if e.get("joint")}
    assert (3, "advertise", 1) in opening  # only the node without keys advertises


def test_a_restarted_node_keeps_its_key_epoch_from_its_state_file(tmp_path: Path) -> None:
    """Issue #50, finding 4: the epoch outlives the run's state; only the round is lost."""
    result = _run(
        Restarting(tmp_path, (Stage.UNMASK, 1, 1), disk=False),
        overlap_rounds=True,
        per_round=USERS,
        rounds=4,
    )
    assert {(u, s) for u, s, _, _ in _refusals(result)} == {(1, "unmask")}
    assert all(1 in result.rounds[r].aggregated for r in (2, 3))
    stages = [e for e in result.events if e.get("event") == "stage"]
    assert not [e for e in stages if e["stage"] == "advertise" and e["round"] > 0]
