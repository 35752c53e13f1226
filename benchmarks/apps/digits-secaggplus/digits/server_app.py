"""The ServerApp: Flower's SecAgg+ workflow over the legacy FedAvg; the final model saved."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from digits.task import Net, load_data, test
from flwr.app import Context
from flwr.common import ndarrays_to_parameters
from flwr.server import Grid, LegacyContext, ServerApp, ServerConfig
from flwr.server.strategy import FedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

app = ServerApp()


def _model(arrays: list[np.ndarray]) -> Net:
    model = Net()
    keys = model.state_dict().keys()
    model.load_state_dict(
        {k: torch.from_numpy(np.asarray(v)) for k, v in zip(keys, arrays, strict=True)}
    )
    return model


def global_evaluate(
    server_round: int, arrays: list[np.ndarray], config: dict[str, Any]
) -> tuple[float, dict[str, Any]]:
    """Loss and accuracy of the global model on the test images."""
    loss, accuracy = test(_model(arrays), load_data(0, 1)[1])
    return loss, {"accuracy": accuracy}


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Wait for every node, run the rounds with SecAgg+, save the final model."""
    cfg = context.run_config
    nodes = int(cfg["nodes"])
    started = time.monotonic()
    while len(list(grid.get_node_ids())) < nodes and time.monotonic() - started < 300:
        time.sleep(0.5)
    lr = float(cfg["lr"])
    strategy = FedAvg(
        fraction_fit=0.5,
        fraction_evaluate=0.0,
        min_available_clients=nodes,
        initial_parameters=ndarrays_to_parameters([v.numpy() for v in Net().state_dict().values()]),
        on_fit_config_fn=lambda _round: {"lr": lr},
        evaluate_fn=global_evaluate,
    )
    selected = max(2, nodes // 2)
    legacy = LegacyContext(
        context=context,
        config=ServerConfig(num_rounds=int(cfg["num-server-rounds"])),
        strategy=strategy,
    )
    # every selected node holds shares (the complete graph), a majority reconstructs: as ours
    workflow = DefaultWorkflow(
        fit_workflow=SecAggPlusWorkflow(num_shares=1.0, reconstruction_threshold=selected // 2 + 1)
    )
    workflow(grid, legacy)
    final = legacy.state.array_records["parameters"]
    out = Path(str(cfg["out"]))
    out.mkdir(parents=True, exist_ok=True)
    torch.save(_model(final.to_numpy_ndarrays()).state_dict(), out / "final_model.pt")
