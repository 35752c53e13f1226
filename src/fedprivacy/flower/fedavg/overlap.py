"""The secure rounds of a deployed run, overlapped or not: three exchanges a round instead of four.

A secure round takes four exchanges (``advertise``, ``share``, ``mask``, ``unmask``; five with
the consistency check). Overlapped, round ``t``'s ``unmask`` request travels with round
``t + 1``'s ``advertise`` in one exchange
(:meth:`~fedprivacy.flower.messaging.exchange.StageExchange. joint`): once the server has fixed whom
it unmasks in round ``t``, the round loop draws round ``t + 1``'s selection
(:meth:`~fedprivacy.pipeline.loop.FederatedRun.select_ahead`) and the round is opened without its
model, which needs round ``t``'s unmasking: the model comes with ``share``, where the nodes train. A
run of ``R`` rounds takes ``3R + 1`` exchanges.

Nodes whose policy reuses their keys (:mod:`fedprivacy.flower.nodes.node_keys`) shared with a seed
commitment instead of a key share; :class:`SecureRounds` remembers their public keys
(:attr:`SecureRounds.registered`) and the next rounds skip their ``advertise``. Overlapped, a
round where the server holds every user's keys opens at ``share``, carried with the previous
round's ``unmask``, and the model comes with ``mask``: two exchanges a round.

Before the first round on a sparse (SecAgg+) graph, and before the first selection of a run
with batches, the nodes draw a seed together
(:func:`~fedprivacy.flower.messaging.joint_draw.draw_joint`, three exchanges once a session,
:meth:`SecureRounds.draw`): the server chooses neither the graph nor anyone's batch mates.

:class:`SecureRounds` runs the secure rounds of the one FedAvg server round
(:class:`~fedprivacy.flower.fedavg.fedavg_round.FedAvgRound`), whose payload codec says how the
model travels.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.secure_aggregation import SecureAggregator, SecureRoundPlan
from fedprivacy.flower.fedavg.secure_round import SecureRound
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.joint_draw import JointDraw, draw_joint
from fedprivacy.flower.messaging.stages import Record, Stage
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.pipeline.algorithm import SelectAhead
from fedprivacy.secagg.params import MIN_PARTICIPANTS, SecAggParameters
from fedprivacy.secagg.round_keys import RegisteredKeys

__all__ = ["DRAW_ATTEMPTS", "OpenRound", "SecureRounds"]

DRAW_ATTEMPTS = 3
"""How many times the server draws the graph's seed with the nodes before a sparse round."""

OpenRound = Callable[[int, list[int], bool], tuple[SecureRound, dict[int, Record]]]
"""``open(round, users, with_model)``: the round's :class:`SecureRound` and ``advertise``
requests (carrying the model, or not when rounds overlap)."""


