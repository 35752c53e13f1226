"""The transport over Flower's Message API: each stage one push and pull of messages.

Every request becomes a ``query.fedprivacy`` message to the user's SuperNode, its fields a
``ConfigRecord`` named ``fedprivacy``; the replies that arrive before the stage's timeout are the
stage's replies (a node that does not answer in time, or whose ClientApp failed, dropped out at
that stage). Users map to nodes through the roster (:func:`discover_roster`): each SuperNode says
which user it is (its ``node_config``'s ``fedprivacy-user``, else ``partition-id``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flwr.app import ConfigRecord, Message, RecordDict
from flwr.serverapp import Grid

from fedprivacy.crypto.signing import Roster
from fedprivacy.flower.messaging.identity import admit, new_nonce
from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.flower.messaging.transport import Transport

__all__ = [
    "MESSAGE_TYPE",
    "QUERY_WIRE",
    "RECORD",
    "GridTransport",
    "Wire",
    "discover_roster",
    "to_record",
]

MESSAGE_TYPE = "query.fedprivacy"
RECORD = "fedprivacy"


def to_record(fields: Mapping[str, Any]) -> RecordDict:
    """A request or reply as the content of a Flower message."""
    return RecordDict({RECORD: ConfigRecord(dict(fields))})


def _fields(message: Message) -> Record | None:
    if message.has_error() or RECORD not in message.content.config_records:
        return None
    return dict(message.content.config_records[RECORD])


@dataclass(frozen=True)
class Wire:
    """How requests and replies travel as Flower messages.

    Attributes
    ----------
    message_type : str
        The messages' type (``query.fedprivacy`` for fedprivacy's own ClientApp, ``train`` for
        the mod inside any app, :mod:`fedprivacy.flower.dropin.mod`).
    content : callable
        A request -> the message's content.
    fields : callable
        A reply -> its fields (``None`` for an error or a reply without them).
    """

    message_type: str
    content: Callable[[Record], RecordDict]
    fields: Callable[[Message], Record | None]


#: fedprivacy's own ClientApp (:mod:`fedprivacy.flower.deploy.apps`): one ``ConfigRecord``.
QUERY_WIRE = Wire(MESSAGE_TYPE, to_record, _fields)


#: First and largest pause between two pulls of a stage's replies (seconds).
FIRST_POLL, LAST_POLL = 0.05, 0.25


def send_and_receive(grid: Grid, messages: list[Message], timeout: float) -> list[Message]:
    """Push ``messages``, then pull their replies until all arrived or ``timeout`` passed.

    Flower's ``Grid.send_and_receive`` (flwr 1.41) sleeps 3 s between pulls, so every stage
    waited up to 3 s after its last reply. Here the pause starts at :data:`FIRST_POLL` and
    grows by half each pull up to :data:`LAST_POLL`: a stage whose nodes answer in 0.2 s ends
    within about 0.1 s of the last reply, a stage of a second or more within 0.25 s of it (a
    pause of 1 s wasted about 0.4 s an exchange, ``benchmarks/RESULTS.md``), and a long stage
    (local training) pulls four times a second (one small request to the SuperLink each).

    Examples
    --------
    >>> class Echo:  # a grid whose replies arrive on the second pull
    ...     pulls = 0
    ...     def push_messages(self, messages): return ["a", "b"]
    ...     def pull_messages(self, ids):
    ...         self.pulls += 1
    ...         return [] if self.pulls < 2 else [_Reply(i) for i in sorted(ids)]
    >>> class _Reply:
    ...     def __init__(self, i): self.metadata = type("M", (), {"reply_to_message_id": i})
    >>> grid = Echo()
    >>> [r.metadata.reply_to_message_id for r in send_and_receive(grid, [], 5.0)], grid.pulls
    (['a', 'b'], 2)
    """
    waiting = set(grid.push_messages(messages))
    deadline = time.monotonic() + timeout
    pause = FIRST_POLL
    replies: list[Message] = []
    while waiting:
        arrived = list(grid.pull_messages(waiting))
        replies += arrived
        waiting -= {m.metadata.reply_to_message_id for m in arrived}
        left = deadline - time.monotonic()
        if not waiting or left <= 0:
            break
        time.sleep(min(pause, left))
        pause = min(LAST_POLL, pause * 1.5)
    return replies


class GridTransport(Transport):
    """Sends each stage's requests as Flower messages and waits at most ``timeout`` seconds.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The ServerApp's grid.
    roster : mapping of int to int
        User -> node id.
    timeout : float
        Seconds to wait for a stage's replies.
    wire : Wire
        The messages' type and content (default: fedprivacy's own ClientApp).
    """

    def __init__(
        self, grid: Grid, roster: Mapping[int, int], timeout: float, wire: Wire = QUERY_WIRE
    ) -> None:
        super().__init__()
        self.grid = grid
        self.wire = wire
        self.roster = dict(roster)
        self.timeout = float(timeout)
        self._user_of = {node: user for user, node in self.roster.items()}

    @property
    def users(self) -> tuple[int, ...]:
        """See :attr:`Transport.users`."""
        return tuple(sorted(self.roster))

    def _exchange(
        self, stage: Stage, round_index: int, requests: dict[int, Record]
    ) -> dict[int, Record]:
        messages = [
            Message(
                self.wire.content(request),
                dst_node_id=self.roster[u],
                message_type=self.wire.message_type,
                group_id=str(round_index),
            )
            for u, request in requests.items()
            if u in self.roster
        ]
        out: dict[int, Record] = {}
        for reply in send_and_receive(self.grid, messages, self.timeout):
            user = self._user_of.get(reply.metadata.src_node_id)
            fields = self.wire.fields(reply)
            if user is not None and user in requests and fields is not None:
                out[user] = fields
        return out


def discover_roster(
    grid: Grid,
    expect: int,
    *,
    wait: float,
    timeout: float,
    on_wait: Callable[[int], None] | None = None,
    keys: Roster | None = None,
    wire: Wire = QUERY_WIRE,
) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """Wait for ``expect`` nodes (at most ``wait`` seconds) and ask each which user it is.

    Each ``hello`` carries a fresh nonce; with ``keys`` (the federation's public keys) a node
    is admitted only if it signed its claim with its user's key (:func:`fedprivacy.flower.
    identity.admit`). A claim that does not verify, or two nodes claiming one user, drop those
    nodes, never the run.

    Returns
    -------
    tuple of dict and list
        User -> node id, and an ``identity_refused`` event per node left out.
    """
    deadline = time.monotonic() + wait
    nodes = list(grid.get_node_ids())
    while len(nodes) < expect and time.monotonic() < deadline:
        if on_wait is not None:
            on_wait(len(nodes))
        time.sleep(0.5)
        nodes = list(grid.get_node_ids())
    nonce = new_nonce()
    request = {"stage": Stage.HELLO.value, "nonce": nonce}
    hello = [
        Message(wire.content(request), dst_node_id=n, message_type=wire.message_type) for n in nodes
    ]
    replies: dict[int, Record] = {}
    for reply in send_and_receive(grid, hello, timeout):
        fields = wire.fields(reply)
        if fields is not None:
            replies[reply.metadata.src_node_id] = fields
    return admit(replies, nonce, keys)
