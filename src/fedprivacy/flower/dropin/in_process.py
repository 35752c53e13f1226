"""Private FedAvg on a PyTorch model and per-user datasets in this process, no Flower app needed.

:func:`run_private_fedavg` takes any ``torch.nn.Module`` and one dataset per user and runs what
a Flower app with the mod runs (:mod:`fedprivacy.flower.dropin.mod`,
:class:`~fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg`): selection, SecAgg with each user's
clip and noise on its node, the ledger and the per-user privacy report. Each user is a node of
a ClientApp called in this process
(:class:`~fedprivacy.flower.dropin.app_transport.ClientAppTransport`), its local training plain
mini-batch SGD on its own dataset; the messages are a deployment's.

Examples
--------
>>> import torch
>>> from torch.utils.data import TensorDataset
>>> from fedprivacy.flower import PrivateFedAvgConfig
>>> g = torch.Generator().manual_seed(0)
>>> datasets = [TensorDataset(torch.randn(20, 3, generator=g), torch.randint(0, 2, (20,),
...             generator=g)) for _ in range(6)]
>>> model = torch.nn.Linear(3, 2)
>>> config = PrivateFedAvgConfig(users=6, per_round=4, rounds=2, scheme="multiround",
...                              target_privacy=2, dp="distributed", noise_multiplier=1.0,
...                              clip=1.0)
>>> result = run_private_fedavg(model, datasets, config, lr=0.1)
>>> [len(r.aggregated) for r in result.rounds]  # two of three batches the nodes drew
[4, 4]
>>> result.report().t_weak["upper"], round(result.report().epsilon, 2)
(4, 5.98)
"""

from __future__ import annotations

import copy
import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn
from torch.utils.data import DataLoader, Dataset

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.flower.dropin.app_transport import ClientAppTransport
from fedprivacy.flower.dropin.mod import MOD_WIRE, fedprivacy_mod
from fedprivacy.flower.dropin.private_config import PrivateFedAvgConfig
from fedprivacy.flower.dropin.private_fedavg import EvaluateFn, PrivateFedAvg
from fedprivacy.flower.dropin.private_result import PrivateFedAvgResult
from fedprivacy.flower.nodes.operator import write_federation
from fedprivacy.policy import POLICY_KEY, PartyPolicy

__all__ = ["run_private_fedavg"]

#: The loss of a batch: ``loss(model(inputs), targets)``.
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _client_app(
    model: nn.Module,
    datasets: Sequence[Dataset[Any]],
    local_epochs: int,
    batch_size: int,
    loss: Loss,
) -> ClientApp:
    """A ClientApp with the mod whose train function runs SGD on the node's own dataset."""
    app = ClientApp(mods=[fedprivacy_mod])

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        user = int(context.node_config["partition-id"])
        local = copy.deepcopy(model)
        local.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
        lr = float(msg.content.config_records["config"]["lr"])  # type: ignore[arg-type]
        optimizer = torch.optim.SGD(local.parameters(), lr=lr, foreach=False)
        data = DataLoader(datasets[user], batch_size=batch_size, shuffle=True)
        for _ in range(local_epochs):
            for inputs, targets in data:
                optimizer.zero_grad()
                loss(local(inputs), targets).backward()  # type: ignore[no-untyped-call]
                optimizer.step()
        metrics = MetricRecord({"num-examples": len(data.dataset)})  # type: ignore[arg-type]
        content = RecordDict({"arrays": ArrayRecord(local.state_dict()), "metrics": metrics})
        return Message(content, reply_to=msg)

    return app


#: Arguments of Flower's habits, and where they belong here.
_ELSEWHERE = {
    "num_rounds": "the rounds are the configuration's: PrivateFedAvgConfig(rounds=...)",
    "num_server_rounds": "the rounds are the configuration's: PrivateFedAvgConfig(rounds=...)",
    "rounds": "the rounds are the configuration's: PrivateFedAvgConfig(rounds=...)",
}


