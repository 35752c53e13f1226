"""In-process driver: runs one round between a server and its clients, for simulation.

Every message goes through its byte encoding (``wire=True``, the default), so the driver
exercises exactly what a network transport would carry. Dropouts are scripted per user: a user
that drops before a stage sends nothing from that stage on. With ``signing_keys`` the round runs
the consistency check against an active server (:mod:`fedprivacy.secagg.consistency`) between
the masked inputs and the unmasking; a user dropping before ``Stage.UNMASK`` then drops before
the check.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

import numpy as np

from fedprivacy.crypto.signing import SigningKey
from fedprivacy.dp.noise_modes import NoiseDraw
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.client import SecAggClient
from fedprivacy.secagg.consistency import ConsistencyCheck, checks_for
from fedprivacy.secagg.key_epoch import KeyEpoch
from fedprivacy.secagg.messages import Message, encode_message
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.result import AggregationResult
from fedprivacy.secagg.round_keys import RegisteredKeys
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


class _Wire:
    """The messages of one driven round: their encoding, byte count and who spent the time."""

    def __init__(self, participants: tuple[int, ...], wire: bool) -> None:
        self.wire = wire
        self.clock: dict[int, float] = dict.fromkeys(participants, 0.0)
        self.server_seconds = 0.0
        self.bytes = 0

    def send(self, message: Message) -> Message | bytes:
        if not self.wire:
            return message
        data = encode_message(message)
        self.bytes += len(data)
        return data

    def as_client(
        self, user: int, fn: Callable[..., Message], *args: Any, **kw: Any
    ) -> Message | bytes:
        start = time.perf_counter()
        out = self.send(fn(*args, **kw))
        self.clock[user] += time.perf_counter() - start
        return out

    def at_server(self, fn: Callable[..., _T], *args: Any) -> _T:
        start = time.perf_counter()
        out = fn(*args)
        self.server_seconds += time.perf_counter() - start
        return out

    def to_clients(self, messages: Mapping[int, Message]) -> dict[int, Message | bytes]:
        return self.at_server(lambda: {u: self.send(m) for u, m in messages.items()})


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
    noise: NoiseDraw | None = None,
    signing_keys: Mapping[int, SigningKey] | None = None,
    epochs: Mapping[int, KeyEpoch] | None = None,
    registered: Mapping[int, RegisteredKeys] | None = None,
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
    noise : NoiseDraw, optional
        Distributed DP: what every client adds to its encoded update before masking (see
        :meth:`SecAggClient.masked_input`); the exact mode needs ``signing_keys``.
    signing_keys : mapping of int to SigningKey, optional
        Every participant's signing key: run the consistency check (each client and the server
        verify with the roster of these keys' public keys, :func:`roster_of
        <fedprivacy.secagg.consistency.roster_of>`). Its time counts in the clients' and the
        server's seconds; its messages in ``wire_bytes``.
    epochs : mapping of int to KeyEpoch, optional
        The participants that reuse their keys (:mod:`fedprivacy.secagg.key_epoch`), each
        with its epoch.
    registered : mapping of int to RegisteredKeys, optional
        The server's record of reused public keys (:meth:`SecAggServer.reused_keys
        <fedprivacy.secagg.server.SecAggServer.reused_keys>` of earlier rounds): those users
        skip advertising.

    Returns
    -------
    RoundOutcome
        The aggregate and the timings.

    Raises
    ------
    RoundAbortedError
        If too few users remain at some stage.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 4, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(4), 2, codec)
    >>> updates = {u: np.full(2, 0.25) for u in range(4)}
    >>> keys = {u: SigningKey.generate() for u in range(4)}  # the nodes' keys
    >>> outcome = run_round(params, updates, signing_keys=keys)
    >>> outcome.result.aggregated, np.round(outcome.result.total, 6).tolist()
    ((0, 1, 2, 3), [1.0, 1.0])
    """
    missing = set(params.participants) - set(updates)
    if missing:
        raise ParameterError("updates", f"no update for participants {sorted(missing)[:5]}")
    if params.weighted and (weights is None or set(params.participants) - set(weights)):
        raise ParameterError("weights", "a weighted round needs a weight for every participant")
    checks = _checks(params, signing_keys)
    drop = dict(dropouts or {})
    w = _Wire(params.participants, wire)

    def alive(user: int, stage: Stage) -> bool:
        return user not in drop or drop[user] > stage

    def masked_kw(u: int) -> dict[str, Any]:
        kw: dict[str, Any] = {}
        if params.weighted:
            assert weights is not None
            kw["weight"] = weights[u]
        if rngs is not None:
            kw["rng"] = rngs[u]
        if noise is not None:
            kw["noise"] = noise
        return kw

    epoch = dict(epochs or {})
    clients = {
        u: SecAggClient(params, u, consistency=checks.get(u), epoch=epoch.get(u))
        for u in params.participants
    }
    server = SecAggServer(params, registered=registered)
    known = server.advertised
    try:
        for u, c in clients.items():
            if u not in known and alive(u, Stage.ADVERTISE_KEYS):
                w.at_server(server.receive, w.as_client(u, c.advertise_keys))
        for u, roster in w.to_clients(w.at_server(server.finish_keys)).items():
            if alive(u, Stage.SHARE_KEYS):
                w.at_server(server.receive, w.as_client(u, clients[u].share_keys, roster))
        for u, delivery in w.to_clients(w.at_server(server.finish_shares)).items():
            if alive(u, Stage.MASKED_INPUT):
                c = clients[u]
                reply = w.as_client(u, c.masked_input, delivery, updates[u], **masked_kw(u))
                w.at_server(server.receive, reply)
        requests = w.to_clients(w.at_server(server.finish_inputs, policy))
        if checks:
            keys = checks[params.participants[0]].roster
            asked = w.to_clients(w.at_server(server.start_consistency, keys))
            for u, request in asked.items():
                if alive(u, Stage.UNMASK):
                    w.at_server(server.receive, w.as_client(u, clients[u].sign_survivors, request))
            requests = w.to_clients(w.at_server(server.finish_consistency))
        for u, request in requests.items():
            if alive(u, Stage.UNMASK):
                w.at_server(server.receive, w.as_client(u, clients[u].unmask, request))
        result = w.at_server(server.finish_unmask)
    finally:
        if observer is not None:
            observer(server)
    return RoundOutcome(result, w.clock, w.server_seconds, w.bytes)


def _checks(
    params: SecAggParameters, signing_keys: Mapping[int, SigningKey] | None
) -> dict[int, ConsistencyCheck]:
    """Each participant's consistency-check material, or none without signing keys."""
    if signing_keys is None:
        return {}
    missing = set(params.participants) - set(signing_keys)
    if missing:
        raise ParameterError("signing_keys", f"no key for participants {sorted(missing)[:5]}")
    return checks_for(signing_keys)
