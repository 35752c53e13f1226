"""Image classifiers: the networks of the FedAvg experiments and the ULDP-FL MNIST CNN.

Every model is a plain :class:`torch.nn.Module` without BatchNorm or dropout, so that its output
is a pure function of its parameters and its input. This is what lets
:class:`fedprivacy.fl.local_training.VectorisedTrainer` and
:class:`fedprivacy.fl.local_training.VectorisedTrainer` train many clients at once with
:func:`torch.func.vmap` over stacked parameters (no buffers, no train/eval switch, no randomness
in the forward pass). Build them by name, with a seeded initialisation, through
:func:`fedprivacy.models.registry.build_model`.

Examples
--------
>>> model = LeNet5(num_classes=10)
>>> tuple(model(torch.zeros(2, 3, 32, 32)).shape)
(2, 10)
>>> list(model.buffers())
[]
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "VGG11_CONFIG",
    "VGG11",
    "DigitsMLP",
    "LeNet5",
    "MnistCNN",
    "PaperMnistCNN",
]

#: VGG-11 ("configuration A") feature extractor: output channels of each 3x3 conv, ``"M"`` = pool.
VGG11_CONFIG = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


class MnistCNN(nn.Module):
    """The MNIST CNN of McMahan et al. (2017), "Communication-efficient learning of deep networks".

    ``conv5x5(1->32, padding 2) + ReLU + maxpool2 -> conv5x5(32->64, padding 2) + ReLU + maxpool2
    -> flatten (3136) -> linear(512) + ReLU -> linear(num_classes)``. With ten classes it has
    exactly 1,663,370 parameters. Input: ``(batch, 1, 28, 28)``.

    Parameters
    ----------
    num_classes : int
        Number of output logits (10 for MNIST).

    """

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, kernel_size=5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=5, padding=2)
        self.fc1 = nn.Linear(7 * 7 * 64, 512)
        self.fc2 = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, num_classes)`` of images ``(batch, 1, 28, 28)``."""
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv2(x)), 2)
        x = nn.functional.relu(self.fc1(torch.flatten(x, 1)))
        out: torch.Tensor = self.fc2(x)
        return out


class LeNet5(nn.Module):
    """The CIFAR-10 LeNet-5 of the federated-learning literature and the PyTorch tutorial.

    ``conv5x5(3->6) + ReLU + maxpool2 -> conv5x5(6->16) + ReLU + maxpool2 -> flatten (400)
    -> linear(120) + ReLU -> linear(84) + ReLU -> linear(num_classes)``; no padding. With ten
    classes it has 62,006 parameters. Input: ``(batch, 3, 32, 32)``.

    Parameters
    ----------
    num_classes : int
        Number of output logits (10 for CIFAR-10).

    """

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, num_classes)`` of images ``(batch, 3, 32, 32)``."""
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(nn.functional.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = nn.functional.relu(self.fc1(x))
        x = nn.functional.relu(self.fc2(x))
        out: torch.Tensor = self.fc3(x)
        return out


class VGG11(nn.Module):
    """VGG-11 for 32x32 images (CIFAR-100), without BatchNorm.

    Feature extractor :data:`VGG11_CONFIG` (3x3 convs with padding 1, each followed by ReLU;
    ``"M"`` = 2x2 max-pool), which maps ``(3, 32, 32)`` to ``(512, 1, 1)``, then a single
    ``linear(512 -> num_classes)`` classifier. BatchNorm is deliberately omitted: with it the
    function would also depend on running statistics (buffers) and on the train/eval mode, whereas
    here the parameters fully define the function, so clients can be trained with
    :func:`torch.func.vmap` over their stacked parameters. With 100 classes it has 9,271,780
    parameters.

    Parameters
    ----------
    num_classes : int
        Number of output logits (100 for CIFAR-100).

    """

    def __init__(self, num_classes: int = 100) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for item in VGG11_CONFIG:
            if item == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                assert isinstance(item, int)
                layers.append(nn.Conv2d(channels, item, kernel_size=3, padding=1))
                layers.append(nn.ReLU())
                channels = item
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, num_classes)`` of images ``(batch, 3, 32, 32)``."""
        out: torch.Tensor = self.classifier(torch.flatten(self.features(x), 1))
        return out


class DigitsMLP(nn.Module):
    """A one-hidden-layer perceptron, e.g. for the scikit-learn digits (``1x8x8`` images).

    ``flatten (in_features) -> linear(hidden) + ReLU -> linear(num_classes)``. For the digits
    (64 inputs, 128 hidden units, 10 classes) it has 9,610 parameters.

    Parameters
    ----------
    in_features : int
        Number of input features after flattening (64 for the digits).
    num_classes : int
        Number of output logits.
    hidden : int
        Width of the hidden layer.

    """

    def __init__(self, in_features: int = 64, num_classes: int = 10, hidden: int = 128) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the logits of a batch of inputs.

        Parameters
        ----------
        x : torch.Tensor
            Inputs of shape ``(batch, *input_shape)`` with ``prod(input_shape) == in_features``.

        Returns
        -------
        torch.Tensor
            Logits of shape ``(batch, num_classes)``.

        """
        out: torch.Tensor = self.fc2(nn.functional.relu(self.fc1(torch.flatten(x, 1))))
        return out


class PaperMnistCNN(nn.Module):
    """The MNIST CNN of the ULDP-FL experiments (Kato et al.), without dropout: 21,840 parameters.

    ``conv5x5(1->10) -> maxpool2 -> ReLU -> conv5x5(10->20) -> maxpool2 -> ReLU -> flatten (320)
    -> Linear(50) -> ReLU -> Linear(num_classes)``. Input ``(batch, 1, 28, 28)``, output logits.

    The paper uses "a CNN with about 20K parameters"; the authors' code (``CNNMnist`` in
    ``src/models.py`` of github.com/FumiyukiKato/uldp-fl) is ``conv5x5(1->10) -> maxpool2 -> ReLU
    -> conv5x5(10->20) -> Dropout2d -> maxpool2 -> ReLU -> Linear(320, 50) -> ReLU -> Dropout ->
    Linear(50, 10) -> log_softmax``. This is that network without the two dropout layers (a
    dropout layer would make the forward pass random, which the vectorised per-user trainer and
    its loop oracle cannot share) and returning logits (the authors apply ``CrossEntropyLoss`` to
    ``log_softmax`` outputs, which equals cross-entropy on the logits).

    Parameters
    ----------
    num_classes : int
        Number of output logits (10 for MNIST).

    Examples
    --------
    >>> sum(p.numel() for p in PaperMnistCNN().parameters())
    21840
    """

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the logits, shape ``(batch, num_classes)``."""
        h = F.relu(F.max_pool2d(self.conv1(x), 2))
        h = F.relu(F.max_pool2d(self.conv2(h), 2))
        h = F.relu(self.fc1(h.flatten(1)))
        out: torch.Tensor = self.fc2(h)
        return out