def _check_arguments(
    datasets: Sequence[Any],
    config: PrivateFedAvgConfig,
    lr: float,
    local_epochs: int,
    batch_size: int,
    unknown: Mapping[str, Any],
) -> None:
    """Refuse what the run cannot use, naming the argument (before any node is set up)."""
    for name in unknown:
        why = _ELSEWHERE.get(name, "not an argument of run_private_fedavg")
        raise ParameterError(name, why)
    if len(datasets) != config.users:
        raise ParameterError(
            "datasets", f"one dataset per user: {len(datasets)} given, users = {config.users}"
        )
    for u, dataset in enumerate(datasets):
        if not isinstance(dataset, Dataset):
            kind = type(dataset).__name__
            raise ParameterError(
                f"datasets[{u}]",
                f"must be a torch Dataset yielding (inputs, targets), got a {kind}: wrap "
                "tensors as TensorDataset(x, y)",
            )
    if isinstance(lr, bool) or not (isinstance(lr, int | float) and math.isfinite(lr) and lr > 0):
        raise ParameterError("lr", f"must be a finite number > 0, got {lr!r}")
    require_int("local_epochs", local_epochs, minimum=1)
    require_int("batch_size", batch_size, minimum=1)


def _authenticated_nodes(
    folder: Path, users: int, policy_files: Mapping[int, str | Path]
) -> tuple[dict[int, dict[str, Any]], Path]:
    """Each node's configuration: its policy (the user's own, or the defaults) with a node key.

    :func:`~fedprivacy.flower.nodes.operator.write_federation` in ``folder``, the key and roster
    added where a policy names none (as ``flower deploy``'s operator adds them); a user's own file
    keeps its folder as its ``state_dir``.
    """

    def policy_of(u: int) -> PartyPolicy:
        own = policy_files.get(u)
        return PartyPolicy() if own is None else PartyPolicy.from_policy_file(Path(own))

    roster, policies = write_federation(folder, users, policy_of)
    nodes = {
        u: {"partition-id": u, POLICY_KEY: str(policies / f"node-{u}.toml")} for u in range(users)
    }
    return nodes, roster


def run_private_fedavg(
    model: nn.Module,
    datasets: Sequence[Dataset[Any]],
    config: PrivateFedAvgConfig,
    *,
    lr: float = 0.1,
    local_epochs: int = 1,
    batch_size: int = 32,
    loss: Loss = nn.functional.cross_entropy,
    policy_files: Mapping[int, str | Path] | None = None,
    evaluate_fn: EvaluateFn | None = None,
    run_dir: str | Path | None = None,
    **unknown: Any,
) -> PrivateFedAvgResult:
    """Train ``model`` with private FedAvg over ``datasets`` (user ``u`` holds ``datasets[u]``).

    Parameters
    ----------
    model : torch.nn.Module
        The model; its parameters are the starting point and, on return, the final model.
    datasets : sequence of torch.utils.data.Dataset
        One per user (``config.users`` of them), yielding ``(inputs, targets)``.
    config : PrivateFedAvgConfig
        Selection, secure aggregation and DP.
    lr, local_epochs, batch_size : float, int, int
        Each selected user's local SGD.
    loss : callable
        ``loss(model(inputs), targets)`` (default cross-entropy).
    policy_files : mapping of int to path, optional
        A user's own policy file (:class:`~fedprivacy.policy.PartyPolicy` TOML); users without
        one keep the safe defaults. Every node gets a fresh node key (P-256, from the OS) and
        the federation's roster, unless its policy names its own: the rounds run with node
        authentication, every SecAgg key and survivor list signed, as ``flower deploy``'s.
    evaluate_fn, run_dir
        As in :meth:`PrivateFedAvg.run <fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg.run>`.

    Raises
    ------
    ParameterError
        Naming the argument: a number of datasets other than ``config.users``, a dataset that
        is not a ``torch.utils.data.Dataset`` (an ``(x, y)`` tuple: wrap it in
        ``TensorDataset(x, y)``), a learning rate, epoch count or batch size out of range, or an
        argument this function does not take (``num_rounds``: the configuration's ``rounds``).
    """
    _check_arguments(datasets, config, lr, local_epochs, batch_size, unknown)
    app = _client_app(model, datasets, local_epochs, batch_size, loss)
    with tempfile.TemporaryDirectory(prefix="fedprivacy-nodes-") as folder:
        nodes, roster = _authenticated_nodes(Path(folder), config.users, policy_files or {})
        result = PrivateFedAvg(config.with_overrides(roster=str(roster))).run(
            ClientAppTransport(app, nodes, MOD_WIRE),
            ArrayRecord(model.state_dict()),
            train_config={"lr": float(lr)},
            evaluate_fn=evaluate_fn,
            run_dir=run_dir,
        )
    model.load_state_dict(result.arrays.to_torch_state_dict())
    return result
