"""Masked, vmap-friendly training losses of the ULDP-FL models (Section 5.1 of Kato et al.).

Every loss has the :data:`MaskedLoss` signature ``loss(output, target, mask) -> scalar``: the
mean loss over the rows where ``mask`` is 1, so that a minibatch padded to a common width (as
the vectorised trainer :class:`fedprivacy.fl.local_training.VectorisedTrainer` pads every
group's batch) gives exactly the loss of its real rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.nn import functional as F

__all__ = [
    "MaskedLoss",
    "binary_logistic_loss",
    "cox_loss",
    "cross_entropy_loss",
]

MaskedLoss = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``loss(output, target, mask) -> scalar``: the mean loss over the rows where ``mask`` is 1."""


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
