"""The run directory of a cross-silo run: ledger, aggregates, privacy report and summary.

:func:`write_outputs` writes what :func:`fedprivacy.flower.cross_silo.run_cross_silo` leaves
behind, from a :class:`CrossSiloOutcome`: also when Protocol 1's setup failed (the silos refused
the server's proposal, or one did not answer), so that every run ends with its report: no round
ran, nobody is charged, and ``summary.json`` says why (``setup_failed``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.flower.silo_rounds import Aggregates
from fedprivacy.flower.transport import Transport
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.uldp.algorithm import ledger_view
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.deployment import silo_noise_std
from fedprivacy.uldp.results import RoundRecord

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
    noise_multiplier : float
        The effective noise multiplier of the silos' summed noise.
    events : list of dict
        The event log.
    setup_seconds : dict of str to float
        Seconds per setup exchange.
    setup_failed : str
        Why Protocol 1's setup failed (empty if it completed).
    """

    ledger: ParticipationLedger
    records: list[RoundRecord]
    aggregates: Aggregates
    noise_multiplier: float
    events: list[dict[str, Any]]
    setup_seconds: dict[str, float] = field(default_factory=dict)
    setup_failed: str = ""


def write_outputs(
    cfg: UldpConfig,
    run_dir: Path,
    outcome: CrossSiloOutcome,
    transport: Transport,
    started: float,
) -> dict[str, Any]:
    """Write ``participation.csv``, ``aggregates.npz``, ``privacy.md`` and ``summary.json``.

    ``started`` is the run's start (:func:`time.perf_counter`). Returns the summary.
    """
    outcome.ledger.to_csv(run_dir / "participation.csv")
    arrays: dict[str, Any] = {}
    for t, (aggregate, keys, sampled) in outcome.aggregates.items():
        arrays.update(
            {f"round_{t}": aggregate, f"keys_{t}": np.array(keys), f"sampled_{t}": sampled}
        )
    np.savez(run_dir / "aggregates.npz", **arrays)
    view = ledger_view(outcome.ledger, outcome.noise_multiplier, cfg.delta)
    events, records = outcome.events, outcome.records
    aborted = [e for e in events if e.get("event") == "round" and e.get("aborted")]
    summary: dict[str, Any] = {
        "task": "uldp",
        "method": cfg.method,
        "dataset": cfg.dataset,
        "rounds": len(records),
        "rounds_aggregated": len(outcome.aggregates),
        "rounds_aborted": len(aborted),
        "setup_failed": outcome.setup_failed or None,
        "supernodes": cfg.num_silos,
        "silos": cfg.num_silos,
        "users": cfg.users,
        "metric": records[-1].metric if records else None,
        "seconds": time.perf_counter() - started,
        "setup_seconds": outcome.setup_seconds,
        "seconds_per_round": float(np.mean([r.seconds for r in records])) if records else 0.0,
        "bytes_sent": transport.sent_bytes,
        "bytes_received": transport.received_bytes,
        "participation": str(run_dir / "participation.csv"),
        "rejected": [e for e in events if e.get("event") in ("rejected", "node_refused")],
        "aggregates_rejected": [e for e in events if e.get("event") == "aggregate_rejected"],
        "dropouts": [e for e in events if e.get("event") == "no_reply"],
        "noise_std_per_silo": silo_noise_std(cfg),
        "privacy": {
            "epsilon": records[-1].epsilon if records else 0.0,
            "epsilon_server": records[-1].epsilon_server if records else 0.0,
            "delta": cfg.delta,
            "noise_multiplier_nominal": cfg.sigma,
            "noise_multiplier_effective": outcome.noise_multiplier,
            "key_bits": cfg.secure_key_bits,
            "server_view": view,
        },
    }
    atomic_write_text(run_dir / "privacy.md", _privacy_markdown(cfg, summary))
    atomic_write_json(run_dir / "summary.json", summary)
    return summary


def _privacy_markdown(cfg: UldpConfig, summary: dict[str, Any]) -> str:
    p = summary["privacy"]
    view = p["server_view"]
    lines = [
        f"# Privacy report: {cfg.method} on {cfg.num_silos} silos ({cfg.dataset})",
        "",
    ]
    if summary["setup_failed"]:
        lines += [
            f"- no round ran: Protocol 1's setup failed ({summary['setup_failed']}); nothing "
            "was released and nobody is charged",
            "",
        ]
    lines += [
        f"- user-level epsilon {p['epsilon']:.4g} at delta {p['delta']:g} after "
        f"{summary['rounds_aggregated']} aggregated rounds; against the server "
        f"{p['epsilon_server']:.4g}",
        f"- noise: each silo draws a discrete Gaussian (std {summary['noise_std_per_silo']:.4g} "
        "per coordinate) from OS randomness on Protocol 1's integer grid; effective noise "
        f"multiplier {p['noise_multiplier_effective']:.6g} "
        f"(nominal {p['noise_multiplier_nominal']:g})",
        f"- the server sees only the weighted, noised sum over silos of each round "
        f"(Paillier {p['key_bits']}-bit, pairwise masks, blinded histograms): never a silo's "
        "update or the per-user record counts",
        f"- ledger: T_weak {view['t_weak']}, T_strong {view['t_strong']}, "
        f"per-user epsilon {view['per_user_epsilon']}",
        "",
    ]
    return "\n".join(lines)
