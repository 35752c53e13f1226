"""FedAvg whose users are nodes: the round loop on the server, training and masking on the nodes.

:class:`DeployedTraining` is the in-process :class:`~fedprivacy.fl.engine.FederatedTraining` with
one step replaced (:meth:`~fedprivacy.fl.engine.FederatedTraining.train_and_aggregate`): the
selected users' nodes train their own data and, with ``secagg``, run the four stages of the
secure aggregation protocol through a :class:`~fedprivacy.flower.transport.Transport`; the server
runs :class:`~fedprivacy.secagg.server.SecAggServer` with the parameters and batch policy of
:meth:`~fedprivacy.fl.secure_aggregation.SecureAggregator.plan_round`. Selection, availability,
ledger, evaluation and the privacy report are the pipeline's own.

What happened is what counts: a node that does not answer a stage in time is a dropout at that
stage (and is taken as gone for the following rounds, :class:`LiveNodes`); a reply the protocol
refuses (replayed, out of order, malformed, claiming another user) is rejected with the typed
error and its sender treated the same way. Every such event is logged (:attr:`events`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy.crypto.signing import Roster
from fedprivacy.errors import FedPrivacyError
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.engine import FederatedTraining, RoundRecord
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.flower.exchange import BeforeStage, StageExchange
from fedprivacy.flower.lying_server import forge_config, forge_models, forge_params
from fedprivacy.flower.noise_request import noise_request
from fedprivacy.flower.overlap import SecureRounds
from fedprivacy.flower.secure_round import SecureRound
from fedprivacy.flower.stages import Record, Stage, decode_array, encode_array
from fedprivacy.flower.transport import Transport
from fedprivacy.participation.availability import AvailabilityModel
from fedprivacy.pipeline.algorithm import RoundContext, RoundResult, SelectAhead
from fedprivacy.secagg.params import MIN_PARTICIPANTS
from fedprivacy.secagg.params_wire import encode_params

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
        The :class:`~fedprivacy.experiments.training_config.TrainConfig` as TOML, sent to the
        nodes with every training request (they build the same task from it).
    on_event : callable, optional
        Called with each event as it is logged (progress on the console, a log file).
    before_stage : callable, optional
        Called as ``before_stage(round, stage, users, log)`` before each exchange (fault injection:
        :class:`fedprivacy.flower.run.StagePause`).
    forges : list of dict of str to str
        Fault injection, a lying server (:mod:`fedprivacy.flower.lying_server`): round ``r``
        is forged with ``forges[r % len(forges)]`` (none when empty).
    signers : Roster, optional
        The federation's public keys: with them every secure round runs the survivor-list
        consistency check (:mod:`fedprivacy.secagg.consistency`) before unmasking.
    overlap : bool
        Three exchanges a secure round: each round's ``unmask`` with the next round's
        ``advertise`` (:mod:`fedprivacy.flower.overlap`).
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
    _rounds: SecureRounds | None = field(default=None, init=False, repr=False)
    _select_ahead: SelectAhead | None = field(default=None, init=False, repr=False)

    @property
    def authenticated(self) -> bool:
        """Whether the nodes' SecAgg keys are signed (the server holds the roster)."""
        return self.signers is not None

    def _wire(self) -> StageExchange:
        assert self.transport is not None
        return StageExchange(
            self.transport, self.on_event, self.before_stage, self._gone, self.events
        )

    def _log(self, **event: Any) -> None:
        self._wire().log(**event)

    def _gone(self, users: list[int]) -> None:
        if isinstance(self.availability, LiveNodes):
            self.availability.gone.update(int(u) for u in users)

    def _exchange(self, stage: Stage, r: int, requests: Mapping[int, Record]) -> dict[int, Record]:
        return self._wire()(stage, r, requests)

    def _forge(self, r: int) -> dict[str, str]:
        return self.forges[r % len(self.forges)] if self.forges else {}

    def _selection(self, r: int, selected: NDArray[np.intp]) -> dict[str, Any]:
        return {"round": r, "selected": encode_array(np.asarray(selected, dtype=np.int64))}

    def _requests(self, r: int, selected: NDArray[np.intp]) -> dict[str, Any]:
        return {
            **self._selection(r, selected),
            "config": forge_config(self.config_toml, self._forge(r)),
            "model": encode_array(self.global_flat.cpu().numpy().astype(np.float32)),
        }

    def train_and_aggregate(
        self, round_index: int, selected: NDArray[np.intp]
    ) -> tuple[AggregateOutcome, float]:
        """The selected users' nodes train; plaintext or secure aggregation over the transport."""
        r = round_index
        started = time.perf_counter()
        if isinstance(self.aggregator, SecureAggregator):
            outcome = self._secure_round(r, selected, self.aggregator)
        else:
            base = self._requests(r, selected)
            replies = self._exchange(Stage.TRAIN, r, {int(u): base for u in selected})
            deltas: dict[int, NDArray[np.float32]] = {}
            weights: dict[int, float] = {}
            for u, reply in replies.items():
                try:
                    deltas[u] = decode_array(reply["update"], np.float32)
                    weights[u] = float(reply["weight"])
                except (KeyError, TypeError, FedPrivacyError) as exc:
                    self._reject(r, Stage.TRAIN, u, exc)
            outcome = self.aggregator.aggregate(r, deltas, weights, batch_size=self.batch_size_t)
        if outcome.mean_update is not None:
            self.aggregates[r] = outcome.mean_update
        self._log(
            round=r,
            event="round",
            selected=[int(u) for u in selected],
            aggregated=list(outcome.aggregated),
            aborted=outcome.aborted or "",
            seconds=time.perf_counter() - started,
        )
        return outcome, 0.0

    def _reject(self, r: int, stage: Stage, user: int, exc: Exception) -> None:
        self._wire().reject(r, stage, user, exc)

    def run(
        self, rounds: int, *, progress: Callable[[int], None] | None = None
    ) -> list[RoundRecord]:
        """:meth:`FederatedTraining.run`; first, with batches, the layout the nodes draw.

        Secure rounds of whole batches (or partition groups) need the nodes' own layout
        (:meth:`~fedprivacy.flower.overlap.SecureRounds.draw_layout`), drawn once before the
        first selection.
        """
        agg = self.aggregator
        if isinstance(agg, SecureAggregator) and self.batch_size_t > 1 and agg.layout is None:
            layout = self._secure_rounds().draw_layout(agg, self.num_users)
            if layout is not None:
                self.use_layout(layout)
        return super().run(rounds, progress=progress)

    def _secure_rounds(self) -> SecureRounds:
        if self._rounds is None:
            self._rounds = SecureRounds(self._wire(), self._open, self.overlap)
        return self._rounds

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """:meth:`FederatedTraining.run_round`; the loop's ``ahead`` kept for overlapped rounds."""
        self._select_ahead = ctx.ahead
        return super().run_round(ctx)

    def _open(self, r: int, users: list[int], model: bool) -> tuple[SecureRound, dict[int, Record]]:
        """Round ``r``'s secure round and ``advertise`` requests (forged by a lying server)."""
        agg = self.aggregator
        assert isinstance(agg, SecureAggregator) and self._rounds is not None
        forge = self._forge(r)
        plan = self._rounds.plan(
            agg,
            r,
            users,
            int(self.global_flat.numel()),
            self.batch_size_t,
            lambda params: forge_params(params, forge),
        )
        selected = np.asarray(users, dtype=np.intp)
        request = self._requests(r, selected) if model else self._selection(r, selected)
        first = {
            **request,
            "params": encode_params(plan.params),
            "noise": noise_request(agg.party_noise, plan.noise),
        }
        first["noise"] = forge.get("noise", first["noise"])
        if "plaintext" in forge:  # a lying server asks for the update in the clear
            self._exchange(Stage.TRAIN, r, dict.fromkeys(users, self._requests(r, selected)))
        secure = SecureRound(self._wire(), agg, plan, self.batch_size_t, self.signers, forge)
        return secure, forge_models(dict.fromkeys(users, first), forge)

    def _secure_round(
        self, r: int, selected: NDArray[np.intp], agg: SecureAggregator
    ) -> AggregateOutcome:
        users = [int(u) for u in selected]
        if len(users) < MIN_PARTICIPANTS:
            return AggregateOutcome(
                (), None, None, 0.0, 0, 0.0, f"fewer than {MIN_PARTICIPANTS} users selected"
            )
        carry = self._requests(r, selected)
        return self._secure_rounds().run(r, users, carry, self._select_ahead)
