"""A Flower ClientApp called in this process, one context per node: the nodes without a network.

:class:`ClientAppTransport` delivers each request as a Flower ``Message`` to the app itself
(``app(message, context)``, as a SuperNode's ClientApp process does), each node with its own
``Context`` (its ``node_config`` and its ``state``, kept between stages and rounds). It runs any
app with the mod (:mod:`fedprivacy.flower.dropin.mod`) exactly as a deployment would, without a
SuperLink: tests, and the Python API for a model and data already in this process
(:func:`fedprivacy.flower.dropin.private_fedavg.run_in_process`).

The messages are made with explicit metadata (``flwr.app.Metadata``), which Flower 1.41
documents as internal; :func:`make_message` is the one place that relies on it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from flwr.app import Context, Message, Metadata, RecordDict
from flwr.clientapp import ClientApp

from fedprivacy.flower.messaging.grid import Wire
from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.flower.messaging.transport import Transport

__all__ = ["ClientAppTransport", "make_message"]

_RUN_ID = 1
_SERVER_NODE = 0


def make_message(content: RecordDict, node_id: int, message_type: str, group: str) -> Message:
    """A server's message to ``node_id``, as the SuperLink would deliver it."""
    metadata = Metadata(
        run_id=_RUN_ID,
        message_id=f"{group}-{node_id}-{time.monotonic_ns()}",
        src_node_id=_SERVER_NODE,
        dst_node_id=node_id,
        reply_to_message_id="",
        group_id=group,
        created_at=time.time(),
        ttl=3600.0,
        message_type=message_type,
    )
    message: Message = Message(metadata=metadata, content=content)  # type: ignore[call-overload]
    return message


class ClientAppTransport(Transport):
    """Calls ``app`` for each user's request; each user a node with its own context.

    Parameters
    ----------
    app : flwr.clientapp.ClientApp
        The app (with :func:`~fedprivacy.flower.dropin.mod.fedprivacy_mod` among its mods).
    node_configs : mapping of int to mapping
        Each user's node configuration (``partition-id``, ``fedprivacy-policy``, ...).
    wire : Wire
        The messages' type and content (:data:`~fedprivacy.flower.dropin.mod.MOD_WIRE`).
    run_config : mapping, optional
        The run configuration every node's context carries.

    Examples
    --------
    >>> from fedprivacy.flower.dropin.mod import MOD_WIRE, fedprivacy_mod
    >>> app = ClientApp(mods=[fedprivacy_mod])
    >>> @app.train()
    ... def train(msg, context):  # the app's own training (never called by a hello)
    ...     return Message(msg.content, reply_to=msg)
    >>> transport = ClientAppTransport(app, {u: {"partition-id": u} for u in range(2)}, MOD_WIRE)
    >>> transport.exchange(Stage.HELLO, 0, {0: {}, 1: {}})
    {0: {'user': 0}, 1: {'user': 1}}
    """

    def __init__(
        self,
        app: ClientApp,
        node_configs: Mapping[int, Mapping[str, Any]],
        wire: Wire,
        run_config: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.app = app
        self.wire = wire
        self.contexts = {
            int(u): Context(
                run_id=_RUN_ID,
                node_id=int(u) + 1,
                node_config=dict(config),
                state=RecordDict(),
                run_config=dict(run_config or {}),
            )
            for u, config in node_configs.items()
        }

    @property
    def users(self) -> tuple[int, ...]:
        """See :attr:`Transport.users`."""
        return tuple(sorted(self.contexts))

    def _exchange(
        self, stage: Stage, round_index: int, requests: dict[int, Record]
    ) -> dict[int, Record]:
        out: dict[int, Record] = {}
        for u, request in requests.items():
            context = self.contexts.get(u)
            if context is None:
                continue
            message = make_message(
                self.wire.content(request),
                context.node_id,
                self.wire.message_type,
                str(round_index),
            )
            fields = self.wire.fields(self.app(message, context))
            if fields is not None:
                out[u] = fields
        return out
