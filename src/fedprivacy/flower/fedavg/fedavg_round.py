"""The server's side of one FedAvg round over the nodes: plaintext or secure, one payload codec.

Both FedAvg servers on Flower run their rounds here: the pipeline's training over fedprivacy's
own nodes (:class:`~fedprivacy.flower.fedavg.training.DeployedTraining`, the model as one float32
vector, the configuration as TOML) and FedAvg over any Flower app
(:class:`~fedprivacy.flower.dropin.private_fedavg.PrivateFedAvg`, the app's own ``ArrayRecord``).
They differ only in their :class:`PayloadCodec`: what a request carries with the model, and how a
node's reply becomes its update. A plaintext round is one ``train`` exchange and the
aggregator; a secure round runs the protocol's stages through
:class:`~fedprivacy.flower.fedavg.overlap.SecureRounds` (overlapped or not), on the batches and
graph the nodes drew (:meth:`FedAvgRound.draw_layout`). A lying server (fault injection,
:mod:`fedprivacy.flower.faults.lying_server`) forges round ``r`` with ``forges[r % len(forges)]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from fedprivacy.crypto.signing import Roster
from fedprivacy.errors import FedPrivacyError
from fedprivacy.fl.aggregation import AggregateOutcome, Aggregator
from fedprivacy.fl.mechanism import Updates
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.flower.faults.lying_server import forge_models, forge_params
from fedprivacy.flower.fedavg.overlap import SecureRounds
from fedprivacy.flower.fedavg.secure_round import SecureRound
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.noise_request import noise_request
from fedprivacy.flower.messaging.stages import Record, Stage, encode_array
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.pipeline.algorithm import SelectAhead
from fedprivacy.secagg.params import MIN_PARTICIPANTS
from fedprivacy.secagg.params_wire import encode_params

__all__ = ["FedAvgRound", "PayloadCodec", "PlaintextStep"]

#: How the server aggregates the plaintext updates it received: ``(round, updates, weights)``.
PlaintextStep = Callable[[int, Updates, dict[int, float]], AggregateOutcome]


class PayloadCodec(Protocol):
    """What a round's requests carry with the model, and how a reply becomes an update."""

    def model_fields(self, r: int) -> dict[str, Any]:
        """The fields that carry round ``r``'s model (and the training configuration)."""

    def update(self, reply: Record) -> tuple[NDArray[np.float32], float]:
        """A node's update and its weight; raises on a malformed reply."""


@dataclass
class FedAvgRound:
    """One round after another over ``exchange`` (see the module docstring).

    Parameters
    ----------
    exchange : StageExchange
        Reaches the nodes and logs the events.
    aggregator : Aggregator
        Plaintext or secure aggregation (:class:`~fedprivacy.fl.secure_aggregation.
        SecureAggregator`: the protocol over the nodes).
    codec : PayloadCodec
        The model on the wire.
    plaintext : PlaintextStep
        The plaintext aggregation of the updates received.
    dimension : int
        Entries of the model vector (of each masked input).
    batch_size : int
        ``T`` of the selector's units (1 without batches).
    signers : Roster, optional
        The federation's keys: every secure round runs the consistency check.
    overlap : bool
        Each secure round's ``unmask`` with the next round's first stage.
    forges : list of dict of str to str
        A lying server's proposals, by round (none when empty).
    """

    exchange: StageExchange
    aggregator: Aggregator
    codec: PayloadCodec
    plaintext: PlaintextStep
    dimension: int
    batch_size: int = 1
    signers: Roster | None = None
    overlap: bool = False
    forges: list[dict[str, str]] = field(default_factory=list)
    secure_rounds: SecureRounds = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.secure_rounds = SecureRounds(self.exchange, self._open, self.overlap)

    def forge(self, r: int) -> dict[str, str]:
        """What the server forges in round ``r`` (``{}``: nothing)."""
        return self.forges[r % len(self.forges)] if self.forges else {}

    def draw_layout(self, num_users: int) -> BatchLayout | None:
        """Before the first selection of secure rounds of whole batches: the nodes' layout.

        :meth:`~fedprivacy.flower.fedavg.overlap.SecureRounds.draw_layout`; None without batches,
        without SecAgg, once a layout is set, or when the draw failed.
        """
        agg = self.aggregator
        if self.batch_size > 1 and isinstance(agg, SecureAggregator) and agg.layout is None:
            return self.secure_rounds.draw_layout(agg, num_users)
        return None

    def request(self, r: int, users: list[int], model: bool = True) -> dict[str, Any]:
        """Round ``r``'s request to ``users``: the round, the selection, the model or not."""
        ids = {"round": r, "selected": encode_array(np.asarray(users, dtype=np.int64))}
        return {**ids, **self.codec.model_fields(r)} if model else ids

    def run(self, r: int, users: list[int], ahead: SelectAhead | None = None) -> AggregateOutcome:
        """Round ``r`` for ``users``; ``ahead``: the loop's next selection (overlapped rounds)."""
        if not isinstance(self.aggregator, SecureAggregator):
            return self._plaintext(r, users)
        if len(users) < MIN_PARTICIPANTS:
            reason = f"fewer than {MIN_PARTICIPANTS} users selected"
            return AggregateOutcome((), None, None, 0.0, 0, 0.0, reason)
        return self.secure_rounds.run(r, users, self.request(r, users), ahead)

    def _plaintext(self, r: int, users: list[int]) -> AggregateOutcome:
        replies = self.exchange(Stage.TRAIN, r, dict.fromkeys(users, self.request(r, users)))
        updates: Updates = {}
        weights: dict[int, float] = {}
        for u, reply in replies.items():
            try:
                updates[u], weights[u] = self.codec.update(reply)
            except (KeyError, TypeError, FedPrivacyError) as exc:
                self.exchange.reject(r, Stage.TRAIN, u, exc)
        return self.plaintext(r, updates, weights)

    def _open(self, r: int, users: list[int], model: bool) -> tuple[SecureRound, dict[int, Record]]:
        """Round ``r``'s secure round and ``advertise`` requests (forged by a lying server)."""
        agg = self.aggregator
        assert isinstance(agg, SecureAggregator)
        forge = self.forge(r)
        plan = self.secure_rounds.plan(
            agg,
            r,
            users,
            self.dimension,
            self.batch_size,
            lambda params: forge_params(params, forge),
        )
        first = {
            **self.request(r, users, model),
            "params": encode_params(plan.params),
            "noise": noise_request(agg.party_noise, plan.noise),
        }
        first["noise"] = forge.get("noise", first["noise"])
        if "plaintext" in forge:  # a lying server asks for the update in the clear
            self.exchange(Stage.TRAIN, r, dict.fromkeys(users, self.request(r, users)))
        secure = SecureRound(self.exchange, agg, plan, self.batch_size, self.signers, forge)
        return secure, forge_models(dict.fromkeys(users, first), forge)
