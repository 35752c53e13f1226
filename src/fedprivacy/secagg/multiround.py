"""Secure aggregation driven by the multi-round participant selection.

The selection decides who is asked; users may still drop out during the protocol. Multi-round
privacy needs every aggregate to be a union of whole batches: a partial batch would reveal a sum
of fewer than ``T`` users. The batch policies here decide what the server aggregates after the
masked inputs arrived; users left out are handled exactly like dropouts (their self masks are
never revealed). The aggregated set is always connected in the neighbour graph (see
:func:`aggregation_policy`), so the sum over it is the only sum the server can unmask, and the
participation ledger records exactly that set.
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
from fedprivacy.secagg.errors import DisconnectedSetError, RoundAbortedError
from fedprivacy.secagg.params import MIN_PARTICIPANTS, MIN_THRESHOLD, SecAggParameters
from fedprivacy.secagg.server import AggregationPolicy, SecAggServer

RoundObserver = Callable[[int, SecAggServer], None]
"""Called with the round index and the server after each round that ran the protocol."""


class BatchPolicy(StrEnum):
    """What the server aggregates when some selected users did not submit their input."""

    ATOMIC = "atomic"  # only batches whose every member submitted
    ROUND = "round"  # the whole selection or nothing
    PARTIAL = "partial"  # whoever submitted (breaks the multi-round guarantee under dropouts)


def parse_batch_policy(policy: BatchPolicy | str) -> BatchPolicy:
    """The policy named ``policy``; :class:`ParameterError` naming ``batch_policy`` otherwise."""
    try:
        return BatchPolicy(policy)
    except ValueError:
        raise ParameterError(
            "batch_policy", f"must be one of {', '.join(p.value for p in BatchPolicy)}"
        ) from None


def _batches(selected: frozenset[int], size: int) -> list[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for u in selected:
        groups.setdefault(u // size, set()).add(u)
    return [frozenset(g) for g in groups.values()]


# The units each policy aggregates whole: a unit is in S only if every member of it is.
_UNITS: dict[BatchPolicy, Callable[[frozenset[int], int], list[frozenset[int]]]] = {
    BatchPolicy.ATOMIC: _batches,
    BatchPolicy.ROUND: lambda selected, size: [selected],
    BatchPolicy.PARTIAL: lambda selected, size: [frozenset({u}) for u in selected],
}

ShrinkHook = Callable[[frozenset[int], frozenset[int]], None]
"""Called with ``(before, after)`` when the connectivity step removed users from ``S``."""


def _whole_units(units: Sequence[frozenset[int]], users: frozenset[int]) -> frozenset[int]:
    return frozenset().union(*(unit for unit in units if unit <= users))


def aggregation_policy(
    params: SecAggParameters,
    batch_size: int,
    policy: BatchPolicy | str,
    *,
    on_shrink: ShrinkHook | None = None,
) -> AggregationPolicy:
    """The server-side aggregation policy of a round: whole units, connected in the graph.

    Each policy aggregates whole *units* only: ``atomic`` the batches, ``round`` the whole
    selection, ``partial`` single users. The server (and every client) refuses an aggregated set
    ``S`` whose neighbour graph ``G[S]`` is disconnected, since each component's sum would be
    revealed. So the policy starts from ``S0``, the union of the units whose members all
    submitted, and returns the largest connected union of whole units inside it (ties: the one
    holding the smallest id; empty if there is none, and the round aborts). It is found exactly
    by recursion: a connected union of units inside ``S`` lies inside one component ``C`` of
    ``G[S]``, hence inside the units contained in ``C``; so if ``G[S]`` is disconnected, the
    best set is the best over the components ``C`` of the best set inside the units within
    ``C``. The sets examined at one depth are disjoint, so this costs at most ``|S0|`` graph
    traversals per depth. ``S`` depends only on who submitted (which the server sees anyway).
    With the complete graph (SecAgg) nothing is ever removed.

    Parameters
    ----------
    params : SecAggParameters
        The round's parameters: its participants (the users asked) and neighbour graph.
    batch_size : int
        ``T``: batch ``b`` holds users ``b*T .. b*T+T-1`` (the layout of
        :class:`~fedprivacy.participation.selectors.BatchPartitionSelector`). Use 1 when the
        selection has no batches.
    policy : BatchPolicy or str
        ``atomic``, ``round`` or ``partial``.
    on_shrink : callable, optional
        Called with the sets before and after the connectivity step when it removed users.

    Returns
    -------
    callable
        Maps the users whose inputs arrived to the set to aggregate.

    Examples
    --------
    >>> import os
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 8, 32)
    >>> params = SecAggParameters.create(os.urandom(16), 0, range(8), 4, codec, degree=2)
    >>> choose = aggregation_policy(params, 2, "atomic")
    >>> choose(frozenset(range(8))) == frozenset(range(8))
    True

    """
    size = require_int("batch_size", batch_size, minimum=1)
    units = _UNITS[parse_batch_policy(policy)](frozenset(params.participants), size)

    def connected(users: frozenset[int]) -> frozenset[int]:
        parts = params.components(users)
        if len(parts) <= 1:
            return users
        best = (connected(_whole_units(units, part)) for part in parts)
        return min(best, key=lambda c: (-len(c), min(c, default=-1)))

    def choose(submitted: frozenset[int]) -> frozenset[int]:
        start = _whole_units(units, submitted)
        chosen = connected(start)
        if on_shrink is not None and chosen != start:
            on_shrink(start, chosen)
        return chosen

    return choose


def ring_block(batch_size: int, policy: BatchPolicy | str, degree: int | None) -> int | None:
    """The ``ring_block`` of the round's parameters: ``T`` where whole batches are aggregated.

    The batch-aware SecAgg+ graph (see :func:`~fedprivacy.secagg.params.harary_neighbours`)
    keeps each batch contiguous on the ring, so the unions of whole batches that ``atomic`` and
    ``round`` aggregate stay connected. ``partial`` aggregates single users, a selection without
    batches (``T = 1``) has nothing to group, and the complete graph (``degree=None``) is always
    connected: all three keep the plain graph (``None``).

    Parameters
    ----------
    batch_size : int
        ``T``, 1 when the selection has no batches.
    policy : BatchPolicy or str
        The batch policy.
    degree : int or None
        The SecAgg+ degree, ``None`` for the complete graph.

    Returns
    -------
    int or None
        ``T`` or ``None``.

    """
    size = require_int("batch_size", batch_size, minimum=1)
    if degree is None or size == 1 or parse_batch_policy(policy) is BatchPolicy.PARTIAL:
        return None
    return size


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
    """One round of a secure selection run.

    ``connectivity`` is ``"shrunk"`` when the policy removed ``connectivity_removed`` users from
    the aggregated set to keep it connected in the neighbour graph and the round completed,
    ``"aborted"`` when that left too few users (or the server refused a disconnected set), and
    empty otherwise.
    """

    round_index: int
    selected: int
    aggregated: int
    aborted: str | None
    max_abs_error: float
    client_seconds: float  # mean over the clients that took part
    server_seconds: float
    connectivity: str = ""
    connectivity_removed: int = 0


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
                    r.connectivity,
                    r.connectivity_removed,
                ]
            )
        return buf.getvalue()

    def summary(self) -> dict[str, object]:
        """The ``secagg`` object of ``fedprivacy simulate --secagg --json``."""
        done = [r for r in self.records if r.aborted is None and r.aggregated > 0]
        return {
            "rounds_aggregated": len(done),
            "rounds_aborted": sum(r.aborted is not None for r in self.records),
            "rounds_shrunk_for_connectivity": sum(r.connectivity == "shrunk" for r in self.records),
            "rounds_aborted_for_connectivity": sum(
                r.connectivity == "aborted" for r in self.records
            ),
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
    batch_ring : bool
        Use the batch-aware SecAgg+ graph when whole batches are aggregated (see
        :func:`ring_block`); false keeps the plain random ring (for comparisons).

    """

    dimension: int = 1000
    protocol_dropout: float = 0.0
    batch_policy: str = "atomic"
    batch_size: int = 1
    bits: int = 32
    clip: float = 1.0
    degree: int | None = None
    batch_ring: bool = True

    def validate(self) -> None:
        """Raise :class:`ParameterError` for the first invalid field."""
        require_int("dimension", self.dimension, minimum=1)
        require_int("batch_size", self.batch_size, minimum=1)
        require_int("bits", self.bits, minimum=8, maximum=64)
        if not 0.0 <= self.protocol_dropout < 1.0:
            raise ParameterError("protocol_dropout", "must lie in [0, 1)")
        parse_batch_policy(self.batch_policy)
        if self.degree is not None:
            require_int("degree", self.degree, minimum=MIN_THRESHOLD)


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
        As in :func:`fedprivacy.participation.simulation.run_selection`.
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
        record = _secure_round(r, selected, session, codec, config, rng, observer)
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
    observer: RoundObserver | None,
) -> tuple[SecureRoundRecord, list[int]]:
    if len(selected) < MIN_PARTICIPANTS:  # nothing to aggregate securely: the round is skipped
        reason = f"fewer than {MIN_PARTICIPANTS} users selected"
        return SecureRoundRecord(r, len(selected), 0, reason, 0, 0, 0), []
    updates = {u: rng.uniform(-config.clip, config.clip, config.dimension) for u in selected}
    degree = config.degree if config.degree is None else min(config.degree, len(selected) - 1)
    block = ring_block(config.batch_size, config.batch_policy, degree)
    params = SecAggParameters.create(
        session,
        r,
        selected,
        config.dimension,
        codec,
        degree=degree,
        graph_seed=session,
        ring_block=block if config.batch_ring else None,
    )
    dropouts = sample_dropouts(selected, config.protocol_dropout, rng)
    removed: list[int] = []
    policy = aggregation_policy(
        params,
        config.batch_size,
        config.batch_policy,
        on_shrink=lambda before, after: removed.append(len(before) - len(after)),
    )
    round_observer = None if observer is None else lambda server: observer(r, server)
    started = time.perf_counter()
    try:
        outcome = run_round(
            params, updates, dropouts=dropouts, policy=policy, observer=round_observer
        )
    except RoundAbortedError as exc:
        seconds = time.perf_counter() - started
        connectivity = "aborted" if removed or isinstance(exc, DisconnectedSetError) else ""
        return SecureRoundRecord(
            r, len(selected), 0, str(exc), 0.0, 0.0, seconds, connectivity, sum(removed)
        ), []
    result = outcome.result
    plain = np.sum([updates[u] for u in result.aggregated], axis=0)
    error = float(np.max(np.abs(result.sum - plain)))
    took_part = [s for u, s in outcome.client_seconds.items() if u not in dropouts]
    client = float(np.mean(took_part)) if took_part else 0.0
    record = SecureRoundRecord(
        r,
        len(selected),
        len(result.aggregated),
        None,
        error,
        client,
        outcome.server_seconds,
        "shrunk" if removed else "",
        sum(removed),
    )
    return record, list(result.aggregated)