@dataclass
class SecureRounds:
    """One secure round after another over ``exchange`` (see the module docstring).

    Parameters
    ----------
    exchange : StageExchange
        Reaches the nodes and logs the events.
    open_round : OpenRound
        Plans a round and builds its ``advertise`` requests.
    overlap : bool
        Send each round's ``unmask`` with the next round's first stage.

    Attributes
    ----------
    registered : dict of int to (bytes, bytes)
        The reused public keys ``(c_pk, s_pk)`` the server holds, by user: those of the users
        that shared with a seed commitment in their last round.
    drawn : JointDraw or None
        The session's draw with the nodes, once one succeeded.
    """

    exchange: StageExchange
    open_round: OpenRound
    overlap: bool = False
    ahead: SecureRound | None = None  # the next round, opened with this one's unmask
    registered: dict[int, RegisteredKeys] = field(default_factory=dict)
    drawn: JointDraw | None = None

    def _open(
        self, r: int, users: list[int], with_model: bool
    ) -> tuple[SecureRound, dict[int, Record]]:
        secure, first = self.open_round(r, users, with_model)
        secure.use_keys({u: self.registered[u] for u in users if u in self.registered})
        return secure, first

    def plan(
        self,
        aggregator: SecureAggregator,
        r: int,
        users: list[int],
        dimension: int,
        batch: int,
        proposed: Callable[[SecAggParameters], SecAggParameters] = lambda params: params,
    ) -> SecureRoundPlan:
        """Round ``r``'s plan (:meth:`SecureAggregator.plan_round`), on a graph the nodes drew.

        ``proposed`` maps the planned parameters to those the server sends (a lying server's,
        :func:`~fedprivacy.flower.faults.lying_server.forge_params`). Before the session's first
        sparse round the server draws with the nodes (:meth:`draw`); if that fails, the nodes
        refuse the sparse round.
        """

        def planned() -> SecureRoundPlan:
            plan = aggregator.plan_round(r, users, dimension, batch)
            return replace(plan, params=proposed(plan.params))

        plan = planned()
        if plan.params.complete_graph or aggregator.graph_seed is not None:
            return plan
        return planned() if self.draw(aggregator, r) is not None else plan

    def draw(
        self, aggregator: SecureAggregator, r: int, every: Collection[int] = ()
    ) -> JointDraw | None:
        """The session's draw with the nodes (once), which sets the aggregator's graph seed.

        Up to :data:`DRAW_ATTEMPTS` tries (a node that left between two stages fails one),
        each also failing unless every user of ``every`` drew; after the last, a
        ``draw_failed`` event and None.
        """
        if self.drawn is not None:
            return self.drawn
        for _ in range(DRAW_ATTEMPTS):
            users = self.exchange.transport.users
            drawn = draw_joint(self.exchange, r, aggregator.session, users)
            if drawn is not None and set(every) <= set(drawn.users):
                aggregator.graph_seed = drawn.graph_seed
                self.drawn = drawn
                return drawn
        self.exchange.log(round=r, event="draw_failed", attempts=DRAW_ATTEMPTS)
        return None

    def draw_layout(self, aggregator: SecureAggregator, num_users: int) -> BatchLayout | None:
        """Before the first selection: the batch layout of a draw by all ``num_users`` users.

        Sets the aggregator's layout and logs a ``layout`` event (its order, which the
        reference simulation replays); None (nothing set) if the draw failed: the nodes then
        refuse every round with batches.
        """
        drawn = self.draw(aggregator, 0, range(num_users))
        if drawn is None or len(drawn.users) != num_users:
            return None
        aggregator.layout = drawn.layout
        self.exchange.log(round=0, event="layout", order=list(drawn.layout.order))
        return drawn.layout

    def _learn_keys(self, secure: SecureRound) -> None:
        """After a round's ``share``: who reuses its keys now (the others advertise next)."""
        reused = secure.server.reused_keys()
        for u in secure.plan.params.participants:
            if u in reused:
                self.registered[u] = reused[u]
            else:
                self.registered.pop(u, None)

    def run(
        self,
        r: int,
        users: list[int],
        carry: Mapping[str, Any],
        select_ahead: SelectAhead | None = None,
    ) -> AggregateOutcome:
        """Round ``r`` for ``users`` (at least :data:`MIN_PARTICIPANTS`): its outcome.

        ``carry``: the model's fields, sent with ``share`` when rounds overlap;
        ``select_ahead``: the loop's :attr:`~fedprivacy.pipeline.algorithm.RoundContext.ahead`
        (None in the last round: its ``unmask`` goes alone).
        """
        secure, self.ahead = self.ahead, None
        if secure is None or secure.round_index != r:
            secure, first = self._open(r, users, not self.overlap)
            secure.advertise(first)
        unmask = secure.protect(carry if self.overlap else None)
        self._learn_keys(secure)
        if unmask is None:
            return secure.close({})
        upcoming = None
        if self.overlap and select_ahead is not None:
            upcoming = select_ahead(sorted(unmask))  # the users whose inputs are unmasked
        if upcoming is None or len(upcoming) < MIN_PARTICIPANTS:
            return secure.close(self.exchange(Stage.UNMASK, r, unmask))
        self.ahead, first = self._open(r + 1, [int(u) for u in upcoming], False)
        stage, opening = self.ahead.open(first)
        replies, opened = self.exchange.joint(r, unmask, opening, stage)
        self.ahead.take_opening(stage, opened)
        return secure.close(replies)
