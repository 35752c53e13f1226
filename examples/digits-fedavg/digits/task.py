"""The model, the data and the training loop: the app's own, no fedprivacy in here."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

Data = tuple[torch.Tensor, torch.Tensor]


class Net(nn.Module):
    """A small CNN for 8x8 grey images: two convolutions, one linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class scores of a batch of images ``(n, 1, 8, 8)``."""
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        return self.fc(x.flatten(1))


def load_data(partition_id: int, num_partitions: int) -> tuple[Data, Data]:
    """The node's share of the training images, and the common test images (300)."""
    x, y = load_digits(return_X_y=True)
    images = torch.tensor(x.reshape(-1, 1, 8, 8) / 16.0, dtype=torch.float32)
    labels = torch.tensor(y, dtype=torch.long)
    order = np.random.default_rng(0).permutation(len(labels))
    test, train = order[:300], order[300:]
    part = np.array_split(train, num_partitions)[partition_id]
    return (images[part], labels[part]), (images[test], labels[test])


def train(net: Net, data: Data, epochs: int, lr: float) -> float:
    """Local SGD on ``data`` in mini-batches of 32; the mean loss of the last epoch."""
    x, y = data
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, foreach=False)
    generator = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(epochs):
        losses = []
        for batch in torch.randperm(len(y), generator=generator).split(32):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(net(x[batch]), y[batch])
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return float(np.mean(losses))


def test(net: Net, data: Data) -> tuple[float, float]:
    """Loss and accuracy of ``net`` on ``data``."""
    x, y = data
    with torch.no_grad():
        out = net(x)
    loss = float(nn.functional.cross_entropy(out, y))
    return loss, float((out.argmax(1) == y).float().mean())
