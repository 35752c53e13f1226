"""``metrics.csv`` of a training run: one row per round."""

from __future__ import annotations

import math

import numpy as np

from fedprivacy.fl.engine import FederatedTraining
from fedprivacy.participation.curve import TWeakCurve
from fedprivacy.pipeline.record import Column, metric_column, records_csv

__all__ = ["metrics_csv"]


def metrics_csv(training: FederatedTraining, curve: TWeakCurve | None) -> str:
    """Per-round metrics: accuracy, loss, sizes, C^(t), F^(t), T_weak, exposure, seconds, noise.

    ``exposed_users``: users whose update the server could compute after the round (the
    round loop's live audit, :attr:`~fedprivacy.pipeline.loop.FederatedRun.exposed_after_round`).

    ``noise_multiplier`` is that of the round's released aggregate (empty without DP or when
    nothing was aggregated), written exactly (``repr``) so the accounting can be redone.
    """
    training.loop.catch_up()  # rounds a resume loaded and no step has audited yet
    exposed = training.loop.exposed_after_round
    users = training.users_ledger  # the canaries are no user's
    counts = np.zeros(users.num_users, dtype=np.int64)
    cardinality, gap, weak = [], [], []
    for t in range(len(training.records)):
        counts[users.selected(t)] += 1
        cardinality.append(f"{counts.sum() / (t + 1):.6g}")
        gap.append(f"{(counts.max() - counts.min()) / (t + 1):.6g}")
        if curve is None or math.isnan(curve.lower[t]):
            weak.append(("", ""))
        else:
            weak.append((str(int(curve.lower[t])), str(int(curve.upper[t]))))
    columns: list[Column] = [
        ("round", lambda t, r: t),
        metric_column("available", ".0f"),
        ("selected", lambda t, r: len(r.selected)),
        ("aggregated", lambda t, r: len(r.aggregated)),
        metric_column("lr", ".6g"),
        metric_column("test_accuracy", ".6f"),
        metric_column("test_loss", ".6f"),
        ("average_cardinality", lambda t, r: cardinality[t]),
        ("fairness_gap", lambda t, r: gap[t]),
        ("t_weak_lower", lambda t, r: weak[t][0]),
        ("t_weak_upper", lambda t, r: weak[t][1]),
        ("exposed_users", lambda t, r: exposed[t]),
        metric_column("clipped_entries", ".0f"),
        metric_column("train_seconds", ".4f"),
        metric_column("aggregate_seconds", ".4f"),
        ("aborted", lambda t, r: r.aborted),
        ("noise_multiplier", lambda t, r: "" if math.isnan(n := r.noise_multiplier) else repr(n)),
    ]
    return records_csv(training.records, columns)
