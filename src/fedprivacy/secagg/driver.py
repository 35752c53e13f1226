"""In-process driver: runs one round between a server and its clients, for simulation.

Every message goes through its byte encoding (``wire=True``, the default), so the driver
exercises exactly what a network transport would carry. Dropouts are scripted per user: a user
that drops before a stage sends nothing from that stage on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from fedprivacy.errors import ParameterError
from fedprivacy.secagg.client import SecAggClient
from fedprivacy.secagg.messages import Message, encode_message
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.result import AggregationResult
from fedprivacy.secagg.server import AggregationPolicy, SecAggServer

_T = TypeVar("_T")


class Stage(IntEnum):
    """The four stages; a dropout is scheduled *before* one of them."""

    ADVERTISE_KEYS = 0
    SHARE_KEYS = 1
    MASKED_INPUT = 2
    UNMASK = 3


@dataclass(frozen=True)
class RoundOutcome:
    """The result of one driven round, with timings.

    Attributes
    ----------
    result : AggregationResult
        What the server computed.
    client_seconds : dict of int to float
        Each client's total computation time (serialisation included).
    server_seconds : float
        The server's total computation time (serialisation included).
    wire_bytes : int
        Bytes of all messages exchanged.

    """

    result: AggregationResult
    client_seconds: dict[int, float]
    server_seconds: float
    wire_bytes: int


def run_round(
    params: SecAggParameters,
    updates: Mapping[int, np.ndarray],
    *,
    weights: Mapping[int, float] | None = None,
    dropouts: Mapping[int, Stage] | None = None,
    policy: AggregationPolicy | None = None,
    rngs: Mapping[int, np.random.Generator] | None = None,
    wire: bool = True,
    observer: Callable[[SecAggServer], None] | None = None,
    noise_variance: Fraction | None = None,
) -> RoundOutcome:
    """Run one round of secure aggregation in this process.

    Parameters
    ----------
    params : SecAggParameters
        The round's public parameters.
    updates : mapping of int to numpy.ndarray
        Each participant's update (every participant needs one, dropouts included).
    weights : mapping of int to float, optional
        Each participant's weight, for weighted rounds.
    dropouts : mapping of int to Stage, optional
        Users that drop, and the stage before which they drop.
    policy : callable, optional
        The server's choice of the aggregated subset (see :meth:`SecAggServer.finish_inputs`).
    rngs : mapping of int to numpy.random.Generator, optional
        Per-client randomness of the stochastic rounding (for reproducible simulations).
    wire : bool
        Send every message through its byte encoding.
    observer : callable, optional
        Called with the server when the round ends, completed or aborted (for example to
        compute what it received with :meth:`SecAggServer.view`).
    noise_variance : fractions.Fraction, optional
        Distributed DP: every client adds ``N_Z(0, noise_variance)`` to its encoded update before
        masking (see :meth:`SecAggClient.masked_input`).

    Returns
    -------
    RoundOutcome
        The aggregate and the timings.

    Raises
    ------
    RoundAbortedError
        If too few users remain at some stage.

    """
    missing = set(params.participants) - set(updates)
    if missing:
        raise ParameterError("updates", f"no update for participants {sorted(missing)[:5]}")
    if params.weighted and (weights is None or set(params.participants) - set(weights)):
        raise ParameterError("weights", "a weighted round needs a weight for every participant")
    drop = dict(dropouts or {})
    clock: dict[int, float] = dict.fromkeys(params.participants, 0.0)
    server_clock = [0.0]
    wire_bytes = [0]

    def send(message: Message) -> Message | bytes:
        if not wire:
            return message
        data = encode_message(message)
        wire_bytes[0] += len(data)
        return data

    def alive(user: int, stage: Stage) -> bool:
        return user not in drop or drop[user] > stage

    def as_client(user: int, fn: Callable[..., Message], *args: Any, **kw: Any) -> Message | bytes:
        start = time.perf_counter()
        reply = fn(*args, **kw)
        out = send(reply)
        clock[user] += time.perf_counter() - start
        return out

    def at_server(fn: Callable[..., _T], *args: Any) -> _T:
        start = time.perf_counter()
        out = fn(*args)
        server_clock[0] += time.perf_counter() - start
        return out

    def to_clients(messages: Mapping[int, Message]) -> dict[int, Message | bytes]:
        start = time.perf_counter()
        out = {u: send(m) for u, m in messages.items()}
        server_clock[0] += time.perf_counter() - start
        return out

    clients = {u: SecAggClient(params, u) for u in params.participants}
    server = SecAggServer(params)
    try:
        for u, c in clients.items():
            if alive(u, Stage.ADVERTISE_KEYS):
                at_server(server.receive, as_client(u, c.advertise_keys))
        rosters = to_clients(at_server(server.finish_keys))
        for u, roster in rosters.items():
            if alive(u, Stage.SHARE_KEYS):
                at_server(server.receive, as_client(u, clients[u].share_keys, roster))
        deliveries = to_clients(at_server(server.finish_shares))
        for u, delivery in deliveries.items():
            if alive(u, Stage.MASKED_INPUT):
                kw: dict[str, Any] = {}
                if params.weighted:
                    assert weights is not None
                    kw["weight"] = weights[u]
                if rngs is not None:
                    kw["rng"] = rngs[u]
                if noise_variance is not None:
                    kw["noise_variance"] = noise_variance
                reply = as_client(u, clients[u].masked_input, delivery, updates[u], **kw)
                at_server(server.receive, reply)
        requests = to_clients(at_server(server.finish_inputs, policy))
        for u, request in requests.items():
            if alive(u, Stage.UNMASK):
                at_server(server.receive, as_client(u, clients[u].unmask, request))
        result = at_server(server.finish_unmask)
    finally:
        if observer is not None:
            observer(server)
    return RoundOutcome(result, clock, server_clock[0], wire_bytes[0])
