"""run_private_fedavg on a model class defined only here, with per-user datasets and policies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from fedprivacy.errors import ParameterError
from fedprivacy.flower import PrivateFedAvgConfig, run_private_fedavg


class TwoHeads(nn.Module):
    """A model with a buffer that is not a float (kept from the server, never aggregated)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(5, 6)
        self.norm = nn.BatchNorm1d(6)
        self.head = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.norm(self.body(x))))


def _datasets(n: int = 6) -> list[TensorDataset]:
    g = torch.Generator().manual_seed(3)
    out = []
    for _ in range(n):
        x = torch.randn(30, 5, generator=g)
        out.append(TensorDataset(x, (x[:, 0] > 0).long()))
    return out


def _config(**changes: object) -> PrivateFedAvgConfig:
    settings: dict[str, object] = {"users": 6, "per_round": 4, "rounds": 2, **changes}
    return PrivateFedAvgConfig(**settings)  # type: ignore[arg-type]


def test_the_model_ends_with_the_aggregated_parameters() -> None:
    torch.manual_seed(0)
    model = TwoHeads()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = run_private_fedavg(model, _datasets(), _config(), lr=0.2, local_epochs=2)
    after = model.state_dict()
    final = result.arrays.to_torch_state_dict()
    assert all(torch.equal(after[k], final[k]) for k in after)
    assert not torch.equal(after["body.weight"], before["body.weight"])  # it trained
    # a counter is not an update: the server's value stays
    assert torch.equal(after["norm.num_batches_tracked"], before["norm.num_batches_tracked"])
    assert [len(r.aggregated) for r in result.rounds] == [4, 4]


def test_a_users_own_policy_file_is_enforced_on_its_node(tmp_path: Path) -> None:
    policy = tmp_path / "strict.toml"
    policy.write_text("noise_multiplier = 2.0\nclip = 0.5\n")
    torch.manual_seed(0)
    result = run_private_fedavg(
        TwoHeads(),
        _datasets(),
        _config(rounds=1, per_round=6, dp="distributed", noise_multiplier=1.0, clip=1.0),
        policy_files={0: policy},
    )
    refused = [e for e in result.events if e["event"] == "node_refused"]
    assert [e["user"] for e in refused] == [0]  # asked for less noise than its floor
    assert "noise_multiplier" in refused[0]["detail"]
    assert result.rounds[0].aggregated == (1, 2, 3, 4, 5)  # the others' round goes on


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"datasets": 5}, "datasets: one dataset per user: 5 given, users = 6"),
        ({"tuples": True}, r"datasets\[0\]: must be a torch Dataset .* got a tuple"),
        ({"lr": -1.0}, "lr: must be a finite number > 0, got -1.0"),
        ({"local_epochs": 0}, "local_epochs: must be >= 1"),
        ({"num_rounds": 3}, r"num_rounds: the rounds are the configuration's"),
    ],
)
def test_a_bad_argument_is_refused_naming_it_before_any_node(
    change: dict[str, object], match: str
) -> None:
    datasets: list[object] = list(_datasets(int(change.pop("datasets", 6))))  # type: ignore[call-overload]
    if change.pop("tuples", False):
        datasets = [tuple(d.tensors) for d in datasets]  # type: ignore[attr-defined]
    with pytest.raises(ParameterError, match=match):
        run_private_fedavg(TwoHeads(), datasets, _config(), **change)  # type: ignore[arg-type]


def test_printing_the_report_gives_the_readable_report() -> None:
    result = run_private_fedavg(TwoHeads(), _datasets(), _config(rounds=1))
    report = result.report()
    assert str(report) == report.to_markdown() and "T_weak" in str(report)


def test_the_clip_is_the_nodes_own_whatever_the_server_asks(tmp_path: Path) -> None:
    """A node with clip 0.01 in its policy clips to it; a server asking a larger clip is refused."""
    policy = tmp_path / "tight.toml"
    policy.write_text("clip = 0.01\nnoise_multiplier = 1.0\n")
    torch.manual_seed(0)
    result = run_private_fedavg(
        TwoHeads(),
        _datasets(),
        _config(rounds=1, dp="distributed", noise_multiplier=1.0, clip=0.01),
        policy_files=dict.fromkeys(range(6), policy),
    )
    assert len(result.rounds[0].aggregated) == 4
    torch.manual_seed(0)
    loose = run_private_fedavg(
        TwoHeads(),
        _datasets(),
        _config(rounds=1, dp="distributed", noise_multiplier=1.0, clip=1.0),
        policy_files=dict.fromkeys(range(6), policy),
    )
    refused = {e["user"] for e in loose.events if e["event"] == "node_refused"}
    asked = set(loose.rounds[0].selected)
    assert len(asked) == 4 and refused == asked and loose.rounds[0].aggregated == ()
    assert np.isnan(loose.rounds[0].noise_multiplier)


