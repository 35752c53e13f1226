"""The ServerApp: FedAvg over the nodes, the global model evaluated after every round."""

from __future__ import annotations

from pathlib import Path

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from digits.task import Net, load_data, test

app = ServerApp()


def global_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Accuracy and loss of the global model on the test images."""
    model = Net()
    model.load_state_dict(arrays.to_torch_state_dict())
    loss, accuracy = test(model, load_data(0, 1)[1])
    return MetricRecord({"accuracy": accuracy, "loss": loss})


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run the rounds; save the final model."""
    cfg = context.run_config
    out = Path(str(cfg["out"]))
    strategy = FedAvg(fraction_train=0.5, fraction_evaluate=0.0)
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(Net().state_dict()),
        num_rounds=int(cfg["num-server-rounds"]),
        train_config=ConfigRecord({"lr": float(cfg["lr"])}),
        evaluate_fn=global_evaluate,
    )
    out.mkdir(parents=True, exist_ok=True)
    torch.save(result.arrays.to_torch_state_dict(), out / "final_model.pt")
