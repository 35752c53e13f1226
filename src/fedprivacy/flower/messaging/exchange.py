"""One stage's exchange as the server's round logic sees it: sent, answered, refused, logged.

:class:`StageExchange` wraps a :class:`~fedprivacy.flower.messaging.transport.Transport` for the
deployed algorithms (FedAvg, :mod:`fedprivacy.flower.fedavg.training`; cross-silo ULDP-FL,
:mod:`fedprivacy.flower.uldp.cross_silo`): it calls the fault-injection hook before the stage, logs
a ``no_reply`` event for every node that did not answer in time (and tells ``on_silent``), a
``node_refused`` event for every node that replied with an error, and one ``stage`` event with
the counts and the seconds; it returns the replies without an error.

Examples
--------
>>> from fedprivacy.flower.nodes.node import Node
>>> from fedprivacy.flower.messaging.stages import Stage
>>> from fedprivacy.flower.messaging.transport import InProcessTransport
>>> exchange = StageExchange(InProcessTransport({0: Node(0), 1: Node(1)}))
>>> exchange(Stage.HELLO, 0, {0: {}, 2: {}})
{0: {'user': 0}}
>>> [e["event"] for e in exchange.events]
['no_reply', 'stage']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fedprivacy.flower.messaging.stages import Record, Stage, joint_request, split_joint
from fedprivacy.flower.messaging.transport import Transport

__all__ = ["StageExchange"]

#: ``before_stage(round, stage, users, log)``: called before each exchange.
BeforeStage = Callable[[int, Stage, list[int], Callable[..., None]], None]


@dataclass
class StageExchange:
    """Exchanges over ``transport`` with the event log (see the module docstring).

    Parameters
    ----------
    transport : Transport
        Reaches the nodes.
    on_event : callable, optional
        Called with each event as it is logged.
    before_stage : callable, optional
        Fault injection (:class:`fedprivacy.flower.deploy.run.StagePause`).
    on_silent : callable, optional
        Called with the users that did not answer a stage.
    events : list of dict
        The log (appended to).
    """

    transport: Transport
    on_event: Callable[[dict[str, Any]], None] | None = None
    before_stage: BeforeStage | None = None
    on_silent: Callable[[list[int]], None] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)

    def log(self, **event: Any) -> None:
        """Append an event and pass it on."""
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)

    def reject(self, r: int, stage: Stage, user: int, exc: Exception) -> None:
        """Log that the server refused ``user``'s reply with the typed error ``exc``."""
        self.log(
            round=r,
            stage=stage.value,
            user=user,
            event="rejected",
            error=type(exc).__name__,
            detail=str(exc),
        )

    def __call__(self, stage: Stage, r: int, requests: Mapping[int, Record]) -> dict[int, Record]:
        """Send ``requests``; the replies that arrived in time and carry no error."""
        if self.before_stage is not None:
            self.before_stage(r, stage, sorted(requests), self.log)
        started = time.perf_counter()
        replies = self.transport.exchange(stage, r, requests)
        return self._settle(stage, r, requests, replies, time.perf_counter() - started)

    def joint(
        self,
        r: int,
        unmask: Mapping[int, Record],
        opening: Mapping[int, Record],
        stage: Stage = Stage.ADVERTISE,
    ) -> tuple[dict[int, Record], dict[int, Record]]:
        """Round ``r``'s ``unmask`` and round ``r + 1``'s first stage in one exchange.

        ``stage`` is ``advertise``, or ``share`` when the server holds every user's reused
        keys. A user in both gets one message
        (:func:`~fedprivacy.flower.messaging.stages.joint_request`), the others their own stage's.
        Each part is logged as its own stage (the opening part with ``joint=True`` and 0 seconds:
        the exchange's time is the ``unmask`` part's); a user that did not answer missed both parts.
        Returns the two parts' replies.
        """
        if self.before_stage is not None:
            self.before_stage(r, Stage.UNMASK, sorted(unmask), self.log)
            self.before_stage(r + 1, stage, sorted(opening), self.log)
        requests: dict[int, Record] = {}
        for u in sorted(set(unmask) | set(opening)):
            if u in unmask and u in opening:
                requests[u] = joint_request(unmask[u], opening[u], stage)
            elif u in unmask:
                requests[u] = {**unmask[u], "stage": Stage.UNMASK.value}
            else:
                requests[u] = {**opening[u], "stage": stage.value}
        started = time.perf_counter()
        replies = self.transport.exchange(Stage.UNMASK, r, requests)
        seconds = time.perf_counter() - started
        unmasked, opened = {}, {}
        for u, reply in replies.items():
            carried, rest = split_joint(reply)
            if u in unmask and u in opening:
                unmasked[u], opened[u] = carried, rest
            elif u in unmask:
                unmasked[u] = reply
            else:
                opened[u] = reply
        return (
            self._settle(Stage.UNMASK, r, unmask, unmasked, seconds),
            self._settle(stage, r + 1, opening, opened, 0.0, joint=True),
        )

    def _settle(
        self,
        stage: Stage,
        r: int,
        requests: Mapping[int, Record],
        replies: Mapping[int, Record],
        seconds: float,
        **more: Any,
    ) -> dict[int, Record]:
        """Log the stage (silent users, refusals, counts); the replies without an error."""
        silent = sorted(set(requests) - set(replies))
        if silent and self.on_silent is not None:
            self.on_silent(silent)
        for u in silent:
            self.log(round=r, stage=stage.value, user=int(u), event="no_reply")
        ok = {}
        for u, reply in replies.items():
            if "error" in reply:
                self.log(
                    round=r,
                    stage=stage.value,
                    user=u,
                    event="node_refused",
                    error=str(reply["error"]),
                    detail=str(reply.get("detail", "")),
                )
            else:
                ok[u] = reply
        self.log(
            round=r,
            stage=stage.value,
            event="stage",
            asked=len(requests),
            answered=len(ok),
            seconds=seconds,
            **more,
        )
        return ok