def test_every_node_is_authenticated_in_process() -> None:
    """Each node gets a fresh key: every round signs its survivor list, the report no warning."""
    torch.manual_seed(0)
    result = run_private_fedavg(TwoHeads(), _datasets(), _config())
    signed = [e for e in result.events if e["event"] == "stage" and e["stage"] == "consistency"]
    assert [e["answered"] for e in signed] == [4, 4]
    assert result.authenticated
    assert not any("NO NODE AUTHENTICATION" in c for c in result.report().caveats)


def test_the_final_report_gives_the_models_observers_their_own_epsilon() -> None:
    """Batches the nodes drew: random allocation for the models' observers, once, at the end."""
    config = _config(
        users=8,
        per_round=4,
        rounds=3,
        scheme="multiround",
        target_privacy=2,
        dp="distributed",
        noise_multiplier=2.0,
        clip=1.0,
    )
    result = run_private_fedavg(TwoHeads(), _datasets(8), config, lr=0.1)
    report = result.report(time_limit=5.0)
    assert report.epsilon_released is not None and report.epsilon_server is not None
    assert report.epsilon_released < report.epsilon_server
    assert any("uniformly random and secret" in c for c in report.caveats)
    # the live reports after each round give the server's number only (no Monte Carlo)
    live = [e for e in result.events if e.get("event") == "privacy"]
    assert len(live) == 3 and all("epsilon" in e for e in live)


@pytest.mark.parametrize("mechanism", ["central", "distributed"])
def test_canaries_join_beside_the_users_and_give_epsilon_hat(
    mechanism: str, tmp_path: Path
) -> None:
    """The users' rounds, noise and epsilons as without canaries; 2 canaries a round joined."""
    dp = {"dp": mechanism, "noise_multiplier": 1.0, "clip": 1.0, "scheme": "random"}
    runs = {}
    for canaries in (0, 3):  # 3 canaries: 2 a round beside 4 of 6 users
        torch.manual_seed(0)
        out = tmp_path / str(canaries)
        config = _config(**dp, canaries=canaries)
        runs[canaries] = run_private_fedavg(TwoHeads(), _datasets(), config, run_dir=out)
    plain, audited = runs[0], runs[3]
    matrix = audited.ledger.matrix()
    assert matrix.shape == (2, 9) and matrix[:, 6:].sum(axis=1).tolist() == [2, 2]
    assert np.array_equal(matrix[:, :6], plain.ledger.matrix())  # the users' rounds unchanged
    noise = [[r.noise_multiplier for r in run.rounds] for run in (plain, audited)]
    assert noise[0] == noise[1]  # the users' noise in the sum: the canaries add none
    report, alone = audited.report(), plain.report()
    assert report.per_user_epsilon == alone.per_user_epsilon  # the users' own, not the canaries'
    hat = audited.epsilon_hat
    assert plain.epsilon_hat is None and hat is not None and hat["canaries"] == 3
    assert hat["low"] <= hat["epsilon"] <= hat["high"]
    summary = json.loads((tmp_path / "3" / "summary.json").read_text())
    assert summary["epsilon_hat"] == hat
    # every run's participation.csv: users u0, u1, ... (the canaries after them)
    header = (tmp_path / "3" / "participation.csv").read_text().splitlines()[0]
    assert header == ",".join(f"u{u}" for u in range(9))


def test_canaries_need_dp_and_their_rate() -> None:
    with pytest.raises(ParameterError, match="canaries: measure a DP mechanism"):
        _config(canaries=3).validate()
    dp = {"dp": "central", "noise_multiplier": 1.0, "clip": 1.0}
    with pytest.raises(ParameterError, match="canaries: must be a multiple of 3"):
        _config(**dp, canaries=2).validate()
