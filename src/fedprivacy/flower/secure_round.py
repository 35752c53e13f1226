"""The server's side of one secure round over a deployment's stages, for every deployed algorithm.

:class:`SecureRound` sends the first stage's requests (each carrying the model and the round's
parameters), then runs the protocol's stages (``share``, ``mask``, optionally ``consistency``,
``unmask``) through a :class:`~fedprivacy.flower.exchange.StageExchange` with a
:class:`~fedprivacy.secagg.server.SecAggServer`, and turns what happened into the round's
:class:`~fedprivacy.fl.aggregation.AggregateOutcome` with
:meth:`~fedprivacy.fl.secure_aggregation.SecureAggregator.finish_round`. FedAvg with the
pipeline's own training (:class:`fedprivacy.flower.training.DeployedTraining`) and FedAvg over any
Flower app (:class:`fedprivacy.flower.private_fedavg.PrivateFedAvg`) both run their secure rounds
here.

A reply the protocol refuses (replayed, out of order, malformed, claiming another user) is
rejected with the typed error and logged; a wrong unmasking share is left out and logged; an
error that ends the protocol aborts this round only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedprivacy.crypto.signing import Roster
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.secure_aggregation import SecureAggregator, SecureRoundPlan
from fedprivacy.flower.exchange import StageExchange
from fedprivacy.flower.lying_server import forge_policy
from fedprivacy.flower.stages import Record, Stage
from fedprivacy.secagg.errors import ProtocolViolationError, SecAggError, UnknownSenderError
from fedprivacy.secagg.messages import Message, decode_message, encode_message
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
        Fault injection, a lying server (:mod:`fedprivacy.flower.lying_server`).
    """

    exchange: StageExchange
    aggregator: SecureAggregator
    plan: SecureRoundPlan
    batch_size: int = 1
    signers: Roster | None = None
    forge: Mapping[str, str] | None = None

    def run(self, first: Mapping[int, Record]) -> AggregateOutcome:
        """Send ``first`` (each user's ``advertise`` request), then the protocol's stages."""
        r = self.plan.params.round_index
        forge = dict(self.forge or {})
        server = SecAggServer(self.plan.params)

        def run(stage: Stage, messages: Mapping[int, Message]) -> None:
            requests = {u: {"round": r, "message": encode_message(m)} for u, m in messages.items()}
            self._receive(server, stage, self.exchange(stage, r, requests))

        agg = self.aggregator
        try:
            self._receive(server, Stage.ADVERTISE, self.exchange(Stage.ADVERTISE, r, first))
            if "repeat" in forge:  # a lying server asks the round again
                self.exchange(Stage.ADVERTISE, r, first)
            run(Stage.SHARE, server.finish_keys())
            run(Stage.MASK, server.finish_shares())
            unmask = server.finish_inputs(forge_policy(self.plan.policy, forge, self.batch_size))
            if self.signers is not None:  # every node signs S; only a quorum's S is unmasked
                run(Stage.CONSISTENCY, server.start_consistency(self.signers))
                unmask = server.finish_consistency()
            run(Stage.UNMASK, unmask)
            result = server.finish_unmask()
        except SecAggError as exc:  # a malicious or broken party ends this round, never the run
            self._log_misbehaviour(server, exc)
            return agg.finish_round(self.plan, exc, 0)
        finally:
            if agg.observer is not None:
                agg.observer(r, server)
        self._log_misbehaviour(server, None)
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
