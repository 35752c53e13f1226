"""Models, losses and metrics of the ULDP-FL experiments (Section 5.1 of Kato et al.).

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

Metrics: the paper reports accuracy for Heart Disease, MNIST and Creditcard (Figs. 4-6) and the
C-index for TCGA-BRCA (Fig. 7). The authors' *local* Creditcard evaluation computes
``roc_auc_score`` on hard 0/1 predictions; :func:`roc_auc` here is the proper ROC-AUC of the
fraud scores and is reported next to the accuracy as an extra metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike
from scipy.stats import rankdata
from torch import nn
from torch.nn import functional as F

from fedprivacy.errors import ParameterError

__all__ = [
    "MODEL_NAMES",
    "CoxLinear",
    "FraudNet",
    "LogisticRegression",
    "MaskedLoss",
    "PaperMnistCNN",
    "TaskSpec",
    "accuracy",
    "binary_logistic_loss",
    "build_model",
    "concordance_index",
    "count_parameters",
    "cox_loss",
    "cross_entropy_loss",
    "roc_auc",
    "task_for",
]

MaskedLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss(output, target, mask) -> scalar``: the mean loss over the rows where ``mask`` is 1."""


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


# -- losses (masked, vmap-friendly) -----------------------------------------------------------


def _masked_mean(per_row: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (per_row * mask).sum() / mask.sum().clamp_min(1.0)


def binary_logistic_loss(
    logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean binary cross-entropy of logits over the rows where ``mask`` is 1.

    Parameters
    ----------
    logits : torch.Tensor
        Shape ``(n,)``.
    target : torch.Tensor
        Labels 0/1, shape ``(n,)`` (any dtype).
    mask : torch.Tensor
        Float 0/1 weights, shape ``(n,)``.

    Returns
    -------
    torch.Tensor
        Scalar; equals FLamby's ``BCELoss`` on ``sigmoid(logits)`` over the real rows.
    """
    per_row = F.binary_cross_entropy_with_logits(logits, target.to(logits.dtype), reduction="none")
    return _masked_mean(per_row, mask)


def cross_entropy_loss(
    logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean cross-entropy over the rows where ``mask`` is 1 (logits ``(n, C)``, labels ``(n,)``)."""
    per_row = F.cross_entropy(logits, target, reduction="none")
    return _masked_mean(per_row, mask)


def cox_loss(scores: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Negative Cox partial log-likelihood with Breslow ties, over the rows where ``mask`` is 1.

    With risk scores ``s``, events ``E`` and times ``T`` of the ``m`` real rows::

        loss = (1 / m) * sum_{i: E_i = 1} [ log sum_{j: T_j >= T_i} exp(s_j) - s_i ]

    The risk set of a record holds every record (of the batch) whose time is not earlier, tied
    times included (Breslow). FLamby's ``BaselineLoss`` computes the same sum through a
    cumulative sum over records sorted by decreasing time, which puts only the tied records
    sorted before ``i`` in its risk set, and also divides by the number of rows (censored
    included); without ties the two agree. A batch with fewer than two real rows has no
    comparison and gives 0 (for one event: ``log exp(s_i) - s_i``).

    Parameters
    ----------
    scores : torch.Tensor
        Risk scores, shape ``(n,)``.
    target : torch.Tensor
        Float ``(n, 2)``: event indicator ``E`` (column 0) and time ``T`` (column 1).
    mask : torch.Tensor
        Float 0/1, shape ``(n,)``; padded rows are excluded from every risk set.

    Returns
    -------
    torch.Tensor
        Scalar.
    """
    events = target[:, 0].to(scores.dtype)
    times = target[:, 1]
    n = scores.shape[0]
    eye = torch.eye(n, dtype=torch.bool, device=scores.device)
    # risk[i, j]: record j is at risk at record i's time (the diagonal keeps every row finite)
    risk = ((times[None, :] >= times[:, None]) & (mask[None, :] > 0)) | eye
    masked = torch.where(risk, scores[None, :].expand(n, n), -math.inf)
    per_row = (torch.logsumexp(masked, dim=1) - scores) * events
    return _masked_mean(per_row, mask)


# -- metrics ---------------------------------------------------------------------------------


def accuracy(outputs: ArrayLike, labels: ArrayLike) -> float:
    """Fraction of correct predictions.

    Parameters
    ----------
    outputs : array_like
        Logits ``(n, C)`` (the prediction is the argmax) or binary logits ``(n,)`` (the
        prediction is ``logit > 0``, i.e. probability > 0.5).
    labels : array_like
        Integer labels ``(n,)``.

    Returns
    -------
    float
        Accuracy in ``[0, 1]`` (``nan`` for no rows).
    """
    out = np.asarray(outputs, dtype=np.float64)
    y = np.asarray(labels).reshape(-1)
    if len(y) == 0:
        return math.nan
    pred = out.argmax(axis=1) if out.ndim == 2 else (out > 0).astype(np.int64)
    return float(np.mean(pred == y))


def roc_auc(scores: ArrayLike, labels: ArrayLike) -> float:
    """Area under the ROC curve of ``scores`` for the positive class (ties count one half).

    Computed as the Mann-Whitney statistic from average ranks.

    Parameters
    ----------
    scores : array_like
        Scores, higher meaning more likely positive, shape ``(n,)``.
    labels : array_like
        0/1 labels, shape ``(n,)``.

    Returns
    -------
    float
        ROC-AUC in ``[0, 1]``; ``nan`` when one class is absent.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    y = np.asarray(labels).reshape(-1).astype(bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def concordance_index(times: ArrayLike, risk_scores: ArrayLike, events: ArrayLike) -> float:
    """Harrell's concordance index of risk scores (higher risk = earlier event).

    A pair ``(i, j)`` is comparable when ``i`` had an event and ``T_i < T_j``, or ``T_i == T_j``
    and ``j`` is censored (it survived at least as long); it is concordant when
    ``risk_i > risk_j`` and counts one half when the risks tie. This is the definition of
    lifelines' ``concordance_index(T, -risk, E)`` used by FLamby.

    Parameters
    ----------
    times : array_like
        Event or censoring times ``T``, shape ``(n,)``.
    risk_scores : array_like
        Predicted risks, shape ``(n,)``.
    events : array_like
        Event indicators ``E`` (1 = event observed), shape ``(n,)``.

    Returns
    -------
    float
        C-index in ``[0, 1]``; ``nan`` when no pair is comparable.
    """
    t = np.asarray(times, dtype=np.float64).reshape(-1)
    r = np.asarray(risk_scores, dtype=np.float64).reshape(-1)
    e = np.asarray(events).reshape(-1).astype(bool)
    if not (len(t) == len(r) == len(e)):
        raise ParameterError("times", "times, risk_scores and events must have the same length")
    concordant, comparable = 0.0, 0
    # vectorised over j for each event i (n is a few hundred)
    for i in np.flatnonzero(e):
        comp = (t[i] < t) | ((t[i] == t) & ~e)
        if not comp.any():
            continue
        rj = r[comp]
        comparable += int(comp.sum())
        concordant += float((r[i] > rj).sum()) + 0.5 * float((r[i] == rj).sum())
    return concordant / comparable if comparable else math.nan


# -- tasks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskSpec:
    """What to train and how to score it, for one dataset.

    Attributes
    ----------
    dataset : str
        Dataset name.
    task : {"binary", "multiclass", "survival"}
        The learning task.
    model_name : str
        Name for :func:`build_model`.
    num_features : int or None
        Input width of a tabular model.
    loss : MaskedLoss
        Training (and test) loss.
    metric_name : str
        ``"accuracy"`` or ``"c_index"``.
    """

    dataset: str
    task: str
    model_name: str
    num_features: int | None
    loss: MaskedLoss
    metric_name: str

    def build_model(self, seed: int = 0) -> nn.Module:
        """Return a freshly initialised model (see :func:`build_model`)."""
        return build_model(self.model_name, seed=seed, num_features=self.num_features)

    def evaluate(
        self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_rows: int = 8192
    ) -> dict[str, float]:
        """Score ``model`` on a test set.

        Parameters
        ----------
        model : torch.nn.Module
            The model (not modified).
        x, y : torch.Tensor
            Test inputs and targets (as in the training data).
        batch_rows : int
            Rows per forward pass.

        Returns
        -------
        dict of str to float
            ``"metric"`` (the task's metric), ``"loss"`` (the mean test loss; for survival the
            Cox loss of the whole test set) and, for binary tasks, ``"roc_auc"``.
        """
        with torch.no_grad():
            outs = [model(x[i : i + batch_rows]) for i in range(0, len(x), batch_rows)]
            out = torch.cat(outs) if outs else torch.empty(0)
            mask = torch.ones(len(x), dtype=out.dtype, device=out.device)
            loss = float(self.loss(out, y, mask))
        out_np = out.detach().cpu().numpy()
        y_np = y.detach().cpu().numpy()
        result = {"loss": loss}
        if self.task == "survival":
            result["metric"] = concordance_index(y_np[:, 1], out_np, y_np[:, 0])
        else:
            result["metric"] = accuracy(out_np, y_np)
            if self.task == "binary":
                score = out_np if out_np.ndim == 1 else out_np[:, 1] - out_np[:, 0]
                result["roc_auc"] = roc_auc(score, y_np)
        return result


def task_for(dataset: str, task: str, num_features: int, num_classes: int) -> TaskSpec:
    """Return the :class:`TaskSpec` of a ULDP-FL dataset.

    Parameters
    ----------
    dataset : str
        ``"heart_disease"``, ``"tcga_brca"``, ``"mnist"``, ``"creditcard"`` or
        ``"creditcard-synthetic"``.
    task : str
        The dataset's task (checked against the dataset).
    num_features : int
        Scalar inputs per record.
    num_classes : int
        Number of classes (0 for survival).

    Returns
    -------
    TaskSpec
        Model, loss and metric of the paper for that dataset.

    Raises
    ------
    ParameterError
        If the dataset is unknown or its task does not match.
    """
    table: dict[str, tuple[str, str, MaskedLoss, str]] = {
        "heart_disease": ("binary", "logistic", binary_logistic_loss, "accuracy"),
        "tcga_brca": ("survival", "cox-linear", cox_loss, "c_index"),
        "mnist": ("multiclass", "paper-mnist-cnn", cross_entropy_loss, "accuracy"),
        "creditcard": ("binary", "fraudnet", cross_entropy_loss, "accuracy"),
        "creditcard-synthetic": ("binary", "fraudnet", cross_entropy_loss, "accuracy"),
    }
    if dataset not in table:
        raise ParameterError("dataset", f"must be one of {', '.join(table)}; got {dataset!r}")
    expected, model_name, loss, metric_name = table[dataset]
    if task != expected:
        raise ParameterError("task", f"{dataset!r} is a {expected!r} task, got {task!r}")
    if dataset == "mnist" and num_classes != 10:
        raise ParameterError("num_classes", f"MNIST has 10 classes, got {num_classes}")
    tabular = None if dataset == "mnist" else num_features
    return TaskSpec(dataset, task, model_name, tabular, loss, metric_name)
