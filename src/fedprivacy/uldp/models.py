"""Models of the ULDP-FL experiments (Section 5.1 of Kato et al.).

Every model is a :class:`torch.nn.Module` without buffers, dropout or batch statistics, so that
its output is a pure function of its parameters and input: the per-user trainer
(:mod:`fedprivacy.uldp.per_user_training`) evaluates it with :func:`torch.func.functional_call`
under :func:`torch.func.vmap` over stacked per-user parameters.

=================  ===========================  ============  =========================
dataset            model                        parameters    loss / metric
=================  ===========================  ============  =========================
heart_disease      :class:`LogisticRegression`  14            logistic / accuracy
tcga_brca          :class:`CoxLinear`           40            Cox (Breslow) / C-index
mnist              :class:`PaperMnistCNN`       21,840        cross-entropy / accuracy
creditcard         :class:`FraudNet`            4,022         cross-entropy / accuracy
=================  ===========================  ============  =========================

Where they come from:

- Heart Disease and TCGA-BRCA: the paper uses "the same [...] models [...] as [FLamby]". FLamby's
  ``fed_heart_disease.Baseline`` is ``sigmoid(Linear(13, 1))`` trained with ``BCELoss``; here the
  module returns the logit and the loss is the (numerically stabler, mathematically equal)
  ``binary_cross_entropy_with_logits``; the prediction is ``logit > 0`` (probability > 0.5, as
  FLamby's accuracy metric thresholds). FLamby's ``fed_tcga_brca.Baseline`` is ``Linear(39, 1)``
  whose output is a risk score; its ``BaselineLoss`` is the negative Cox partial log-likelihood
  averaged over the batch, and its metric is lifelines' concordance index.
- MNIST: "a CNN with about 20K parameters"; the authors' code (``CNNMnist`` in ``src/models.py``
  of github.com/FumiyukiKato/uldp-fl) is ``conv5x5(1->10) -> maxpool2 -> ReLU -> conv5x5(10->20)
  -> Dropout2d -> maxpool2 -> ReLU -> Linear(320, 50) -> ReLU -> Dropout -> Linear(50, 10) ->
  log_softmax``: 21,840 parameters. :class:`PaperMnistCNN` is that network without the two
  dropout layers (a dropout layer would make the forward pass random, which the vectorised
  per-user trainer and its loop oracle cannot share) and returning logits (the authors apply
  ``CrossEntropyLoss`` to ``log_softmax`` outputs, which equals cross-entropy on the logits).
- Creditcard: "a neural network with about 4K parameters"; the authors' ``PrivateFraudNet(30,
  30, num_layers)`` is ``Linear(30, 30) -> ReLU -> GroupNorm(1, 30)`` followed by
  ``num_layers`` blocks ``Linear(30, 30) -> ReLU -> GroupNorm(1, 30) -> Dropout(0.5)`` and
  ``Linear(30, 2)``. Their code passes ``num_layers=4`` (5,012 parameters); three blocks give
  4,022, the paper's "about 4K", so :class:`FraudNet` defaults to three blocks, again without
  dropout. GroupNorm has affine parameters but no running statistics (no buffers).

The losses are in :mod:`fedprivacy.uldp.losses`, the metrics in :mod:`fedprivacy.uldp.metrics`;
:func:`fedprivacy.uldp.tasks.task_for` gives each dataset its model, loss and metric.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from fedprivacy.errors import ParameterError

__all__ = [
    "MODEL_NAMES",
    "CoxLinear",
    "FraudNet",
    "LogisticRegression",
    "PaperMnistCNN",
    "build_model",
    "count_parameters",
]


# -- models --------------------------------------------------------------------------------


class LogisticRegression(nn.Module):
    """Logistic regression ``Linear(num_features, 1)`` returning the logit (Heart Disease).

    Parameters
    ----------
    num_features : int
        Number of input features (13 for FLamby's Fed-Heart-Disease).
    """

    def __init__(self, num_features: int = 13) -> None:
        super().__init__()
        self.linear = nn.Linear(num_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the logits, shape ``(batch,)``."""
        out: torch.Tensor = self.linear(x).squeeze(-1)
        return out


class CoxLinear(nn.Module):
    """Linear Cox model ``Linear(num_features, 1)`` returning the risk score (TCGA-BRCA).

    A higher score means a higher hazard, i.e. an earlier expected event.

    Parameters
    ----------
    num_features : int
        Number of input features (39 for FLamby's Fed-TCGA-BRCA).
    """

    def __init__(self, num_features: int = 39) -> None:
        super().__init__()
        self.fc = nn.Linear(num_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the risk scores, shape ``(batch,)``."""
        out: torch.Tensor = self.fc(x).squeeze(-1)
        return out


class PaperMnistCNN(nn.Module):
    """The authors' MNIST CNN without dropout: 21,840 parameters.

    ``conv5x5(1->10) -> maxpool2 -> ReLU -> conv5x5(10->20) -> maxpool2 -> ReLU -> flatten (320)
    -> Linear(50) -> ReLU -> Linear(10)``. Input ``(batch, 1, 28, 28)``, output logits.
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


class FraudNet(nn.Module):
    """The authors' Creditcard network without dropout (4,022 parameters by default).

    ``Linear(in, hidden) -> ReLU -> GroupNorm(1, hidden)``, then ``num_blocks`` times
    ``Linear(hidden, hidden) -> ReLU -> GroupNorm(1, hidden)``, then ``Linear(hidden, 2)``.

    Parameters
    ----------
    input_dim : int
        Number of features (30 for the Kaggle schema).
    hidden_dim : int
        Width of the hidden layers (30 in the authors' code).
    num_blocks : int
        Hidden blocks after the input block (3 gives the paper's "about 4K" parameters).
    """

    def __init__(self, input_dim: int = 30, hidden_dim: int = 30, num_blocks: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Linear(input_dim, hidden_dim),
            nn.ReLU(),
            nn.GroupNorm(1, hidden_dim),
        ]
        for _ in range(num_blocks):
            layers += [nn.Linear(hidden_dim, hidden_dim), nn.ReLU(), nn.GroupNorm(1, hidden_dim)]
        layers.append(nn.Linear(hidden_dim, 2))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the logits, shape ``(batch, 2)``."""
        out: torch.Tensor = self.net(x)
        return out


MODEL_NAMES: tuple[str, ...] = ("logistic", "cox-linear", "paper-mnist-cnn", "fraudnet")


def build_model(name: str, *, seed: int = 0, num_features: int | None = None) -> nn.Module:
    """Build a model with parameters drawn from a private, seeded torch generator.

    The global torch RNG is left untouched (the initialisation runs under
    :func:`torch.random.fork_rng`).

    Parameters
    ----------
    name : {"logistic", "cox-linear", "paper-mnist-cnn", "fraudnet"}
        Which model.
    seed : int
        Seed of the initialisation (PyTorch's default initialisation of each layer).
    num_features : int, optional
        Input width of the tabular models (defaults 13, 39 and 30).

    Returns
    -------
    torch.nn.Module
        The model, in float32 on the CPU.

    Raises
    ------
    ParameterError
        If ``name`` is unknown.
    """
    if name not in MODEL_NAMES:
        raise ParameterError("model", f"must be one of {', '.join(MODEL_NAMES)}; got {name!r}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name == "logistic":
            return LogisticRegression(num_features or 13)
        if name == "cox-linear":
            return CoxLinear(num_features or 39)
        if name == "paper-mnist-cnn":
            return PaperMnistCNN()
        return FraudNet(num_features or 30)


def count_parameters(model: nn.Module) -> int:
    """Return the number of scalar parameters of ``model``."""
    return sum(p.numel() for p in model.parameters())
