"""FedAvg's users in this process: their data on the device, their local training, evaluation.

:class:`LocalClients` is what a FedAvg round asks of the users, apart from the algorithm
(:class:`~fedprivacy.fl.engine.FederatedTraining`): it places the training and test data on the
device, chooses the trainer, and computes the updates ``x_u - x`` of a group of users
(:meth:`LocalClients.deltas`: every selected user in one call), the update one user's node
sends in a deployment (:meth:`LocalClients.client_update`, bit for bit the in-process
``trainer="loop"`` update), and the global model's test metrics (:meth:`LocalClients.evaluate`).

Examples
--------
>>> from fedprivacy.data.images import load_dataset
>>> from fedprivacy.data.partition import partition_iid
>>> from fedprivacy.fl.local_training import LocalTrainingSpec
>>> data = load_dataset("digits")
>>> clients = LocalClients(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10)),
...                        LocalTrainingSpec(epochs=1, batch_size=20, lr=0.1), data,
...                        partition_iid(data.train_y, 4, np.random.default_rng(0)))
>>> clients.trainer, float(clients.weights.max())
('vectorised', 1.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from torch import nn

from fedprivacy.data.images import ImageDataset
from fedprivacy.data.partition import Partition
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.local_training import VectorisedTrainer
from fedprivacy.fl.losses import cross_entropy_loss
from fedprivacy.fl.minibatches import client_orders
from fedprivacy.fl.params import load_flat_
from fedprivacy.fl.training_loops import train_groups_loop

__all__ = ["LocalClients", "resolve_device"]

#: The trainers :class:`LocalClients` accepts.
TRAINERS = ("vectorised", "loop", "auto")


def resolve_device(name: str) -> torch.device:
    """``"cpu"``, ``"cuda"`` or ``"cuda:N"`` as a :class:`torch.device`, checked to exist.

    Raises
    ------
    ParameterError
        If the name is not one of those, or CUDA (or that GPU) is not available.
    """
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ParameterError("device", f"must be 'cpu', 'cuda' or 'cuda:N', got {name!r}") from None
    if dev.type == "cpu":
        return dev
    if dev.type != "cuda":
        raise ParameterError("device", f"must be 'cpu', 'cuda' or 'cuda:N', got {name!r}")
    if not torch.cuda.is_available():
        raise ParameterError("device", f"{name!r} asked for, but this PyTorch sees no CUDA GPU")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ParameterError(
            "device", f"{name!r} asked for, but only {torch.cuda.device_count()} GPU(s) exist"
        )
    return dev


def _tensor(values: object, dtype: np.dtype[np.generic], device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.array(values, dtype=dtype)).to(device)


@dataclass
class LocalClients:
    """The users of a FedAvg run, in this process (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        The architecture (moved to ``device``).
    spec : LocalTrainingSpec
        Local training; its ``lr`` is the caller's (each call passes its round's spec).
    dataset : ImageDataset
        Training and test data.
    partition : Partition
        Which training samples each user holds; every user needs at least one.
    trainer : str
        ``"vectorised"`` (clients batched with ``torch.func``), ``"loop"`` (a model copy and an
        optimizer per client, the reference) or ``"auto"``: vectorised for models without
        convolutions, the loop for convolutional models on the CPU, whose per-client grouped
        convolutions run about 1.5x slower than plain ones (``benchmarks/training.py``); on a
        GPU, vectorised. Replaced by the choice.
    chunk_size : int or None
        Most clients trained in one vectorised call.
    device : str
        ``"cpu"`` or a CUDA device: where the model, the data and the local training live.

    Attributes
    ----------
    sizes : numpy.ndarray
        ``n_u``, the samples each user holds.
    weights : numpy.ndarray
        ``w_u = n_u / max n`` in ``(0, 1]``.
    """

    model: nn.Module
    spec: LocalTrainingSpec
    dataset: ImageDataset
    partition: Partition
    trainer: str = "auto"
    chunk_size: int | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        if self.trainer not in TRAINERS:
            raise ParameterError(
                "trainer", f"must be 'vectorised', 'loop' or 'auto', got {self.trainer!r}"
            )
        self.torch_device = dev = resolve_device(self.device)
        if self.trainer == "auto":
            convolutional = any(isinstance(m, nn.Conv2d) for m in self.model.modules())
            self.trainer = "loop" if convolutional and dev.type == "cpu" else "vectorised"
        self.spec.validate()
        self.model.to(dev)
        data = self.dataset
        self.features = _tensor(data.train_x, np.dtype(np.float32), dev)
        self.labels = _tensor(data.train_y, np.dtype(np.int64), dev)
        self.test_features = _tensor(data.test_x, np.dtype(np.float32), dev)
        self.test_labels = _tensor(data.test_y, np.dtype(np.int64), dev)
        self.sizes = self.partition.sizes()
        if np.any(self.sizes == 0):
            raise ParameterError("partition", "every user needs at least one training sample")
        self.weights = self.sizes / self.sizes.max()
        self._vectorised: VectorisedTrainer | None = None

    @property
    def device_name(self) -> str:
        """The device in words (``"cpu"`` or the GPU's name)."""
        if self.torch_device.type == "cuda":
            return f"cuda ({torch.cuda.get_device_name(self.torch_device)})"
        return "cpu"

    def deltas(
        self,
        global_flat: torch.Tensor,
        users: NDArray[np.intp],
        spec: LocalTrainingSpec,
        rng: np.random.Generator,
    ) -> torch.Tensor:
        """The updates ``x_u - x`` of ``users`` from ``global_flat``, one row each.

        Their minibatches are the joint :func:`~fedprivacy.fl.minibatches.client_orders` drawn
        from ``rng`` (the users' rows of the data are their groups).
        """
        indices = [self.partition.user_data(int(u)) for u in users]
        offsets, orders = client_orders(indices, spec.epochs, rng)
        data = (global_flat, self.features, self.labels, offsets, orders, spec)
        if self.trainer == "loop":
            return train_groups_loop(self.model, cross_entropy_loss, *data)
        if self._vectorised is None:
            self._vectorised = VectorisedTrainer(
                self.model, cross_entropy_loss, max_rows=None, chunk_size=self.chunk_size
            )
        return self._vectorised.train(*data)

    def client_update(
        self,
        global_flat: torch.Tensor,
        user: int,
        selected: Sequence[int],
        spec: LocalTrainingSpec,
        rng: np.random.Generator,
    ) -> NDArray[np.float32]:
        """What ``user`` computes alone: its update, bit for bit as :meth:`deltas` with the loop.

        The user trains only its own data; its minibatches are its block of the round's joint
        orders over ``selected`` (which need only the public partition sizes), drawn from
        ``rng`` as :meth:`deltas` draws them.

        Raises
        ------
        ParameterError
            If ``user`` is not among ``selected``.
        """
        users = [int(u) for u in selected]
        if int(user) not in users:
            raise ParameterError("user", f"{user} is not among the selected users")
        indices = [self.partition.user_data(u) for u in users]
        offsets, orders = client_orders(indices, spec.epochs, rng)
        row = users.index(int(user))
        lo, hi = int(offsets[row]), int(offsets[row + 1])
        local = train_groups_loop(
            self.model,
            cross_entropy_loss,
            global_flat,
            self.features,
            self.labels,
            np.array([0, hi - lo]),
            orders[:, lo:hi],
            spec,
        )
        return np.asarray(local[0].cpu().numpy(), dtype=np.float32)

    @torch.no_grad()
    def evaluate(self, global_flat: torch.Tensor, chunk: int = 2000) -> tuple[float, float]:
        """Test accuracy and mean cross-entropy of ``global_flat``."""
        load_flat_(self.model, global_flat)
        self.model.eval()
        correct, loss = 0, 0.0
        n = self.test_labels.shape[0]
        for start in range(0, n, chunk):
            x = self.test_features[start : start + chunk]
            y = self.test_labels[start : start + chunk]
            logits = self.model(x)
            loss += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(dim=1) == y).sum())
        return correct / n, loss / n
