"""Secure aggregation driven by the multi-round participant selection.

The selection decides who is asked; users may still drop out during the protocol. Multi-round
privacy needs every aggregate to be a union of whole batches: a partial batch would reveal a sum
of fewer than ``T`` users. The batch policies here decide what the server aggregates after the
masked inputs arrived; users left out are handled exactly like dropouts (their self masks are
never revealed), and the participation ledger records exactly the aggregated set.
"""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from enum import StrEnum

import numpy as np

from fedprivacy._validation import require_int
from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import ParameterError
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.selectors import Selector
from fedprivacy.secagg.driver import Stage, run_round
from fedprivacy.secagg.errors import RoundAbortedError
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.server import AggregationPolicy


class BatchPolicy(StrEnum):
    """What the server aggregates when some selected users did not submit their input."""

    ATOMIC = "atomic"  # only batches whose every member submitted
    ROUND = "round"  # the whole selection or nothing
    PARTIAL = "partial"  # whoever submitted (breaks the multi-round guarantee under dropouts)


def aggregation_policy(
    selected: Sequence[int], batch_size: int, policy: BatchPolicy | str
) -> AggregationPolicy | None:
    """The server-side aggregation policy of a round.

    Parameters
    ----------
    selected : sequence of int
        The users asked in this round.
    batch_size : int
        ``T``: batch ``b`` holds users ``b*T .. b*T+T-1`` (the layout of
        :class:`~fedprivacy.participation.selectors.BatchPartitionSelector`). Use 1 when the
        selection has no batches.
    policy : BatchPolicy or str
        ``atomic``, ``round`` or ``partial``.

    Returns
    -------
    callable or None
        Maps the users whose inputs arrived to the set to aggregate (``None`` for partial, which
        aggregates all of them).

    """
    size = require_int("batch_size", batch_size, minimum=1)
    try:
        mode = BatchPolicy(policy)
    except ValueError:
        raise ParameterError(
            "batch_policy", f"must be one of {', '.join(p.value for p in BatchPolicy)}"
        ) from None
    asked = frozenset(int(u) for u in selected)
    if mode is BatchPolicy.PARTIAL:
        return None
    if mode is BatchPolicy.ROUND:
        return lambda submitted: asked if asked <= submitted else frozenset()
    batches: dict[int, set[int]] = {}
    for u in asked:
        batches.setdefault(u // size, set()).add(u)

    def atomic(submitted: frozenset[int]) -> frozenset[int]:
        whole = [members for members in batches.values() if members <= submitted]
        return frozenset().union(*whole) if whole else frozenset()

    return atomic


def sample_dropouts(
    selected: Sequence[int], rate: float, rng: np.random.Generator
) -> dict[int, Stage]:
    """Each selected user drops with probability ``rate``, before a uniformly random stage."""
    if not 0.0 <= rate < 1.0:
        raise ParameterError("protocol_dropout", f"must lie in [0, 1), got {rate}")
    drops = rng.random(len(selected)) < rate
    stages = rng.integers(0, len(Stage), size=len(selected))
    return {int(u): Stage(int(s)) for u, d, s in zip(selected, drops, stages, strict=True) if d}


@dataclass(frozen=True)
class SecureRoundRecord:
    """One round of a secure selection run."""

    round_index: int
    selected: int
    aggregated: int
    aborted: str | None
    max_abs_error: float
    client_seconds: float  # mean over the clients that took part
    server_seconds: float


@dataclass
class SecureSelectionReport:
    """Per-round records of a run with the real protocol."""

    records: list[SecureRoundRecord] = field(default_factory=list)

    def to_csv(self) -> str:
        """One line per round: sizes, abort reason, error and seconds."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow([f.name for f in fields(SecureRoundRecord)])
        for r in self.records:
            writer.writerow(
                [
                    r.round_index,
                    r.selected,
                    r.aggregated,
                    r.aborted or "",
                    f"{r.max_abs_error:.3g}",
                    f"{r.client_seconds:.6f}",
                    f"{r.server_seconds:.6f}",
                ]
            )
        return buf.getvalue()

    def summary(self) -> dict[str, object]:
        """The ``secagg`` object of ``fedprivacy simulate --secagg --json``."""
        done = [r for r in self.records if r.aborted is None and r.aggregated > 0]
        return {
            "rounds_aggregated": len(done),
            "rounds_aborted": sum(r.aborted is not None for r in self.records),
            "max_abs_error": max((r.max_abs_error for r in done), default=0.0),
            "client_seconds": [round(r.client_seconds, 6) for r in self.records],
            "server_seconds": [round(r.server_seconds, 6) for r in self.records],
            "mean_client_seconds": float(np.mean([r.client_seconds for r in done]))
            if done
            else 0.0,
            "mean_server_seconds": float(np.mean([r.server_seconds for r in done]))
            if done
            else 0.0,
        }


@dataclass(frozen=True)
class SecureSelectionConfig:
    """How the protocol runs inside a selection simulation.

    Parameters
    ----------
    dimension : int
        Length of the synthetic update vectors (uniform in ``[-clip, clip]``).
    protocol_dropout : float
        Probability that a selected user drops during the protocol (stage uniform).
    batch_policy : str
        ``atomic``, ``round`` or ``partial``.
    batch_size : int
        ``T`` for batch partitioning, 1 otherwise.
    bits : int
        Modulus ``2**bits`` of the fixed-point encoding.
    clip : float
        Bound on the entries of the updates.
    degree : int or None
        SecAgg+ neighbour count, or ``None`` for the complete graph.

    """

    dimension: int = 1000
    protocol_dropout: float = 0.0
    batch_policy: str = "atomic"
    batch_size: int = 1
    bits: int = 32
    clip: float = 1.0
    degree: int | None = None

    def validate(self) -> None:
        """Raise :class:`ParameterError` for the first invalid field."""
        require_int("dimension", self.dimension, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        require_int("bits", self.bits, minimum=8, maximum=64)
        if not 0.0 <= self.protocol_dropout < 1.0:
            raise ParameterError("protocol_dropout", "must lie in [0, 1)")
        aggregation_policy([], self.batch_size, self.batch_policy)


def run_secure_selection(
    selector: Selector,
    availability: AvailabilityModel,
    rounds: int,
    rng: np.random.Generator,
    config: SecureSelectionConfig,
    *,
    ledger: ParticipationLedger | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[ParticipationLedger, SecureSelectionReport]:
    """Selection with the real protocol every round; the ledger records what was aggregated.

    Parameters
    ----------
    selector, availability, rounds, rng, ledger, progress
        As in :func:`fedprivacy.participation.simulation.run_selection`.
    config : SecureSelectionConfig
        Protocol settings.

    Returns
    -------
    tuple of ParticipationLedger and SecureSelectionReport
        The ledger (one row per round: the aggregated set, empty when skipped or aborted) and
        the per-round protocol records.

    """
    config.validate()
    count = require_int("rounds", rounds, minimum=0)
    n = selector.num_users
    if ledger is None:
        ledger = ParticipationLedger(n)
    codec = FixedPointCodec.for_sum(config.clip, selector.per_round, config.bits)
    session = os.urandom(16)
    report = SecureSelectionReport()
    frequency = ledger.frequency_view
    for r in range(ledger.rounds, ledger.rounds + count):
        selected = [int(u) for u in selector.select(availability.sample(r, rng), frequency, rng)]
        record = _secure_round(r, selected, session, codec, config, rng)
        report.records.append(record[0])
        ledger.record(np.asarray(record[1], dtype=np.intp))
        if progress is not None:
            progress(1)
    return ledger, report


def _secure_round(
    r: int,
    selected: list[int],
    session: bytes,
    codec: FixedPointCodec,
    config: SecureSelectionConfig,
    rng: np.random.Generator,
) -> tuple[SecureRoundRecord, list[int]]:
    if len(selected) < 2:  # nothing to aggregate securely: the round is skipped
        return SecureRoundRecord(r, len(selected), 0, "fewer than 2 users selected", 0, 0, 0), []
    updates = {u: rng.uniform(-config.clip, config.clip, config.dimension) for u in selected}
    degree = config.degree if config.degree is None else min(config.degree, len(selected) - 1)
    params = SecAggParameters.create(
        session, r, selected, config.dimension, codec, degree=degree, graph_seed=session
    )
    dropouts = sample_dropouts(selected, config.protocol_dropout, rng)
    policy = aggregation_policy(selected, config.batch_size, config.batch_policy)
    started = time.perf_counter()
    try:
        outcome = run_round(params, updates, dropouts=dropouts, policy=policy)
    except RoundAbortedError as exc:
        seconds = time.perf_counter() - started
        return SecureRoundRecord(r, len(selected), 0, str(exc), 0.0, 0.0, seconds), []
    result = outcome.result
    plain = np.sum([updates[u] for u in result.aggregated], axis=0)
    error = float(np.max(np.abs(result.sum - plain)))
    took_part = [s for u, s in outcome.client_seconds.items() if u not in dropouts]
    client = float(np.mean(took_part)) if took_part else 0.0
    record = SecureRoundRecord(
        r, len(selected), len(result.aggregated), None, error, client, outcome.server_seconds
    )
    return record, list(result.aggregated)
