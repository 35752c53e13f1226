"""``metrics.csv`` of a training run: one row per round."""

from __future__ import annotations

import csv
import io
import math

import numpy as np

from fedprivacy.fl.engine import FederatedTraining
from fedprivacy.participation.curve import TWeakCurve

__all__ = ["metrics_csv"]


def metrics_csv(training: FederatedTraining, curve: TWeakCurve | None) -> str:
    """Per-round metrics: accuracy, loss, sizes, C^(t), F^(t), T_weak, exposure, seconds, noise.

    ``exposed_users``: users whose update the server could compute after the round (the
    round loop's live audit, :attr:`~fedprivacy.pipeline.loop.FederatedRun.exposed_after_round`).

    ``noise_multiplier`` is that of the round's released aggregate (empty without DP or when
    nothing was aggregated), written exactly (``repr``) so the accounting can be redone.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "round",
            "available",
            "selected",
            "aggregated",
            "lr",
            "test_accuracy",
            "test_loss",
            "average_cardinality",
            "fairness_gap",
            "t_weak_lower",
            "t_weak_upper",
            "exposed_users",
            "clipped_entries",
            "train_seconds",
            "aggregate_seconds",
            "aborted",
            "noise_multiplier",
        ]
    )
    counts = np.zeros(training.ledger.num_users, dtype=np.int64)
    training.loop.catch_up()  # rounds a resume loaded and no step has audited yet
    exposed = training.loop.exposed_after_round
    total = 0
    for t, r in enumerate(training.records):
        counts[training.ledger.selected(t)] += 1
        total += r.aggregated
        gap = (counts.max() - counts.min()) / (t + 1)
        lo = hi = ""
        if curve is not None and not math.isnan(curve.lower[t]):
            lo, hi = str(int(curve.lower[t])), str(int(curve.upper[t]))
        w.writerow(
            [
                t,
                r.available,
                r.selected,
                r.aggregated,
                f"{r.lr:.6g}",
                "" if math.isnan(r.test_accuracy) else f"{r.test_accuracy:.6f}",
                "" if math.isnan(r.test_loss) else f"{r.test_loss:.6f}",
                f"{total / (t + 1):.6g}",
                f"{gap:.6g}",
                lo,
                hi,
                exposed[t],
                r.clipped_entries,
                f"{r.train_seconds:.4f}",
                f"{r.aggregate_seconds:.4f}",
                r.aborted,
                "" if math.isnan(r.noise_multiplier) else repr(r.noise_multiplier),
            ]
        )
    return buf.getvalue()
