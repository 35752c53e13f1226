"""The result of a ULDP-FL run and its outputs: per-round records, summary, CSV, JSON, plot.

:class:`UldpResult` is what :func:`fedprivacy.uldp.run.run_uldp` returns: one
:class:`~fedprivacy.pipeline.record.RoundRecord` per round (:func:`round_dict` its JSON) and the
run's settings; :meth:`UldpResult.summary` is its JSON
summary (with the ``privacy`` object of :func:`fedprivacy.report.privacy_report`),
:meth:`UldpResult.to_csv` the per-round table and :func:`write_outputs` writes both and a plot.
Every epsilon is named with its adversary (:data:`EPSILON_ADVERSARIES`).

Examples
--------
>>> r = RoundRecord(0, (0, 1), (0, 1), 0.1, metrics={"metric": 0.75, "epsilon": math.inf})
>>> d = round_dict(r)
>>> d["round"], d["metric"], d["epsilon"]
(1, 0.75, None)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.pipeline.record import Column, RoundRecord, records_csv
from fedprivacy.report import (
    ULDP_EPSILON,
    LedgerEpsilons,
    Method,
    PrivacyReport,
    privacy_report,
)
from fedprivacy.run_directory import write_run_directory
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.run_setup import uldp_hidden

__all__ = ["EPSILON_ADVERSARIES", "UldpResult", "round_dict", "write_outputs"]


def round_dict(record: RoundRecord) -> dict[str, Any]:
    """A round's JSON-ready dict (non-finite numbers become ``None``; rounds from 1).

    ``epsilon`` means what it means in every output: the largest per-user epsilon, against
    the server where there is a guarantee against it (``epsilon_server``), else against the
    released models; the released models' own is ``epsilon_released``.
    """
    released, server = record.get("epsilon"), record.get("epsilon_server")
    return {
        "round": record.round_index + 1,
        "metric": _finite(record.get("metric")),
        "loss": _finite(record.get("loss")),
        "epsilon": _finite(server if math.isfinite(server) else released),
        "epsilon_released": _finite(released),
        "seconds": record.seconds,
        "roc_auc": _finite(record.get("roc_auc")),
        "clipped_fraction": _finite(record.get("clipped_fraction")),
        "epsilon_server": _finite(server),
    }


#: Who each reported epsilon protects against (every output names them).
EPSILON_ADVERSARIES = {
    "epsilon_released": "anyone who sees only the released models (every round's aggregate), "
    "not who was selected: amplified by what the selection hides from them (a Poisson sample, "
    "Multi-RoundSecAgg's batches, K of |U| uniformly; privacy.caveats says which), else the "
    "server's",
    "epsilon_server": "the aggregation server, which chooses and knows the user sample: no "
    "amplification by sub-sampling (the most-sampled user's rounds, unsampled Gaussian); "
    "like the paper, it assumes the server sees only the sum over silos of each round",
}


def _finite(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class UldpResult:
    """A finished run.

    Attributes
    ----------
    config : UldpConfig
        The resolved configuration (every hyper-parameter filled in).
    metric_name : str
        ``"accuracy"`` or ``"c_index"``.
    data_source : str
        The dataset's provenance (``synthetic stand-in`` for generated data).
    records : list of RoundRecord
        One per round.
    initial : dict
        Test ``metric`` and ``loss`` of the initial model.
    allocation : dict
        :meth:`~fedprivacy.data.allocation.Allocation.summary`.
    group_size : int or None
        ``k`` of ULDP-GROUP-k.
    seconds : float
        Total wall time.
    final_params : torch.Tensor
        The final global model (flat).
    secure_weighting : dict or None
        Protocol 1 report of a ``--secure-weighting`` run.
    epsilon_at : tuple of (int, float, float) or None
        ``(R, epsilon after R rounds, epsilon against the server after R rounds)`` when
        ``run_uldp(..., epsilon_at=R)`` asked for it (the server's in the worst case: every
        round).
    caveats : tuple of str
        Known limits of the reported guarantee for this configuration (see
        :func:`fedprivacy.uldp.run.privacy_caveats`); empty when there are none.
    server_view : dict or None
        What the ledger of user samples reveals to the server
        (:func:`fedprivacy.uldp.algorithm.server_view`).
    exposed_after_round : numpy.ndarray or None
        Users the server could isolate after each round, under the same view
        (:func:`~fedprivacy.participation.incremental.exposed_counts` of the ledger); the
        ``exposed_users`` column of ``rounds.csv``.
    noise_source : str
        Where the noise comes from (:func:`fedprivacy.uldp.run.noise_source`): seeded noise
        is reproducible by whoever holds the seed, the protocol's silos draw theirs from OS
        randomness.
    epsilon_hat : dict or None
        The canaries' empirical epsilon of the final model with its interval
        (:meth:`~fedprivacy.dp.canaries.CanaryEstimate.fields`); None without canaries.
    """

    config: UldpConfig
    metric_name: str
    data_source: str
    records: list[RoundRecord]
    initial: dict[str, float]
    allocation: dict[str, Any]
    group_size: int | None
    seconds: float
    final_params: torch.Tensor = field(repr=False)
    secure_weighting: dict[str, Any] | None = None
    caveats: tuple[str, ...] = ()
    epsilon_at: tuple[int, float, float] | None = None
    noise_source: str = ""
    server_view: dict[str, Any] | None = None
    exposed_after_round: NDArray[np.int64] | None = None
    epsilon_hat: dict[str, float] | None = None

    @property
    def participation(self) -> NDArray[np.bool_]:
        """The ledger's matrix (rounds, users and canaries): whom each round aggregated."""
        c = self.config
        matrix = np.zeros((len(self.records), c.users + c.canaries), dtype=np.bool_)
        for t, record in enumerate(self.records):
            matrix[t, list(record.aggregated)] = True
        return matrix

    @property
    def final(self) -> RoundRecord:
        """The last round's record (before any round: the initial model, nothing spent)."""
        if self.records:
            return self.records[-1]
        initial = {k: v for k, v in self.initial.items() if k in ("metric", "loss")}
        return RoundRecord(-1, (), (), 0.0, metrics=dict(initial, epsilon=0.0, epsilon_server=0.0))

    def privacy_report(self) -> PrivacyReport:
        """The run's ``privacy`` object (:func:`fedprivacy.report.privacy_report`).

        Its epsilons are composed from the ledger of user samples like every run's, a hidden
        Poisson sample amplifying the released models' (:data:`EPSILON_ADVERSARIES`);
        ULDP-GROUP-k's are group privacy.
        """
        c = self.config
        private = c.method != "DEFAULT" and math.isfinite(self.final.get("epsilon"))
        hidden = uldp_hidden(c)
        noise = np.array([r.noise_multiplier for r in self.records], dtype=np.float64)
        ledger = LedgerEpsilons(
            self.participation,
            noise,
            sampling_rate=hidden.sampling_rate,
            group_epsilon=self.final.get("epsilon") if self.group_size is not None else None,
            batches=hidden.batches,
            users=c.users,
        )
        mechanism = c.mechanism()  # None: the method's own, whose silos add the noise
        parties = mechanism is None or mechanism.adds_noise_in_aggregation
        return privacy_report(
            Method(
                c.method,
                c.noise_multiplier if private else None,
                c.clip,
                adds_noise_in_aggregation=parties,
            ),
            c.delta,
            ledger,
            aggregation="silo-sum",
            server_view=self.server_view,
            caveats=((ULDP_EPSILON, hidden.caveat) if private else ())
            + self.caveats
            + ((f"Noise: {self.noise_source}.",) if self.noise_source else ()),
        )

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: ``metric``, ``metric_name``, ``epsilon``, ``method``, ... ."""
        c = self.config
        last = self.final
        privacy = self.privacy_report()
        return {
            "metric": _finite(last.get("metric")),
            "metric_name": self.metric_name,
            "epsilon": privacy.epsilon,
            "epsilon_released": privacy.epsilon_released,
            "epsilon_server": privacy.epsilon_server,
            "epsilon_adversaries": {"epsilon": privacy.epsilon_adversary, **EPSILON_ADVERSARIES},
            "delta": c.delta,
            "private": c.method != "DEFAULT",
            "method": c.method,
            "dataset": c.dataset,
            "data_source": self.data_source,
            "rounds": c.rounds,
            "users": c.users,
            "silos": c.num_silos,
            "distribution": c.distribution,
            "seed": c.seed,
            "noise_multiplier": c.noise_multiplier,
            "sampling_rate": c.sampling_rate,
            "scheme": c.scheme,
            "per_round": c.per_round,
            "target_privacy": c.target_privacy,
            "clip": c.clip,
            "local_epochs": c.local_epochs,
            "local_lr": c.local_lr,
            "global_lr": c.global_lr,
            "batch_size": c.batch_size,
            "secagg": c.secagg,
            "update_clip": c.update_clip,
            "group_size": self.group_size,
            "loss": _finite(last.get("loss")),
            "roc_auc": _finite(last.get("roc_auc")),
            "initial_metric": _finite(self.initial.get("metric")),
            "initial_loss": _finite(self.initial.get("loss")),
            "seconds": round(self.seconds, 3),
            "allocation": self.allocation,
            **(
                {} if self.secure_weighting is None else {"secure_weighting": self.secure_weighting}
            ),
            "noise_source": self.noise_source,
            "caveats": list(self.caveats),
            "privacy": privacy.to_dict(),
            "canaries": c.canaries,
            "epsilon_hat": self.epsilon_hat,
            **(
                {}
                if self.epsilon_at is None
                else {
                    "epsilon_at": {
                        "rounds": self.epsilon_at[0],
                        "epsilon": _finite(self.epsilon_at[1]),
                        "epsilon_server": _finite(self.epsilon_at[2]),
                    }
                }
            ),
        }

    def to_csv(self) -> str:
        """Per-round CSV: ``round, metric, loss, epsilon, ..., exposed_users``."""
        exposed = [] if self.exposed_after_round is None else self.exposed_after_round.tolist()
        rows = [round_dict(r) for r in self.records]
        columns: list[Column] = [(k, _cell_of(rows, k)) for k in _CSV_COLUMNS]
        columns.append(("exposed_users", lambda t, r: exposed[t] if t < len(exposed) else ""))
        return records_csv(self.records, columns)


def _cell_of(rows: list[dict[str, Any]], key: str) -> Callable[[int, RoundRecord], object]:
    return lambda t, _: rows[t][key]


#: The columns of ``rounds.csv`` before ``exposed_users`` (keys of :func:`round_dict`).
_CSV_COLUMNS = (
    "round",
    "metric",
    "loss",
    "epsilon",
    "epsilon_released",
    "epsilon_server",
    "seconds",
    "roc_auc",
    "clipped_fraction",
)


def write_outputs(
    result: UldpResult, out: str | Path, extra: Mapping[str, Any] | None = None
) -> list[Path]:
    """Write ``rounds.csv``, ``summary.json``, ``uldp.png`` and ``privacy.md``.

    ``uldp.png`` plots the metric and epsilon per round; ``privacy.md`` is the run's privacy
    report, as ``fedprivacy train`` writes it. ``extra`` adds (or replaces) summary keys: a
    deployment's own (:mod:`fedprivacy.flower.uldp.cross_silo_outputs`).

    Returns
    -------
    list of pathlib.Path
        The files written.
    """
    data = result.summary()
    data["records"] = [round_dict(r) for r in result.records]
    data.update(extra or {})
    files = {
        "rounds.csv": result.to_csv(),
        "summary.json": data,
        "privacy.md": result.privacy_report().to_markdown(),
    }
    return write_run_directory(out, files, lambda folder: [_plot(result, folder / "uldp.png")])


def _plot(result: UldpResult, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from fedprivacy.files import save_figure

    rounds = [0] + [r.round_index + 1 for r in result.records]
    metric = [result.initial.get("metric", math.nan)] + [r.get("metric") for r in result.records]
    eps = [0.0] + [r.get("epsilon") for r in result.records]
    c = result.config
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
    shown = [(x, y) for x, y in zip(rounds, metric, strict=True) if math.isfinite(y)]
    ax1.plot([x for x, _ in shown], [y for _, y in shown], marker="o", ms=3)
    ax1.set_xlabel("round")
    ax1.set_ylabel(f"test {result.metric_name.replace('_', '-')}")
    ax1.grid(alpha=0.3)
    if all(math.isfinite(e) for e in eps):
        ax2.plot(rounds, eps, marker="o", ms=3, color="tab:red", label="released models")
        server = [0.0] + [r.get("epsilon_server") for r in result.records]
        if all(math.isfinite(e) for e in server) and server != eps:
            ax2.plot(rounds, server, "--", color="tab:purple", label="against the server")
        ax2.legend(fontsize=7)
        ax2.set_ylabel(f"user-level epsilon (delta={c.delta:g})")
    else:
        ax2.text(0.5, 0.5, "not private (epsilon = inf)", ha="center", va="center")
        ax2.set_xticks([])
        ax2.set_yticks([])
    ax2.set_xlabel("round")
    ax2.grid(alpha=0.3)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    title = f"{c.method} on {c.dataset} ({c.users} users, {c.distribution})"
    largest = result.privacy_report().epsilon
    if largest is not None:
        title += (
            f"\nepsilon {largest:.3g} at delta {c.delta:g} (largest per user), noise "
            f"multiplier {c.noise_multiplier:g}"
        )
    if "synthetic" in result.data_source:
        title += " [synthetic stand-in data]"
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)
