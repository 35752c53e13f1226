"""What to train and how to score it, per ULDP-FL dataset (Section 5.1 of Kato et al.).

:func:`task_for` gives each dataset its model (a name of the model registry,
:mod:`fedprivacy.models.registry`), its training loss (:mod:`fedprivacy.fl.losses`) and its
metric (:mod:`fedprivacy.uldp.metrics`) as a :class:`TaskSpec`, which builds the model and scores
it on a test set:

=================  ===================  ============  =========================
dataset            model                parameters    loss / metric
=================  ===================  ============  =========================
heart_disease      ``logistic``         14            logistic / accuracy
tcga_brca          ``cox-linear``       40            Cox (Breslow) / C-index
mnist              ``paper-mnist-cnn``  21,840        cross-entropy / accuracy
creditcard         ``fraudnet``         4,022         cross-entropy / accuracy
=================  ===================  ============  =========================

Examples
--------
>>> spec = task_for("heart_disease", "binary", num_features=13, num_classes=2)
>>> spec.model_name, type(spec.build_model(seed=0)).__name__
('logistic', 'LogisticRegression')
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fedprivacy._registry import Registry
from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import MaskedLoss, binary_logistic_loss, cox_loss, cross_entropy_loss
from fedprivacy.models.registry import build_model
from fedprivacy.uldp.metrics import accuracy, concordance_index, roc_auc

__all__ = [
    "PAPER_TASKS",
    "TaskSpec",
    "task_for",
]


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
        Name for :func:`fedprivacy.models.registry.build_model`.
    num_features : int or None
        Input width of a tabular model (``None``: the model's default input shape).
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
        """Return a freshly initialised model (see :func:`fedprivacy.models.registry.build_model`).

        Parameters
        ----------
        seed : int
            Seed of the initialisation (non-negative).

        Returns
        -------
        torch.nn.Module
            The model, in float32 on the CPU.
        """
        shape = None if self.num_features is None else (self.num_features,)
        return build_model(self.model_name, shape, seed=seed)

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


#: dataset -> (task, model, loss, metric name) of the paper, as :func:`task_for` returns them.
PAPER_TASKS: Registry[tuple[str, str, MaskedLoss, str]] = Registry("dataset")
PAPER_TASKS.register("heart_disease", ("binary", "logistic", binary_logistic_loss, "accuracy"))
PAPER_TASKS.register("tcga_brca", ("survival", "cox-linear", cox_loss, "c_index"))
PAPER_TASKS.register("mnist", ("multiclass", "paper-mnist-cnn", cross_entropy_loss, "accuracy"))
PAPER_TASKS.register("creditcard", ("binary", "fraudnet", cross_entropy_loss, "accuracy"))
PAPER_TASKS.register("creditcard-synthetic", ("binary", "fraudnet", cross_entropy_loss, "accuracy"))


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
    expected, model_name, loss, metric_name = PAPER_TASKS.lookup(dataset)
    if task != expected:
        raise ParameterError("task", f"{dataset!r} is a {expected!r} task, got {task!r}")
    if dataset == "mnist" and num_classes != 10:
        raise ParameterError("num_classes", f"MNIST has 10 classes, got {num_classes}")
    tabular = None if dataset == "mnist" else num_features
    return TaskSpec(dataset, task, model_name, tabular, loss, metric_name)
