"""FedAvg whose users are nodes: the round loop on the server, training and masking on the nodes.

:class:`DeployedTraining` is the in-process :class:`~fedprivacy.fl.engine.FederatedTraining` with
one step replaced (:meth:`~fedprivacy.fl.engine.FederatedTraining.train_and_aggregate`): the
selected users' nodes train their own data and, with ``secagg``, run the stages of the secure
aggregation protocol through a :class:`~fedprivacy.flower.messaging.transport.Transport`: the one
FedAvg server round, :class:`~fedprivacy.flower.fedavg.fedavg_round.FedAvgRound`, with this class as
its payload codec (the model as a float32 vector, the configuration as TOML). Selection,
availability, ledger, evaluation and the privacy report are the pipeline's own.

What happened is what counts: a node that does not answer a stage in time is a dropout at that
stage (and is taken as gone for the following rounds, :class:`LiveNodes`); a reply the protocol
refuses (replayed, out of order, malformed, claiming another user) is rejected with the typed
error and its sender treated the same way. Every such event is logged (:attr:`events`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.crypto.signing import Roster
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.engine import FederatedTraining
from fedprivacy.flower.faults.lying_server import forge_config
from fedprivacy.flower.fedavg.fedavg_round import FedAvgRound
from fedprivacy.flower.messaging.exchange import BeforeStage, StageExchange
from fedprivacy.flower.messaging.stages import Record, decode_array, encode_array
from fedprivacy.flower.messaging.transport import Transport
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.pipeline.algorithm import RoundContext, RoundResult, SelectAhead
from fedprivacy.pipeline.record import RoundRecord

__all__ = ["DeployedTraining", "LiveNodes"]


class LiveNodes(AvailabilityModel):
    """Availability from the deployment: the users with a node that has not gone silent.

    Draws nothing from the round's generator, so selection is the simulation's given the same
    availability. :attr:`trace` records each round's vector (the deployment's availability
    trace, replayed by the reference simulation).

    Parameters
    ----------
    num_users : int
        Users of the configuration.
    present : iterable of int
        The users whose nodes answered the roster call.
    """

    def __init__(self, num_users: int, present: Any) -> None:
        self.num_users = int(num_users)
        self.present = {int(u) for u in present}
        self.gone: set[int] = set()
        self.trace: list[NDArray[np.bool_]] = []

    def sample(self, round_index: int, rng: np.random.Generator) -> NDArray[np.bool_]:
        """The users present and not gone; see :meth:`AvailabilityModel.sample`."""
        out = np.zeros(self.num_users, dtype=np.bool_)
        out[sorted(self.present - self.gone)] = True
        self.trace.append(out.copy())
        return out


@dataclass
class DeployedTraining(FederatedTraining):
    """:class:`FederatedTraining` over a transport (see the module docstring).

    Parameters
    ----------
    transport : Transport
        Reaches the users' nodes.
    config_toml : str
        The :class:`~fedprivacy.fl.training_config.TrainConfig` as TOML, sent to the
        nodes with every training request (they build the same task from it).
    on_event : callable, optional
        Called with each event as it is logged (progress on the console, a log file).
    before_stage : callable, optional
        Called as ``before_stage(round, stage, users, log)`` before each exchange (fault injection:
        :class:`fedprivacy.flower.deploy.run.StagePause`).
    forges : list of dict of str to str
        Fault injection, a lying server (:mod:`fedprivacy.flower.faults.lying_server`): round ``r``
        is forged with ``forges[r % len(forges)]`` (none when empty).
    signers : Roster, optional
        The federation's public keys: with them every secure round runs the survivor-list
        consistency check (:mod:`fedprivacy.secagg.consistency`) before unmasking.
    overlap : bool
        Three exchanges a secure round: each round's ``unmask`` with the next round's
        ``advertise`` (:mod:`fedprivacy.flower.fedavg.overlap`).
    """

    transport: Transport | None = None
    config_toml: str = ""
    on_event: Callable[[dict[str, Any]], None] | None = None
    before_stage: BeforeStage | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    aggregates: dict[int, NDArray[np.float64]] = field(default_factory=dict)
    forges: list[dict[str, str]] = field(default_factory=list)
    signers: Roster | None = None
    overlap: bool = False
    _remote: FedAvgRound | None = field(default=None, init=False, repr=False)
    _select_ahead: SelectAhead | None = field(default=None, init=False, repr=False)

    @property
    def authenticated(self) -> bool:
        """Whether the nodes' SecAgg keys are signed (the server holds the roster)."""
        return self.signers is not None

    def _gone(self, users: list[int]) -> None:
        if isinstance(self.availability, LiveNodes):
            self.availability.gone.update(int(u) for u in users)

    def _round(self) -> FedAvgRound:
        """The rounds over the transport (made once, at the first use)."""
        if self._remote is None:
            assert self.transport is not None
            exchange = StageExchange(
                self.transport, self.on_event, self.before_stage, self._gone, self.events
            )
            self._remote = FedAvgRound(
                exchange,
                self.aggregator,
                self,
                lambda r, d, w: self.aggregator.aggregate(r, d, w, batch_size=self.batch_size_t),
                int(self.global_flat.numel()),
                self.batch_size_t,
                self.signers,
                self.overlap,
                self.forges,
            )
        return self._remote

    def model_fields(self, r: int) -> dict[str, Any]:
        """The configuration (forged by a lying server) and the global model as float32."""
        return {
            "config": forge_config(self.config_toml, self._round().forge(r)),
            "model": encode_array(self.global_flat.cpu().numpy().astype(np.float32)),
        }

    def update(self, reply: Record) -> tuple[NDArray[np.float32], float]:
        """A node's clipped update and weight, as :meth:`client_update` computes them."""
        return decode_array(reply["update"], np.float32), float(reply["weight"])

    def train_and_aggregate(
        self, round_index: int, selected: NDArray[np.intp]
    ) -> tuple[AggregateOutcome, float]:
        """The selected users' nodes train; plaintext or secure aggregation over the transport."""
        r, users = round_index, [int(u) for u in selected]
        started = time.perf_counter()
        outcome = self._round().run(r, users, self._select_ahead)
        if outcome.mean_update is not None:
            self.aggregates[r] = outcome.mean_update
        self._round().exchange.log(
            round=r,
            event="round",
            selected=users,
            aggregated=list(outcome.aggregated),
            aborted=outcome.aborted or "",
            seconds=time.perf_counter() - started,
        )
        return outcome, 0.0

    def run(
        self, rounds: int, *, progress: Callable[[int], None] | None = None
    ) -> list[RoundRecord]:
        """:meth:`FederatedTraining.run`; first, with batches, the layout the nodes draw.

        Secure rounds of whole batches (or partition groups) need the nodes' own layout
        (:meth:`~fedprivacy.flower.fedavg.fedavg_round.FedAvgRound.draw_layout`), drawn once before
        the first selection.
        """
        layout = self._round().draw_layout(self.num_users)
        if layout is not None:
            self.use_layout(layout)
        return super().run(rounds, progress=progress)

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """:meth:`FederatedTraining.run_round`; the loop's ``ahead`` kept for overlapped rounds."""
        self._select_ahead = ctx.ahead
        return super().run_round(ctx)
