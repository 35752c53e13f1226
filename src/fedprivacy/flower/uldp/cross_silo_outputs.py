"""The run directory of a cross-silo run: the in-process run's outputs plus the deployment's.

:func:`write_outputs` writes what :func:`fedprivacy.flower.uldp.cross_silo.run_cross_silo` leaves
behind, from a :class:`CrossSiloOutcome`. The run is a ULDP-FL run like an in-process one, so its
record, summary and report are :class:`~fedprivacy.uldp.results.UldpResult`'s
(:func:`fedprivacy.uldp.results.write_outputs`: ``rounds.csv``, ``summary.json``, ``uldp.png``,
``privacy.md``); the deployment adds ``participation.csv``, ``aggregates.npz`` and its own keys
to the summary (rounds aggregated and aborted, refusals, dropouts, bytes). Also when Protocol 1's
setup failed (the silos refused the server's proposal, or one did not answer): no round ran,
nobody is charged, and ``summary.json`` and ``privacy.md`` say why (``setup_failed``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedprivacy.flower.messaging.transport import Transport
from fedprivacy.flower.uldp.silo_rounds import Aggregates
from fedprivacy.participation.incremental import exposed_counts
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.uldp.algorithm import server_view
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import silo_noise_std
from fedprivacy.uldp.results import UldpResult
from fedprivacy.uldp.results import write_outputs as write_run_outputs
from fedprivacy.uldp.run import NOISE_OS, privacy_caveats

__all__ = ["CrossSiloOutcome", "write_outputs"]


@dataclass
class CrossSiloOutcome:
    """What a cross-silo run produced (the inputs of :func:`write_outputs`).

    Attributes
    ----------
    ledger : ParticipationLedger
        Who was aggregated in each round.
    records : list of RoundRecord
        One per round run (none if the setup failed).
    aggregates : dict
        Per aggregated round: the decoded aggregate, the minibatch seed and the user sample.
    noise_multiplier : float or None
        The effective noise multiplier of the silos' summed noise (None: the mechanism has
        none, nothing is accounted).
    events : list of dict
        The event log.
    final_params : torch.Tensor
        The last global model.
    setup_seconds : dict of str to float
        Seconds per setup exchange.
    setup_failed : str
        Why Protocol 1's setup failed (empty if it completed).
    """

    ledger: ParticipationLedger
    records: list[RoundRecord]
    aggregates: Aggregates
    noise_multiplier: float | None
    events: list[dict[str, Any]]
    final_params: torch.Tensor
    setup_seconds: dict[str, float] = field(default_factory=dict)
    setup_failed: str = ""


@dataclass(frozen=True)
class TaskInfo:
    """What the server knows of the task: its metric, the data's source, ``x_0``'s metrics."""

    metric_name: str
    data_source: str
    task: str
    initial: dict[str, float]


def _result(
    cfg: UldpConfig, outcome: CrossSiloOutcome, info: TaskInfo, seconds: float
) -> UldpResult:
    """The run as an in-process run reports it (no allocation: the server never sees one)."""
    caveats = privacy_caveats(cfg.method, info.task)
    if outcome.setup_failed:
        caveats += (
            f"No round ran: Protocol 1's setup failed ({outcome.setup_failed}); nothing was "
            "released and nobody is charged.",
        )
    return UldpResult(
        config=cfg,
        metric_name=info.metric_name,
        data_source=info.data_source,
        records=outcome.records,
        initial=info.initial,
        allocation={},
        group_size=None,
        seconds=seconds,
        final_params=outcome.final_params,
        secure_weighting={
            "key_bits": cfg.secure_key_bits,
            "noise_multiplier_nominal": cfg.noise_multiplier,
            "noise_multiplier_effective": outcome.noise_multiplier,
            "rounds": len(outcome.aggregates),
            "setup_seconds": {k: round(float(v), 4) for k, v in outcome.setup_seconds.items()},
        },
        caveats=caveats,
        noise_source=NOISE_OS,
        server_view=server_view(outcome.ledger),
        exposed_after_round=exposed_counts(outcome.ledger),
    )


def write_outputs(
    cfg: UldpConfig,
    run_dir: Path,
    outcome: CrossSiloOutcome,
    info: TaskInfo,
    transport: Transport,
    started: float,
) -> dict[str, Any]:
    """Write the run's outputs and the deployment's; return the summary.

    ``started`` is the run's start (:func:`time.perf_counter`).
    """
    result = _result(cfg, outcome, info, time.perf_counter() - started)
    outcome.ledger.to_csv(run_dir / "participation.csv")
    arrays: dict[str, Any] = {}
    for t, (aggregate, keys, sampled) in outcome.aggregates.items():
        arrays.update(
            {f"round_{t}": aggregate, f"keys_{t}": np.array(keys), f"sampled_{t}": sampled}
        )
    np.savez(run_dir / "aggregates.npz", **arrays)
    events, records = outcome.events, outcome.records
    deployment = dict(
        task="uldp",
        rounds=len(records),
        rounds_aggregated=len(outcome.aggregates),
        rounds_aborted=sum(1 for e in events if e.get("event") == "round" and e.get("aborted")),
        setup_failed=outcome.setup_failed or None,
        supernodes=cfg.num_silos,
        setup_seconds=outcome.setup_seconds,
        seconds_per_round=float(np.mean([r.seconds for r in records])) if records else 0.0,
        bytes_sent=transport.sent_bytes,
        bytes_received=transport.received_bytes,
        participation=str(run_dir / "participation.csv"),
        rejected=[e for e in events if e.get("event") in ("rejected", "node_refused")],
        aggregates_rejected=[e for e in events if e.get("event") == "aggregate_rejected"],
        dropouts=[e for e in events if e.get("event") == "no_reply"],
        noise_std_per_silo=silo_noise_std(cfg),
    )
    write_run_outputs(result, run_dir, deployment)
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return summary
