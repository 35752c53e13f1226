"""What the round loop asks of an algorithm: one round from the users the selector chose.

An :class:`Algorithm` turns a round's selection into the set of users the server really
aggregated and a record of the round. FedAvg (:class:`fedprivacy.fl.engine.FederatedTraining`:
local training -> mechanism -> aggregator -> server update), every ULDP-FL method
(:class:`fedprivacy.uldp.algorithm.UldpAlgorithm`: per-silo weighted sums of clipped per-user
updates with the silos' noise) and selection without training
(:class:`SelectionOnly`) are algorithms; :class:`~fedprivacy.pipeline.loop.FederatedRun` runs
any of them round after round with the same availability, selection, ledger and callbacks.

Examples
--------
>>> import numpy as np
>>> ctx = RoundContext(0, np.ones(4, dtype=bool), np.array([1, 3]), final=False)
>>> SelectionOnly(num_users=4).run_round(ctx).aggregated.tolist()
[1, 3]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Aggregation",
    "Algorithm",
    "RoundContext",
    "RoundResult",
    "SelectAhead",
    "SelectionOnly",
]

#: The record type an algorithm keeps per round.
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

Aggregation = Callable[[int, NDArray[np.intp]], NDArray[np.intp]]
"""What a round aggregates of its selection: ``aggregate(round, selected) -> aggregated``."""

SelectAhead = Callable[[Sequence[int]], NDArray[np.intp] | None]
"""``ahead(aggregating)``: the next round's selection, drawn now (see :class:`RoundContext`)."""


@dataclass(frozen=True)
class RoundContext:
    """What the loop hands an algorithm for one round.

    Attributes
    ----------
    round_index : int
        The round's index (0 for the first round of a run, continuing after a resume).
    available : numpy.ndarray of bool, shape (num_users,)
        Who was reachable.
    selected : numpy.ndarray of intp
        Whom the selector chose (sorted; empty: the round is skipped).
    final : bool
        Whether this is the last round of :meth:`FederatedRun.run
        <fedprivacy.pipeline.loop.FederatedRun.run>` (an algorithm evaluates after it).
    ahead : callable, optional
        ``ahead(aggregating)`` draws the next round's availability and selection now, as if
        this round aggregates ``aggregating``, and returns the selection; the loop then runs
        the next round with it (:meth:`FederatedRun.select_ahead
        <fedprivacy.pipeline.loop.FederatedRun.select_ahead>`). ``None`` in the final round,
        and where the selection cannot be drawn early (``ahead`` may also return ``None``).
        A deployment uses it to send the next round's first stage with this round's last.
    frequency : numpy.ndarray of int64, shape (num_users,), optional
        The ledger's participation counts before this round (read only): an algorithm's
        accounting adds the users it aggregates to them. ``None`` outside a round loop.
    """

    round_index: int
    available: NDArray[np.bool_]
    selected: NDArray[np.intp]
    final: bool = False
    ahead: SelectAhead | None = None
    frequency: NDArray[np.int64] | None = None


@dataclass(frozen=True)
class RoundResult(Generic[R_co]):
    """What a round produced.

    Attributes
    ----------
    aggregated : numpy.ndarray of intp
        The users whose data the server really aggregated (the ledger records this set).
    record : object
        The algorithm's own record of the round.
    """

    aggregated: NDArray[np.intp]
    record: R_co


class Algorithm(ABC, Generic[R]):
    """One round of a federated algorithm, given the selection.

    Attributes
    ----------
    num_users : int
        Users the algorithm serves (the selector's and the availability model's count).
    """

    num_users: int

    @abstractmethod
    def run_round(self, ctx: RoundContext) -> RoundResult[R]:
        """Run one round for ``ctx.selected``: client updates, aggregation, server update."""

    def progress_note(self) -> str:
        """A few words the progress line adds after the server's view (none by default)."""
        return ""


class SelectionOnly(Algorithm[None]):
    """Selection without training: the round aggregates the selection, or what ``aggregate`` says.

    Parameters
    ----------
    num_users : int
        Number of users.
    aggregate : callable, optional
        ``aggregate(round, selected)`` returns the users really aggregated (for example by the
        secure aggregation protocol, :func:`fedprivacy.fl.secure_selection.run_secure_selection`);
        by default every selected user is aggregated.
    """

    def __init__(self, num_users: int, aggregate: Aggregation | None = None) -> None:
        self.num_users = num_users
        self.aggregate = aggregate

    def run_round(self, ctx: RoundContext) -> RoundResult[None]:
        """The selection, or the part of it that ``aggregate`` aggregated."""
        if self.aggregate is None:
            return RoundResult(ctx.selected, None)
        return RoundResult(self.aggregate(ctx.round_index, ctx.selected), None)
