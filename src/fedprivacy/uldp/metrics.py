"""Test metrics of the ULDP-FL experiments (Section 5.1 of Kato et al.).

The paper reports accuracy for Heart Disease, MNIST and Creditcard (Figs. 4-6) and the
C-index for TCGA-BRCA (Fig. 7). The authors' *local* Creditcard evaluation computes
``roc_auc_score`` on hard 0/1 predictions; :func:`roc_auc` here is the proper ROC-AUC of the
fraud scores and is reported next to the accuracy as an extra metric.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike
from scipy.stats import rankdata

from fedprivacy.errors import ParameterError

__all__ = [
    "accuracy",
    "concordance_index",
    "roc_auc",
]


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
