"""What :class:`~fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg` returns and writes.

A :class:`PrivateFedAvgResult` holds the final arrays (the app's own layout), one
:class:`~fedprivacy.pipeline.record.RoundRecord` per round, the ledger of what the server
unmasked, the events, and gives the per-user privacy report
(:func:`fedprivacy.report.privacy_report`, the same report as every other run's).
:meth:`PrivateFedAvgResult.write` writes a run directory: ``privacy.md``, ``summary.json``,
``participation.csv`` and ``events.jsonl``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord

from fedprivacy.errors import FedPrivacyError
from fedprivacy.files import atomic_write_json, atomic_write_text
from fedprivacy.fl.noise_check import swamped
from fedprivacy.flower.dropin.arrays import ArrayLayout
from fedprivacy.flower.dropin.private_config import PrivateFedAvgConfig
from fedprivacy.participation.incremental import AuditView
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.metrics import exposed_users, t_strong
from fedprivacy.participation.privacy import t_weak
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.report import LedgerEpsilons, PrivacyReport, privacy_report
from fedprivacy.report_inputs import Hidden
from fedprivacy.report_sentences import aggregation_of

__all__ = ["PrivateFedAvgResult", "RosterError"]


class RosterError(FedPrivacyError):
    """Fewer nodes than the run's users answered, or a node claims a user the run does not have."""

    @classmethod
    def check(
        cls, roster: dict[int, int], users: int, waited: float, refused: list[dict[str, Any]]
    ) -> None:
        """Refuse a roster that is not every user ``0 .. users - 1`` (before any round).

        Examples
        --------
        >>> RosterError.check({0: 11, 1: 12}, 3, 60.0, [])
        Traceback (most recent call last):
        ...
        fedprivacy.flower.dropin.private_result.RosterError: 2 of 3 nodes answered within 60 s \
(missing users: 2); a run on part of its federation would skip rounds silently
        """
        outside = sorted(u for u in roster if not 0 <= u < users)
        if outside:
            raise cls(
                f"nodes claim users {outside} outside 0 .. {users - 1}: each SuperNode's "
                "partition-id must name one of the run's users"
            )
        missing = sorted(set(range(users)) - set(roster))
        if missing:
            shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
            why = f"; {len(refused)} refused at identity check" if refused else ""
            raise cls(
                f"{len(roster)} of {users} nodes answered within {waited:g} s (missing users: "
                f"{shown}){why}; a run on part of its federation would skip rounds silently"
            )


@dataclass
class PrivateFedAvgResult:
    """The run's result (see the module docstring); :attr:`arrays` is the final model."""

    config: PrivateFedAvgConfig
    arrays: ArrayRecord
    rounds: list[RoundRecord]
    ledger: ParticipationLedger
    events: list[dict[str, Any]] = field(default_factory=list)
    roster: dict[int, int] = field(default_factory=dict)
    evaluate_metrics_serverapp: dict[int, dict[str, Any]] = field(default_factory=dict)
    """The app's ``evaluate_fn`` after each round (rounds from 1), as in Flower's ``Result``."""
    authenticated: bool = True
    """Whether the nodes' keys were signed (the server held the federation's roster): without,
    the report says that a server lying about the keys could have read any single input."""
    hidden: Hidden | None = None
    """What the selection hides from whoever sees only the models (the final report's second
    epsilon; the live reports after each round give the server's only)."""
    epsilon_hat: dict[str, float] | None = None
    """The canaries' empirical epsilon of the final model with its interval (``canaries``:
    :class:`~fedprivacy.dp.canaries.CanaryEstimate`), None without canaries."""

    def report(
        self, time_limit: float | None = None, *, view: AuditView | None = None
    ) -> PrivacyReport:
        """The per-user privacy report of the rounds so far.

        ``T_weak`` from a search within ``time_limit`` (certified over the rationals), or from
        ``view``, the round loop's live audit (certified bounds, no search).
        """
        matrix = self.ledger.matrix()
        p = matrix[:, : self.config.users]  # the canaries' updates are their inserter's
        limit = self.config.metrics_time_limit if time_limit is None else time_limit
        server_view: dict[str, Any] | None = None if view is None else view.server_view()
        if server_view is None and self.ledger.rounds:
            server_view = {
                "t_weak": t_weak(p, time_limit=limit),
                "t_strong": t_strong(p),
                "exposed_users": len(exposed_users(p)),
            }
        column = np.array([[r.noise_multiplier, r.wrap_log_probability] for r in self.rounds])
        column = column.reshape(-1, 2)
        mechanism = self.config.mechanism()
        hidden = self.hidden if view is None else None
        dp = mechanism.noise_multiplier is not None and hidden is not None
        size, k = ArrayLayout.of(self.arrays).size, self.config.per_round
        noise = swamped(mechanism, dimension=size, per_round=k)
        return privacy_report(
            mechanism,
            self.config.target_delta,
            LedgerEpsilons(
                matrix.astype(bool),
                round_noise=column[:, 0],
                wrap_log_probability=column[:, 1],
                sampling_rate=None if hidden is None else hidden.sampling_rate,
                batches=None if hidden is None else hidden.batches,
                users=self.config.users,
            ),
            aggregation=aggregation_of(self.config.secagg, self.authenticated),
            server_view=server_view,
            caveats=(hidden.caveat, *noise) if dp and hidden is not None else (),
        )

    def live_privacy(self, view: AuditView) -> dict[str, Any]:
        """The ``privacy`` event after a round: the live audit's view and the largest epsilon."""
        report = self.report(view=view)
        return {
            "t_weak": report.t_weak,
            "t_strong": report.t_strong,
            "exposed_users": report.exposed_users,
            "epsilon": report.epsilon,
            "delta": report.delta,
        }

    def to_dict(self, report: PrivacyReport | None = None) -> dict[str, Any]:
        """``summary.json``: the configuration, the rounds, the roster and the report.

        ``report``: :meth:`report`, when the caller has it already (``T_weak`` is a search).
        """
        return {
            "config": self.config.to_dict(),
            "rounds": [r.fields() for r in self.rounds],
            "roster": {str(u): n for u, n in sorted(self.roster.items())},
            "evaluate_metrics_serverapp": {
                str(r): m for r, m in sorted(self.evaluate_metrics_serverapp.items())
            },
            "privacy": (report or self.report()).to_dict(),
            "epsilon_hat": self.epsilon_hat,
        }

    def write(self, out: Path) -> list[Path]:
        """Write the run directory ``out``; return the files written."""
        out.mkdir(parents=True, exist_ok=True)
        report = self.report()
        summary = self.to_dict(report)
        files = {
            "summary.json": summary,
            "privacy.md": report.to_markdown(),
            "events.jsonl": "".join(json.dumps(e, default=str) + "\n" for e in self.events),
        }
        for name, content in files.items():
            if isinstance(content, str):
                atomic_write_text(out / name, content)
            else:
                atomic_write_json(out / name, content)
        self.ledger.to_csv(out / "participation.csv")  # every run's format: users u0, u1, ...
        return [out / name for name in (*files, "participation.csv")]
