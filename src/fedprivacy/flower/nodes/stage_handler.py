"""A party that answers one request per stage, its state a mapping of bytes.

:class:`StageHandler` is what a FedAvg node (:class:`fedprivacy.flower.nodes.node.Node`) and a
cross-silo silo (:class:`fedprivacy.flower.uldp.silo_node.SiloNode`) share: the dispatch of a
request to the handler of its stage, the joint requests of overlapped rounds, the party's
persistent state around each handler, and typed error replies that leave the state unchanged.
:func:`single_threaded` runs the party's training on one torch thread, as the reference does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, ClassVar

from fedprivacy.errors import FedPrivacyError
from fedprivacy.flower.messaging.stages import (
    Record,
    Stage,
    error_reply,
    field,
    join_replies,
    split_joint,
)
from fedprivacy.flower.nodes.party_state import load_party_state, save_party_state
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.errors import MalformedMessageError, OutOfOrderError

__all__ = ["StageHandler", "single_threaded"]

_LOG = logging.getLogger("fedprivacy.node")


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run torch on one thread inside the block (the previous count is restored).

    Local training is done on one thread everywhere a deployment is compared: on the nodes
    (separate processes, or Ray actors that run with one thread) and in the reference
    simulation; float sums over a different number of threads may differ in the last bit, and
    the stochastic rounding of the encoding can turn that into one unit of the grid.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class StageHandler:
    """A node that answers one request per stage and keeps its state in a mapping of bytes.

    Subclasses fill :attr:`handlers` (stage -> method) and hold the party's :attr:`policy`;
    :meth:`handle` dispatches, and a protocol error leaves the state as it was. The entries
    that outlive every run come from the policy's state file and go back to it before the
    reply leaves (:mod:`fedprivacy.flower.nodes.party_state`).
    """

    policy: PartyPolicy
    handlers: ClassVar[dict[Stage, Callable[[Any, Record, dict[str, bytes]], Record]]] = {}

    @property
    def party(self) -> int:
        """The party's id (a user's or a silo's): it names the party's state file."""
        raise NotImplementedError

    def handle(self, request: Record, state: MutableMapping[str, bytes]) -> Record:
        """Answer ``request``; protocol errors become an ``error`` reply, state unchanged.

        A joint request (a round's opening ``advertise``, or ``share`` for a node that reuses
        its keys, carrying the previous round's unmasking,
        :func:`~fedprivacy.flower.messaging.stages.joint_request`) is answered as two: the unmasking
        first, with that round's state, then the opening; each part's error is its own.

        Parameters
        ----------
        request : dict
            The server's request (see :mod:`fedprivacy.flower.messaging.stages`).
        state : mutable mapping of str to bytes
            What this node keeps between stages (updated in place).

        Returns
        -------
        dict
            The reply.
        """
        carried, request = split_joint(request)
        if carried:  # round t's unmasking, then round t + 1's first stage
            opening = request.get("stage") == Stage.ADVERTISE.value or (
                request.get("stage") == Stage.SHARE.value and "params" in request
            )
            if not opening:
                return error_reply(
                    MalformedMessageError("only a round's first stage carries an unmasking")
                )
            unmasked = self.handle({**carried, "stage": Stage.UNMASK.value}, state)
            return join_replies(unmasked, self.handle(request, state))
        try:
            stage = Stage(field(request, "stage", str))
        except ValueError:
            return error_reply(MalformedMessageError(f"unknown stage {request.get('stage')!r}"))
        except FedPrivacyError as exc:
            return error_reply(exc)
        handler = type(self).handlers.get(stage)
        if handler is None:
            return error_reply(OutOfOrderError(f"this node does not serve stage {stage.value!r}"))
        scratch = dict(state)
        try:
            load_party_state(self.policy, self.party, scratch)  # what outlives the run wins
            before = dict(scratch)
            reply = handler(self, request, scratch)
            save_party_state(self.policy, self.party, before, scratch)  # before the reply
        except FedPrivacyError as exc:
            _LOG.warning("refused %s: %s: %s", stage.value, type(exc).__name__, exc)
            return error_reply(exc)
        state.clear()
        state.update(scratch)
        return reply
