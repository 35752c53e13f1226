"""The mod and the server workflow on a model and a ClientApp defined only in this file.

The app is what a Flower user writes (its own ``nn.Module``, data and ``@app.train``); the
nodes run it through :class:`ClientAppTransport` (the real ClientApp, each node its own
context), the server through :class:`PrivateFedAvg`. The adversary of the secure-path checks is
the honest-but-curious server: every reply it received is recorded and inspected.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from fedprivacy.flower.dropin.app_transport import ClientAppTransport, make_message
from fedprivacy.flower.dropin.arrays import ArrayLayout
from fedprivacy.flower.dropin.mod import ARRAYS, MOD_WIRE, fedprivacy_mod
from fedprivacy.flower.dropin.private_fedavg import PrivateFedAvg, PrivateFedAvgConfig
from fedprivacy.flower.dropin.private_result import RosterError
from fedprivacy.flower.fedavg.reference import observed_layout
from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.flower.messaging.transport import Transport
from fedprivacy.secagg.messages import MaskedInput, decode_message
from fedprivacy.secagg.params_wire import decode_params

pytestmark = pytest.mark.deployment  # starts processes (pyproject.toml: markers)

USERS = 6


class TinyNet(nn.Module):
    """A model fedprivacy has never seen: two layers, a buffer-free state_dict."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def _data(partition: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + partition)
    x = torch.randn(32, 4, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


app = ClientApp(mods=[fedprivacy_mod])


@app.train()
def train(msg: Message, context: Context) -> Message:
    """The app's own training, unchanged by fedprivacy."""
    model = TinyNet()
    model.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    lr = float(msg.content.config_records["config"].get("lr", 0.1))  # type: ignore[arg-type]
    x, y = _data(int(context.node_config["partition-id"]))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, foreach=False)
    for _ in range(3):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    content = RecordDict(
        {"arrays": ArrayRecord(model.state_dict()), "metrics": MetricRecord({"num-examples": 32})}
    )
    return Message(content, reply_to=msg)


class Recording(Transport):
    """Everything the server received, kept (the honest-but-curious server's view)."""

    def __init__(self, inner: Transport) -> None:
        super().__init__()
        self.inner = inner
        self.received: list[tuple[Stage, int, Record]] = []
        self.log: list[tuple[Stage, int, Record, Record]] = []

    @property
    def users(self) -> tuple[int, ...]:
        return self.inner.users

    def _exchange(self, stage: Stage, r: int, requests: dict[int, Record]) -> dict[int, Record]:
        replies = self.inner._exchange(stage, r, requests)
        self.received += [(stage, u, reply) for u, reply in replies.items()]
        self.log += [(stage, u, requests[u], reply) for u, reply in replies.items()]
        return replies


#: In process, without node keys: the nodes must allow it (never the default).
OPEN = "allow_unauthenticated = true\n"


