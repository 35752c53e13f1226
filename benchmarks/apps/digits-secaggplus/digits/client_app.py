"""The ClientApp: a NumPyClient behind Flower's ``secaggplus_mod`` (the legacy client API)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from digits.task import Net, load_data
from digits.task import train as train_fn
from flwr.app import Context
from flwr.client import ClientApp, NumPyClient
from flwr.client.mod import secaggplus_mod


class DigitsClient(NumPyClient):  # type: ignore[misc]
    """Trains the received model on this node's images, exactly as the FedAvg app does."""

    def __init__(self, partition_id: int, num_partitions: int, epochs: int) -> None:
        self.trainset, _ = load_data(partition_id, num_partitions)
        self.epochs = epochs

    def fit(
        self, parameters: list[np.ndarray], config: dict[str, Any]
    ) -> tuple[list[np.ndarray], int, dict[str, Any]]:
        model = Net()
        keys = model.state_dict().keys()
        model.load_state_dict(
            {k: torch.from_numpy(v) for k, v in zip(keys, parameters, strict=True)}
        )
        loss = train_fn(model, self.trainset, self.epochs, float(config["lr"]))
        arrays = [v.detach().numpy() for v in model.state_dict().values()]
        return arrays, len(self.trainset[1]), {"train_loss": loss}


def client_fn(context: Context) -> Any:
    """This node's client."""
    return DigitsClient(
        int(context.node_config["partition-id"]),
        int(context.node_config["num-partitions"]),
        int(context.run_config["local-epochs"]),
    ).to_client()


app = ClientApp(client_fn=client_fn, mods=[secaggplus_mod])
