"""Tabular models of the ULDP-FL experiments (Section 5.1 of Kato et al.).

Every model is a :class:`torch.nn.Module` without buffers, dropout or batch statistics, so that
its output is a pure function of its parameters and input: the vectorised trainer
(:class:`fedprivacy.fl.local_training.VectorisedTrainer`) evaluates it with
:func:`torch.func.functional_call` under :func:`torch.func.vmap` over stacked per-user
parameters. Build them by name, with a seeded initialisation, through
:func:`fedprivacy.models.registry.build_model`; the MNIST CNN of the same experiments is
:class:`fedprivacy.models.images.PaperMnistCNN`.

Where they come from:

- Heart Disease and TCGA-BRCA: the paper uses "the same [...] models [...] as [FLamby]". FLamby's
  ``fed_heart_disease.Baseline`` is ``sigmoid(Linear(13, 1))`` trained with ``BCELoss``; here
  :class:`LogisticRegression` returns the logit and the loss is the (numerically stabler,
  mathematically equal) ``binary_cross_entropy_with_logits``; the prediction is ``logit > 0``
  (probability > 0.5, as FLamby's accuracy metric thresholds). FLamby's
  ``fed_tcga_brca.Baseline`` is ``Linear(39, 1)`` whose output is a risk score
  (:class:`CoxLinear`); its ``BaselineLoss`` is the negative Cox partial log-likelihood averaged
  over the batch, and its metric is lifelines' concordance index.
- Creditcard: "a neural network with about 4K parameters"; the authors' ``PrivateFraudNet(30,
  30, num_layers)`` is ``Linear(30, 30) -> ReLU -> GroupNorm(1, 30)`` followed by
  ``num_layers`` blocks ``Linear(30, 30) -> ReLU -> GroupNorm(1, 30) -> Dropout(0.5)`` and
  ``Linear(30, 2)``. Their code passes ``num_layers=4`` (5,012 parameters); three blocks give
  4,022, the paper's "about 4K", so :class:`FraudNet` defaults to three blocks, without
  dropout. GroupNorm has affine parameters but no running statistics (no buffers).

The losses are in :mod:`fedprivacy.fl.losses`, the metrics in :mod:`fedprivacy.uldp.metrics`;
:func:`fedprivacy.uldp.tasks.task_for` gives each dataset its model, loss and metric.

Examples
--------
>>> model = FraudNet()
>>> tuple(model(torch.zeros(5, 30)).shape)
(5, 2)
>>> tuple(LogisticRegression(13)(torch.zeros(5, 13)).shape)
(5,)
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "CoxLinear",
    "FraudNet",
    "LogisticRegression",
]


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
