"""The ClientApp: each node trains the global model on its share of the digits."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from digits.task import Net, load_data
from digits.task import test as test_fn
from digits.task import train as train_fn
from fedprivacy.flower import fedprivacy_mod

app = ClientApp(mods=[fedprivacy_mod])


def _data(context: Context) -> tuple:
    partition_id = int(context.node_config["partition-id"])
    num_partitions = int(context.node_config["num-partitions"])
    return load_data(partition_id, num_partitions)


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Train the received model on this node's images; return it with the loss."""
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    trainset, _ = _data(context)
    epochs = int(context.run_config["local-epochs"])
    loss = train_fn(model, trainset, epochs, float(msg.content["config"]["lr"]))
    metrics = MetricRecord({"train_loss": loss, "num-examples": len(trainset[1])})
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received model on the test images."""
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    _, testset = _data(context)
    loss, accuracy = test_fn(model, testset)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": accuracy, "num-examples": 300})
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)
