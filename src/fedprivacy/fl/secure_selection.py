"""Selection simulated with the real secure aggregation protocol every round.

The selection decides who is asked; users may still drop out during the protocol, and the batch
policy (:mod:`fedprivacy.secagg.multiround`) decides what the server aggregates. Every round runs
through :class:`~fedprivacy.fl.secure_aggregation.SecureAggregator` (unweighted, on synthetic
updates uniform in ``[-update_clip, update_clip]``), and the participation ledger records exactly
the aggregated set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.config import Config
from fedprivacy.config_sections import SecAggProtocolSection
from fedprivacy.errors import ParameterError
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import Selector
from fedprivacy.pipeline.record import Column, RoundRecord, metric_column, records_csv
from fedprivacy.pipeline.selection import run_selection
from fedprivacy.secagg.multiround import RoundObserver, parse_batch_policy
from fedprivacy.secagg.params import MIN_PARTICIPANTS

__all__ = [
    "SecureSelectionConfig",
    "SecureSelectionReport",
    "run_secure_selection",
]


@dataclass
class SecureSelectionReport:
    """Per-round records of a run with the real protocol."""

    records: list[RoundRecord] = field(default_factory=list)

    def to_csv(self) -> str:
        """One line per round: sizes, abort reason, error, seconds and connectivity."""
        return records_csv(self.records, _CSV_COLUMNS)

    def summary(self) -> dict[str, object]:
        """The ``secagg`` object of ``fedprivacy simulate --secagg --json``."""
        done = [r for r in self.records if not r.aborted and r.aggregated]
        connectivity = [_connectivity(r) for r in self.records]
        return {
            "rounds_aggregated": len(done),
            "rounds_aborted": sum(bool(r.aborted) for r in self.records),
            "rounds_shrunk_for_connectivity": connectivity.count("shrunk"),
            "rounds_aborted_for_connectivity": connectivity.count("aborted"),
            "max_abs_error": max((r.get("max_abs_error") for r in done), default=0.0),
            **{
                name: [round(r.get(name), 6) for r in self.records]
                for name in ("client_seconds", "server_seconds")
            },
            **{
                f"mean_{name}": float(np.mean([r.get(name) for r in done])) if done else 0.0
                for name in ("client_seconds", "server_seconds")
            },
        }


def _connectivity(record: RoundRecord) -> str:
    """``shrunk`` or ``aborted`` where the connectivity step removed users, else empty."""
    if record.get("connectivity_aborted") > 0:
        return "aborted"
    return "shrunk" if record.get("connectivity_removed") > 0 else ""


#: The columns of the protocol's ``secagg_rounds.csv``.
_CSV_COLUMNS: tuple[Column, ...] = (
    ("round_index", lambda t, r: r.round_index),
    ("selected", lambda t, r: len(r.selected)),
    ("aggregated", lambda t, r: len(r.aggregated)),
    ("aborted", lambda t, r: r.aborted),
    metric_column("max_abs_error", ".3g"),
    metric_column("client_seconds", ".6f"),
    metric_column("server_seconds", ".6f"),
    ("connectivity", lambda t, r: _connectivity(r)),
    metric_column("connectivity_removed", ".0f"),
)


@dataclass(frozen=True)
class SecureSelectionConfig(Config, SecAggProtocolSection):
    """How the protocol runs inside a selection simulation.

    The protocol's fields (``secagg_degree``, ``protocol_dropout``, ``batch_policy``, ``bits``,
    ``update_clip``) are documented in :class:`~fedprivacy.config_sections.SecAggProtocolSection`;
    here ``batch_policy`` is always named (default ``atomic``) and the synthetic updates are
    uniform in ``[-update_clip, update_clip]``.

    Attributes
    ----------
    dimension : int
        Length of the synthetic update vectors.
    users_per_batch : int
        Users in a batch the policy keeps whole: ``T`` for batch partitioning, the round's group
        for user partition, 1 otherwise.
    batch_ring : bool
        Use the batch-aware SecAgg+ graph when whole batches are aggregated (see
        :func:`ring_block`); false keeps the plain random ring (for comparisons).

    """

    batch_policy: str = "atomic"
    dimension: int = 1000
    users_per_batch: int = 1
    batch_ring: bool = True

    def validate(self) -> None:
        """Raise :class:`ParameterError` for the first invalid field."""
        require_int("dimension", self.dimension, minimum=1)
        require_int("users_per_batch", self.users_per_batch, minimum=1)
        require_int("bits", self.bits, minimum=8, maximum=64)
        if not 0.0 <= self.protocol_dropout < 1.0:
            raise ParameterError("protocol_dropout", "must lie in [0, 1)")
        parse_batch_policy(self.batch_policy)
        if self.secagg_degree is not None:
            self.check_secagg_degree(None)  # the selection's K: the caller's


def run_secure_selection(
    selector: Selector,
    availability: AvailabilityModel,
    rounds: int,
    rng: np.random.Generator,
    config: SecureSelectionConfig,
    *,
    ledger: ParticipationLedger | None = None,
    progress: Callable[[int], None] | None = None,
    observer: RoundObserver | None = None,
) -> tuple[ParticipationLedger, SecureSelectionReport]:
    """Selection with the real protocol every round; the ledger records what was aggregated.

    Parameters
    ----------
    selector, availability, rounds, rng, ledger, progress
        As in :func:`fedprivacy.pipeline.selection.run_selection`.
    config : SecureSelectionConfig
        Protocol settings.
    observer : callable, optional
        Called with the round index and the server after every round that ran the protocol
        (completed or aborted), for example to compute :meth:`SecAggServer.view`.

    Returns
    -------
    tuple of ParticipationLedger and SecureSelectionReport
        The ledger (one row per round: the aggregated set, empty when skipped or aborted) and
        the per-round protocol records.

    """
    config.validate()
    aggregator = SecureAggregator(
        config.update_clip,
        selector.per_round,
        config.bits,
        0,
        degree=config.secagg_degree,
        protocol_dropout=config.protocol_dropout,
        batch_policy=config.batch_policy,
        weighted=False,
        batch_ring=config.batch_ring,
        observer=observer,
    )
    report = SecureSelectionReport()

    def aggregate(r: int, selected: NDArray[np.intp]) -> NDArray[np.intp]:
        record, aggregated = _secure_round(r, [int(u) for u in selected], aggregator, config, rng)
        report.records.append(record)
        return np.asarray(aggregated, dtype=np.intp)

    ledger = run_selection(
        selector, availability, rounds, rng, ledger, progress, aggregate=aggregate
    )
    return ledger, report


def _secure_round(
    r: int,
    selected: list[int],
    aggregator: SecureAggregator,
    config: SecureSelectionConfig,
    rng: np.random.Generator,
) -> tuple[RoundRecord, tuple[int, ...]]:
    asked = tuple(selected)
    if len(selected) < MIN_PARTICIPANTS:  # nothing to aggregate securely: the round is skipped
        reason = f"fewer than {MIN_PARTICIPANTS} users selected"
        return RoundRecord(r, asked, (), 0.0, reason, metrics=dict.fromkeys(_ZERO, 0.0)), ()
    updates = {
        u: rng.uniform(-config.update_clip, config.update_clip, config.dimension) for u in selected
    }
    out = aggregator.aggregate(
        r, updates, dict.fromkeys(updates, 1.0), batch_size=config.users_per_batch, rng=rng
    )
    connectivity = {
        "connectivity_removed": float(out.connectivity_removed),
        "connectivity_aborted": float(out.connectivity == "aborted"),
    }
    if out.aborted is not None:
        metrics = {**dict.fromkeys(_ZERO, 0.0), "server_seconds": out.seconds, **connectivity}
        return RoundRecord(r, asked, (), out.seconds, out.aborted, metrics=metrics), ()
    error = 0.0
    if out.weighted_sum is not None:
        plain = np.sum([updates[u] for u in out.aggregated], axis=0)
        error = float(np.max(np.abs(out.weighted_sum - plain)))
    metrics = {
        "max_abs_error": error,
        "client_seconds": out.client_seconds,
        "server_seconds": out.server_seconds,
        **connectivity,
    }
    aggregated = tuple(int(u) for u in out.aggregated)
    return RoundRecord(r, asked, aggregated, out.server_seconds, metrics=metrics), out.aggregated


#: What a round that ran no protocol records as 0.
_ZERO = ("max_abs_error", "client_seconds", "server_seconds")
