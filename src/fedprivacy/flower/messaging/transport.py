"""How a deployment's server reaches its nodes: one exchange of requests and replies per stage.

A :class:`Transport` sends each user its request of a stage and returns the replies that arrived
in time; a user without a reply did not answer (it dropped out at that stage). The round logic
(:class:`fedprivacy.flower.fedavg.training.DeployedTraining`) is the same on every transport:
:class:`InProcessTransport` calls the nodes in this process (tests, and the reference a
deployment is compared with), :class:`fedprivacy.flower.messaging.grid.GridTransport` sends Flower
messages to SuperNodes.

Examples
--------
>>> from fedprivacy.flower.nodes.node import Node
>>> transport = InProcessTransport({3: Node(3), 5: Node(5)})
>>> transport.exchange(Stage.HELLO, 0, {3: {"stage": "hello"}, 5: {"stage": "hello"}})
{3: {'user': 3}, 5: {'user': 5}}
>>> InProcessTransport({3: Node(3)}, dropouts={0: {3: Stage.HELLO}}).exchange(
...     Stage.HELLO, 0, {3: {"stage": "hello"}})
{}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, MutableMapping
from typing import Protocol

from fedprivacy.flower.messaging.stages import Record, Stage

__all__ = ["Handler", "InProcessTransport", "Transport", "payload_bytes"]

# the stages of a secure round in order (a scripted dropout before one skips the later ones)
_ORDER = [Stage.ADVERTISE, Stage.SHARE, Stage.MASK, Stage.CONSISTENCY, Stage.UNMASK]


def payload_bytes(record: Record) -> int:
    """Bytes of a record's values (``bytes``, ``str`` and Flower records; 8 per number)."""
    total = 0
    for value in record.values():
        if isinstance(value, bytes | bytearray):
            total += len(value)
        elif isinstance(value, str):
            total += len(value.encode())
        elif hasattr(value, "count_bytes"):  # a Flower record (a model's ArrayRecord)
            total += int(value.count_bytes())
        else:
            total += 8
    return total


class Transport(ABC):
    """Sends a stage's requests and collects the replies.

    Attributes
    ----------
    sent_bytes, received_bytes : int
        Payload bytes of all requests and replies so far (:func:`payload_bytes`).
    """

    def __init__(self) -> None:
        self.sent_bytes = 0
        self.received_bytes = 0

    @property
    @abstractmethod
    def users(self) -> tuple[int, ...]:
        """The users this transport reaches (sorted)."""

    def exchange(
        self, stage: Stage, round_index: int, requests: Mapping[int, Record]
    ) -> dict[int, Record]:
        """Send ``requests[u]`` to each user ``u``; the replies that arrived, by user.

        Parameters
        ----------
        stage : Stage
            The stage (each request's ``stage`` field, unless the request names its own: an
            exchange that carries two stages, :meth:`StageExchange.joint
            <fedprivacy.flower.messaging.exchange.StageExchange.joint>`).
        round_index : int
            The round (for logs and scripted dropouts).
        requests : mapping of int to dict
            Each user's request.

        Returns
        -------
        dict of int to dict
            The replies; users that did not answer in time are missing.
        """
        out = {u: {"stage": stage.value, **r} for u, r in requests.items()}
        self.sent_bytes += sum(payload_bytes(r) for r in out.values())
        replies = self._exchange(stage, round_index, out)
        self.received_bytes += sum(payload_bytes(r) for r in replies.values())
        return replies

    @abstractmethod
    def _exchange(
        self, stage: Stage, round_index: int, requests: dict[int, Record]
    ) -> dict[int, Record]:
        """Deliver the requests and collect the replies."""


class Handler(Protocol):
    """A node in this process: one request at a time, with its state (a ``Node``)."""

    def handle(self, request: Record, state: MutableMapping[str, bytes]) -> Record:
        """Answer ``request``, keeping what the node remembers in ``state``."""


class InProcessTransport(Transport):
    """The nodes live in this process; each keeps its own state mapping.

    Parameters
    ----------
    nodes : mapping of int to Handler
        The node of each user.
    dropouts : mapping of int to mapping of int to Stage, optional
        Scripted dropouts: ``dropouts[t][u] = s`` makes user ``u`` stop answering in round
        ``t`` from stage ``s`` on (the secure stages in order; ``train`` or ``hello`` alone).
    """

    def __init__(
        self,
        nodes: Mapping[int, Handler],
        dropouts: Mapping[int, Mapping[int, Stage]] | None = None,
    ) -> None:
        super().__init__()
        self.nodes = dict(nodes)
        self.states: dict[int, dict[str, bytes]] = {u: {} for u in self.nodes}
        self.dropouts = {int(t): dict(d) for t, d in (dropouts or {}).items()}

    @property
    def users(self) -> tuple[int, ...]:
        """See :attr:`Transport.users`."""
        return tuple(sorted(self.nodes))

    def _silent(self, user: int, stage: Stage, round_index: int) -> bool:
        drop = self.dropouts.get(round_index, {}).get(user)
        if drop is None:
            return False
        if drop in _ORDER and stage in _ORDER:
            return _ORDER.index(stage) >= _ORDER.index(drop)
        return drop is stage

    def _exchange(
        self, stage: Stage, round_index: int, requests: dict[int, Record]
    ) -> dict[int, Record]:
        return {
            u: self.nodes[u].handle(request, self.states[u])
            for u, request in requests.items()
            if u in self.nodes and not self._silent(u, stage, round_index)
        }
