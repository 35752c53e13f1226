"""The server's side of one secure round over a deployment's stages, for every deployed algorithm.

:class:`SecureRound` sends the first stage's requests (each carrying the model and the round's
parameters), then runs the protocol's stages (``share``, ``mask``, optionally ``consistency``,
``unmask``) through a :class:`~fedprivacy.flower.messaging.exchange.StageExchange` with a
:class:`~fedprivacy.secagg.server.SecAggServer`, and turns what happened into the round's
:class:`~fedprivacy.fl.aggregation.AggregateOutcome` with
:meth:`~fedprivacy.fl.secure_aggregation.SecureAggregator.finish_round`. FedAvg with the
pipeline's own training (:class:`fedprivacy.flower.fedavg.training.DeployedTraining`) and FedAvg
over any Flower app (:class:`fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg`) both run their
secure rounds here.

Users whose reused keys the server holds (:meth:`SecureRound.use_keys`, nodes whose policy reuses
keys, :mod:`fedprivacy.flower.nodes.node_keys`) skip ``advertise``: their opening request travels
with ``share``, and a round where every user's keys are held opens at ``share``.

A reply the protocol refuses (replayed, out of order, malformed, claiming another user) is
rejected with the typed error and logged; a wrong unmasking share is left out and logged; an
error that ends the protocol aborts this round only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fedprivacy.crypto.signing import Roster
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.secure_aggregation import SecureAggregator, SecureRoundPlan
from fedprivacy.flower.faults.lying_server import forge_policy, forge_rosters
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.stages import ARRAYS, Record, Stage, model_digest
from fedprivacy.secagg.errors import ProtocolViolationError, SecAggError, UnknownSenderError
from fedprivacy.secagg.messages import Message, ServerStage, decode_message, encode_message
from fedprivacy.secagg.round_keys import RegisteredKeys
from fedprivacy.secagg.server import SecAggServer

__all__ = ["SecureRound"]


@dataclass
class SecureRound:
    """One secure round's stages over ``exchange`` (see the module docstring).

    Parameters
    ----------
    exchange : StageExchange
        Reaches the nodes and logs the events.
    aggregator : SecureAggregator
        Planned the round; turns the protocol's result into the outcome.
    plan : SecureRoundPlan
        The round's parameters and batch policy.
    batch_size : int
        ``T`` of the batch policy.
    signers : Roster, optional
        With the federation's public keys, the survivor-list consistency check runs before
        unmasking.
    forge : dict of str to str
        Fault injection, a lying server (:mod:`fedprivacy.flower.faults.lying_server`).

    Attributes
    ----------
    server : SecAggServer
        The round's server side of the protocol.
    error : SecAggError or None
        The typed error that ended the round, if one did.
    """

    exchange: StageExchange
    aggregator: SecureAggregator
    plan: SecureRoundPlan
    batch_size: int = 1
    signers: Roster | None = None
    forge: Mapping[str, str] | None = None
    server: SecAggServer = field(init=False)
    error: SecAggError | None = field(init=False, default=None)
    _opening: dict[int, Record] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.server = SecAggServer(self.plan.params)

    def use_keys(self, registered: Mapping[int, RegisteredKeys]) -> None:
        """Hold the reused keys of earlier rounds: those users skip ``advertise`` (before it)."""
        self.server = SecAggServer(self.plan.params, registered=registered)

    @property
    def round_index(self) -> int:
        """The round's index."""
        return self.plan.params.round_index

    def run(self, first: Mapping[int, Record]) -> AggregateOutcome:
        """Send ``first`` (each user's ``advertise`` request), then the protocol's stages."""
        self.advertise(first)
        unmask = self.protect()
        replies = {} if unmask is None else self.exchange(Stage.UNMASK, self.round_index, unmask)
        return self.close(replies)

    def _note_model(self, requests: Iterable[Mapping[str, Any]]) -> None:
        """The digest of the model these requests carry binds the round's masks, if any.

        An honest server sends one model; a lying one (``forge`` ``model``) is taken at the
        model it sent to most parties, whose masks and signatures it can then match.
        """
        digests: Counter[bytes] = Counter()
        known: dict[int, bytes] = {}  # one hash per model object, not per user
        for request in requests:
            payload = request.get("model", request.get(ARRAYS))
            if payload is not None:
                if id(payload) not in known:
                    known[id(payload)] = model_digest(request)
                digests[known[id(payload)]] += 1
        if digests:
            self.server.model = digests.most_common(1)[0][0]

    def advertise(self, first: Mapping[int, Record]) -> None:
        """The first stage: ``first`` is each user's opening request."""
        stage, requests = self.open(first)
        self.take_opening(stage, self.exchange(stage, self.round_index, requests))
        if "repeat" in (self.forge or {}) and stage is Stage.ADVERTISE:  # a lying server
            self.exchange(Stage.ADVERTISE, self.round_index, requests)  # asks the round again

    def open(self, first: Mapping[int, Record]) -> tuple[Stage, dict[int, Record]]:
        """The stage that opens the round and its requests.

        ``advertise`` for the users whose keys the server does not hold (the others get their
        opening request with ``share``); ``share`` when it holds every user's keys.
        """
        self._note_model(first.values())
        held = self.server.advertised
        self._opening = {u: dict(req) for u, req in first.items() if u in held}
        new = {u: dict(req) for u, req in first.items() if u not in held}
        if new or not self._opening:
            return Stage.ADVERTISE, new
        return Stage.SHARE, self._share_requests({})

    def take_opening(self, stage: Stage, replies: dict[int, Record]) -> None:
        """The replies to :meth:`open`'s requests, however they came."""
        if stage is Stage.SHARE:
            self._receive(self.server, Stage.SHARE, replies)
        else:
            self.take_keys(replies)

    def take_keys(self, replies: dict[int, Record]) -> None:
        """The ``advertise`` replies, however they came (alone, or with the last round's unmask)."""
        self._receive(self.server, Stage.ADVERTISE, replies)

    def _requests(
        self, messages: Mapping[int, Message], more: Mapping[str, Any]
    ) -> dict[int, Record]:
        r = self.round_index
        out = {}
        for u, m in messages.items():
            out[u] = {**self._opening.get(u, {}), "round": r, "message": encode_message(m), **more}
        return out

    def _share_requests(self, carry: Mapping[str, Any]) -> dict[int, Record]:
        """``share`` requests; the opening ones of users whose keys the server holds."""
        try:
            rosters = forge_rosters(self.server.finish_keys(), self.forge or {})
            requests = self._requests(rosters, carry)
        except SecAggError as exc:
            self.error = exc
            return {}
        self._opening = {}
        return requests

    def protect(self, carry: Mapping[str, Any] | None = None) -> dict[int, Record] | None:
        """``share``, ``mask`` (and ``consistency``); the unmask requests (None: round ended).

        ``carry``: fields added to every ``share`` request (the model, when the ``advertise``
        request came without it: the nodes train at ``share``), or to every ``mask`` request
        when the round opened at ``share`` without it.
        """
        r, server = self.round_index, self.server

        def run(stage: Stage, messages: Mapping[int, Message], **more: Any) -> None:
            requests = self._requests(messages, more)
            self._receive(server, stage, self.exchange(stage, r, requests))

        if self.error is not None:
            return None
        self._note_model([carry or {}])
        try:
            late = dict(carry or {})
            if server.stage is ServerStage.KEYS:  # the round did not open at share
                stage, requests = Stage.SHARE, self._share_requests(late)
                if self.error is not None:
                    return None
                self._receive(server, stage, self.exchange(stage, r, requests))
                late = {}
            run(Stage.MASK, server.finish_shares(), **late)
            forge = dict(self.forge or {})
            policy = forge_policy(self.plan.policy, forge, self.plan.params, self.batch_size)
            unmask = server.finish_inputs(policy)
            if self.signers is not None:  # every node signs S; only a quorum's S is unmasked
                run(Stage.CONSISTENCY, server.start_consistency(self.signers))
                unmask = server.finish_consistency()
        except SecAggError as exc:  # a malicious or broken party ends this round, never the run
            self.error = exc
            return None
        return {u: {"round": r, "message": encode_message(m)} for u, m in unmask.items()}

    def close(self, replies: dict[int, Record]) -> AggregateOutcome:
        """Take the ``unmask`` replies and finish: the round's outcome."""
        agg, server = self.aggregator, self.server
        result = None
        try:
            if self.error is None:
                self._receive(server, Stage.UNMASK, replies)
                result = server.finish_unmask()
        except SecAggError as exc:
            self.error = exc
        finally:
            if agg.observer is not None:
                agg.observer(self.round_index, server)
        self._log_misbehaviour(server, self.error)
        if result is None:
            assert self.error is not None
            return agg.finish_round(self.plan, self.error, 0)
        return agg.finish_round(self.plan, result, 0, server_seconds=sum(server.seconds.values()))

    def _receive(self, server: SecAggServer, stage: Stage, replies: dict[int, Record]) -> None:
        r = self.plan.params.round_index
        for u, reply in sorted(replies.items()):
            try:
                data = reply.get("message")
                if not isinstance(data, bytes):
                    raise UnknownSenderError("the reply carries no protocol message")
                message: Message = decode_message(data)
                if message.header.sender != u:
                    raise UnknownSenderError(
                        f"the node of user {u} sent a message from {message.header.sender}"
                    )
                server.receive(message)
            except SecAggError as exc:
                self.exchange.reject(r, stage, u, exc)

    def _log_misbehaviour(self, server: SecAggServer, error: SecAggError | None) -> None:
        """Log each wrong unmasking share the server left out, and the error that ended the round.

        A ``bad_share`` event names the user who sent the share (``user``) and the owner of the
        secret; its own input stays aggregated (its seed came from the others' shares). A
        ``round_aborted`` event names the typed error that ended the round.
        """
        r = self.plan.params.round_index
        log: Any = self.exchange.log
        for bad in server.bad_shares:
            log(
                round=r,
                stage=Stage.UNMASK.value,
                user=bad.holder,
                event="bad_share",
                owner=bad.owner,
                error=ProtocolViolationError.__name__,
                detail=bad.describe(),
            )
        if error is not None:
            log(round=r, event="round_aborted", error=type(error).__name__, detail=str(error))
