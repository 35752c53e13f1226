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

from collections.abc import Callable, Sequence
from enum import StrEnum

import numpy as np

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.driver import Stage
from fedprivacy.secagg.params import SecAggParameters
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


def _batches(params: SecAggParameters, size: int) -> list[frozenset[int]]:
    return list(params.batches(size).values())


# The units each policy aggregates whole: a unit is in S only if every member of it is.
_UNITS: dict[BatchPolicy, Callable[[SecAggParameters, int], list[frozenset[int]]]] = {
    BatchPolicy.ATOMIC: _batches,
    BatchPolicy.ROUND: lambda params, size: [frozenset(params.participants)],
    BatchPolicy.PARTIAL: lambda params, size: [frozenset({u}) for u in params.participants],
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
        ``T``: batch ``b`` holds the users at positions ``b*T .. b*T+T-1`` of the round's
        layout (``params.positions``; by default users ``b*T .. b*T+T-1``, as in
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
    units = _UNITS[parse_batch_policy(policy)](params, size)

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