def _nodes(tmp_path: Path, policy: str = "") -> Recording:
    """The nodes, each with ``policy`` in a file of a fresh folder (its state beside it)."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    configs: dict[int, dict[str, Any]] = {}
    for u in range(USERS):
        path = folder / f"policy-{u}.toml"
        path.write_text(OPEN + policy)
        configs[u] = {"partition-id": u, "fedprivacy-policy": str(path)}
    return Recording(ClientAppTransport(app, configs, MOD_WIRE))


def _initial() -> ArrayRecord:
    torch.manual_seed(0)
    return ArrayRecord(TinyNet().state_dict())


def _run(transport: Transport, **config: Any) -> Any:
    settings = {"users": USERS, "per_round": 4, "rounds": 2, **config}
    workflow = PrivateFedAvg(PrivateFedAvgConfig(**settings))
    return workflow.run(transport, _initial(), train_config={"lr": 0.2})


def _flat(arrays: ArrayRecord) -> np.ndarray:
    return ArrayLayout.of(arrays).flatten(arrays)


def test_secure_rounds_give_the_plaintext_average_and_the_server_never_sees_an_update(
    tmp_path: Path,
) -> None:
    policy = "allow_plaintext = true\n"
    clear = _run(_nodes(tmp_path, policy), secagg=False)
    nodes = _nodes(tmp_path)
    secure = _run(nodes)
    assert [r.aggregated for r in secure.rounds] == [r.aggregated for r in clear.rounds]
    assert all(len(r.aggregated) == 4 for r in secure.rounds)
    moved = np.abs(_flat(clear.arrays) - _flat(_initial())).max()
    assert moved > 1e-2  # the app really trained
    # the sum of fixed-point encodings equals the plaintext mean up to the grid
    assert np.abs(_flat(secure.arrays) - _flat(clear.arrays)).max() < 1e-5
    # the final arrays have the app's own layout and dtypes
    assert ArrayLayout.of(secure.arrays) == ArrayLayout.of(_initial())
    stages = {stage for stage, _, _ in nodes.received}
    assert stages == {Stage.ADVERTISE, Stage.SHARE, Stage.MASK, Stage.UNMASK}
    # what the server received: protocol messages only, never a model or an update
    assert all(ARRAYS not in reply and set(reply) == {"message"} for _, _, reply in nodes.received)
    _masked_inputs_hide_the_updates(nodes)


def test_rounds_with_batches_take_whole_batches_the_nodes_drew(tmp_path: Path) -> None:
    """Before the first selection the nodes draw the batches (three exchanges, once)."""
    nodes = _nodes(tmp_path, "batch_size = 2\n")  # each node checks its batch mates
    result = _run(nodes, scheme="multiround", target_privacy=2, rounds=3)
    stages = [stage for stage, _, _, _ in nodes.log]
    draw = [Stage.COMMIT, Stage.REVEAL, Stage.DRAW]
    assert stages[: 3 * USERS] == [s for s in draw for _ in range(USERS)]
    assert Stage.COMMIT not in stages[3 * USERS :]
    layout = observed_layout(result.events)
    assert layout is not None and sorted(layout.order) == list(range(USERS))
    batches = list(layout.batches(range(USERS), 2).values())
    for r in result.rounds:
        assert len(r.aggregated) == 4
        assert all(b <= set(r.aggregated) or not b & set(r.aggregated) for b in batches)
    assert not [e for e in result.events if e["event"] == "node_refused"]


def _masked_inputs_hide_the_updates(nodes: Recording) -> None:
    """Each round-0 masked input, read as the server reads it, is uncorrelated with the update."""
    first = next(req for stage, _, req, _ in nodes.log if stage is Stage.ADVERTISE)
    codec = decode_params(first["params"]).codec
    assert codec.bits == 32
    scale = codec.scale
    masked = [
        (u, rep) for stage, u, req, rep in nodes.log if stage is Stage.MASK and req["round"] == 0
    ]
    assert len(masked) == 4
    for u, reply in masked:
        update = _update_of(u)
        message = decode_message(reply["message"])
        assert isinstance(message, MaskedInput)
        vector = message.vector.astype(np.float64)[: update.size]
        assert np.abs(update).max() > 1e-3
        assert abs(np.corrcoef(vector, update)[0, 1]) < 0.5
        encoded = np.round(update * scale) % 2.0**32  # the user's update on the grid, mod 2^32
        near = np.abs((vector - encoded + 2.0**31) % 2.0**32 - 2.0**31)
        assert near.min() > 4  # no entry is the update's encoding (chance: 1e-9 an entry)


def _update_of(user: int) -> np.ndarray:
    """User ``user``'s round-0 update: its app's training from the initial model."""
    content = RecordDict({"arrays": _initial(), "config": ConfigRecord({"lr": 0.2})})
    context = Context(1, user + 1, {"partition-id": user}, RecordDict(), {})
    reply = train(make_message(content, user + 1, "train", "0"), context)
    return np.asarray(_flat(reply.content.array_records["arrays"]) - _flat(_initial()))


def test_distributed_dp_reports_per_user_epsilon_and_t_weak_after_every_round(
    tmp_path: Path,
) -> None:
    nodes = _nodes(tmp_path)
    result = _run(
        nodes,
        scheme="multiround",
        target_privacy=2,
        dp="distributed",
        noise_multiplier=1.0,
        clip=0.5,
        rounds=3,
    )
    report = result.report()
    assert report.mechanism == "distributed" and report.epsilon is not None
    assert report.epsilon_server == report.epsilon  # the nodes add the noise: holds vs the server
    assert report.t_weak is not None and report.t_weak["upper"] >= 2  # batches of T = 2
    live = [e for e in result.events if e["event"] == "privacy"]
    assert [e["round"] for e in live] == [0, 1, 2]
    assert live[-1]["epsilon"] == pytest.approx(report.epsilon)
    assert all(e["t_weak"]["lower"] >= 2 for e in live)  # the live audit's certified bound
    final = live[-1]["t_weak"]  # meets the searched interval of the final report
    assert max(final["lower"], report.t_weak["lower"]) <= min(
        final["upper"], report.t_weak["upper"]
    )
    assert live[-1]["t_strong"] == report.t_strong and live[-1]["exposed_users"] == 0
    files = result.write(tmp_path / "run")
    assert {f.name for f in files} >= {"privacy.md", "summary.json", "events.jsonl"}
    assert "Epsilon" in (tmp_path / "run" / "privacy.md").read_text()


def test_a_node_with_its_own_noise_floor_refuses_a_round_without_noise(tmp_path: Path) -> None:
    nodes = _nodes(tmp_path, "noise_multiplier = 1.0\nclip = 0.5\n")
    result = _run(nodes, rounds=1)  # the server asks for no DP at all
    refused = [e for e in result.events if e["event"] == "node_refused"]
    assert refused and all(e["error"] == "PolicyViolationError" for e in refused)
    assert "noise_multiplier" in refused[0]["detail"]
    assert result.rounds[0].aggregated == ()  # nothing learned; the run goes on
    assert np.array_equal(_flat(result.arrays), _flat(_initial()))


def test_a_node_refuses_a_plaintext_round_of_any_other_strategy() -> None:
    context = Context(1, 1, {"partition-id": 0}, RecordDict(), {})
    content = RecordDict({"arrays": _initial()})
    reply = app(make_message(content, 1, "train", "0"), context)
    assert reply.has_error() and "PolicyViolationError" in str(reply.error.reason)


def test_a_short_roster_is_refused_before_any_round() -> None:
    with pytest.raises(RosterError, match="5 of 6 nodes answered"):
        RosterError.check({u: u + 1 for u in range(5)}, USERS, 60.0, [])


def test_deployments_turn_flower_telemetry_off(tmp_path: Path) -> None:
    from fedprivacy.flower.deploy.local_deployment import LocalDeployment

    deployment = LocalDeployment(tmp_path, tls=False)
    try:
        assert deployment.env["FLWR_TELEMETRY_ENABLED"] == "0"
    finally:
        deployment.stop()


def test_the_nodes_protocol_stages_import_no_torch_scipy_or_experiments() -> None:
    """What a node imports for the mod and its stages (the app's own training aside)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import fedprivacy.flower.dropin.mod, fedprivacy.secagg.client, fedprivacy.dp.party_noise\n"
        "import fedprivacy.fl.aggregation, fedprivacy.flower.nodes.node_policy\n"
        "heavy = ('torch', 'scipy', 'sklearn', 'matplotlib', 'fedprivacy.experiments')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_options_that_would_be_ignored_on_flower_are_refused_before_any_node() -> None:
    from fedprivacy.errors import ParameterError

    with pytest.raises(ParameterError, match="protocol_dropout: simulates dropouts"):
        PrivateFedAvg(PrivateFedAvgConfig(protocol_dropout=0.1))
    with pytest.raises(ParameterError, match="per_round: is spelled per-round"):
        PrivateFedAvgConfig.from_run_config({"users": 6, "per_round": 4})


@pytest.mark.parametrize(
    ("run_config", "match"),
    [
        ({"per-rond": 6}, "per-rond: is not a key of PrivateFedAvg; did you mean per-round?"),
        ({"rounds": 3, "num-server-rounds": 4}, "sets the same as rounds: give one of them"),
        ({"allow-plaintext": True}, "allow-plaintext: is a key of a node's own policy"),
        ({"min-threshold": 3}, "min-threshold: is a key of a node's own policy"),
        ({"dp": "distributed"}, "noise-multiplier: "),  # named as the run config spells it
        ({"dp": "none", "epsilon-budget": 5.0}, "epsilon-budget: needs a DP mechanism"),
        (
            {"dp": "central", "noise-multiplier": 1.0, "epsilon-budget": 0.1},
            "epsilon-budget: 0.1 holds not even one round",
        ),
    ],
)
def test_a_run_config_key_that_would_run_silently_wrong_is_refused_as_written(
    run_config: dict[str, object], match: str
) -> None:
    from fedprivacy.errors import ParameterError

    with pytest.raises(ParameterError, match=match):
        PrivateFedAvgConfig.from_run_config({"users": 6, **run_config})
    # the app's own keys stay the app's, even close to nothing of ours
    config = PrivateFedAvgConfig.from_run_config({"users": 6, "lr": 0.1, "local-epochs": 2})
    assert config.users == 6


def test_the_servers_epsilon_budget_retires_users_before_it_is_passed() -> None:
    import torch
    from torch.utils.data import TensorDataset

    from fedprivacy.flower import run_private_fedavg

    g = torch.Generator().manual_seed(0)
    users = [
        TensorDataset(torch.randn(10, 3, generator=g), torch.randint(0, 2, (10,), generator=g))
        for _ in range(6)
    ]
    run_config = {"users": 6, "per-round": 4, "num-server-rounds": 6, "dp": "central"}
    run_config |= {"noise-multiplier": 2.0, "clip": 1.0, "epsilon-budget": 4.0}
    config = PrivateFedAvgConfig.from_run_config(run_config)
    result = run_private_fedavg(torch.nn.Linear(3, 2), users, config)
    report = result.report()
    assert report.per_user_epsilon is not None and 0 < report.per_user_epsilon["max"] <= 4.0
    assert sum(len(r.aggregated) for r in result.rounds) < 6 * 4  # some were retired
