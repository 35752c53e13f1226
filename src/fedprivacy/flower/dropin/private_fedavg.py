"""fedprivacy inside any Flower ServerApp: FedAvg over the app's own model, private end to end.

In the app's ``@app.main()``, in place of Flower's ``FedAvg(...).start(grid, initial_arrays)``::

    result = PrivateFedAvg(PrivateFedAvgConfig(users=10, per_round=4, scheme="multiround",
                           target_privacy=2, dp="distributed", noise_multiplier=1.0, clip=1.0)
                           ).start(grid, ArrayRecord(model.state_dict()))

The nodes run the app's ClientApp with :func:`~fedprivacy.flower.dropin.mod.fedprivacy_mod`. Each
round runs the pipeline's loop (:class:`~fedprivacy.pipeline.loop.FederatedRun`): availability from
the live nodes (:class:`~fedprivacy.flower.fedavg.training.LiveNodes`), any registered selector
(Multi-RoundSecAgg batches over the nodes' users), then secure aggregation over the nodes
(:class:`~fedprivacy.flower.fedavg.secure_round.SecureRound`: SecAgg, or SecAgg+ with
``secagg_degree``) or plaintext FedAvg, the DP mechanism (central, or distributed: each node
adds its own noise), the ledger of what the server unmasked, and after every round the server's
view so far (``T_weak``) and each user's epsilon (a ``privacy`` event). It returns a
:class:`~fedprivacy.flower.dropin.private_result.PrivateFedAvgResult`: the final arrays (the app's
own layout and dtypes), the rounds, the events and the per-user privacy report, as Flower's
strategies return a result.

With ``overlap_rounds`` a secure round takes three exchanges instead of four: round ``t``'s
unmask request travels with round ``t + 1``'s ``advertise`` (:meth:`~fedprivacy.flower.
exchange.StageExchange.joint`), whose selection the loop draws once round ``t``'s aggregated set
is fixed (:meth:`~fedprivacy.pipeline.loop.FederatedRun.select_ahead`); the model then comes
with ``share``, where the nodes train.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord
from numpy.typing import NDArray

from fedprivacy.crypto.signing import Roster
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.aggregators import section_aggregator
from fedprivacy.fl.engine import round_rng
from fedprivacy.fl.mechanism import Mechanism, Updates
from fedprivacy.fl.noise_check import warn_if_swamped
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.fl.selection_wrappers import budget_filter
from fedprivacy.flower.dropin.arrays import ArrayLayout
from fedprivacy.flower.dropin.mod import ARRAYS, CONFIG, MOD_WIRE
from fedprivacy.flower.dropin.private_config import PrivateFedAvgConfig
from fedprivacy.flower.dropin.private_result import PrivateFedAvgResult, RosterError
from fedprivacy.flower.fedavg.fedavg_round import FedAvgRound
from fedprivacy.flower.fedavg.training import LiveNodes
from fedprivacy.flower.messaging.exchange import StageExchange
from fedprivacy.flower.messaging.stages import Record
from fedprivacy.flower.messaging.transport import Transport
from fedprivacy.participation.canary_selection import CanaryAvailability
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.units import unit_size, use_layout
from fedprivacy.pipeline.algorithm import Algorithm, RoundContext, RoundResult, SelectAhead
from fedprivacy.pipeline.loop import FederatedRun
from fedprivacy.pipeline.record import RoundRecord
from fedprivacy.report_inputs import hidden_selection

__all__ = ["PrivateFedAvg", "PrivateFedAvgConfig", "PrivateFedAvgResult"]

_SELECTION, _PROTOCOL = 1, 3  # purposes of the per-round generators (as fl.engine's)

#: The app's evaluation of the global model: ``(round, arrays) -> metrics or None``.
EvaluateFn = Callable[[int, ArrayRecord], Mapping[str, Any] | None]


class _RemoteFedAvg(Algorithm[RoundRecord]):
    """One FedAvg round over the nodes: they train the app's model; the server only sums."""

    def __init__(
        self,
        config: PrivateFedAvgConfig,
        arrays: ArrayRecord,
        exchange: StageExchange,
        train_config: ConfigRecord,
        signers: Roster | None,
        batch_size: int,
    ) -> None:
        self.num_users = config.users + config.canaries
        self.config = config
        self.arrays = arrays
        self.layout = ArrayLayout.of(arrays)
        self.flat = self.layout.flatten(arrays)
        self.start = self.flat.copy()
        self.canaries = config.canary_users(self.layout.size)
        self.train_config = train_config
        self.mechanism: Mechanism = config.mechanism()
        aggregator = section_aggregator(
            config,
            per_round=config.per_round,
            seed=config.seed,
            party_noise=self.mechanism.party_noise,
        )
        if isinstance(aggregator, SecureAggregator):
            aggregator.check_dimension(self.layout.size)
        warn_if_swamped(self.mechanism, dimension=self.layout.size, per_round=config.per_round)
        self.records: list[RoundRecord] = []
        self.remote = FedAvgRound(
            exchange,
            aggregator,
            self,
            self._aggregate,
            self.layout.size,
            batch_size,
            signers,
            config.overlap_rounds,
        )

    def model_fields(self, r: int) -> dict[str, Any]:
        """The app's arrays and training configuration, and the mechanism the nodes clip with."""
        m = self.mechanism
        return {
            ARRAYS: self.arrays,
            CONFIG: self.train_config,
            "clip": "" if m.clip is None else float(m.clip),
            "mechanism": m.name,
            "noise_multiplier": "" if m.noise_multiplier is None else float(m.noise_multiplier),
        }

    def update(self, reply: Record) -> tuple[NDArray[np.float32], float]:
        """The app's returned arrays minus the model sent, each node of weight 1."""
        return (self.layout.flatten(reply[ARRAYS]) - self.flat).astype(np.float32), 1.0

    def _aggregate(self, r: int, updates: Updates, weights: dict[int, float]) -> AggregateOutcome:
        """The plaintext round: the mechanism's clipping, then the aggregator."""
        prepared, equal = self.mechanism.prepare(updates, weights)
        return self.remote.aggregator.aggregate(
            r,
            prepared,
            equal,
            batch_size=self.remote.batch_size,
            rng=round_rng(self.config.seed, r, _PROTOCOL),
        )

    def run_round(self, ctx: RoundContext) -> RoundResult[RoundRecord]:
        """Train on the selected nodes, aggregate, apply the mechanism, update the arrays."""
        r, users = ctx.round_index, [int(u) for u in ctx.selected]
        started = time.perf_counter()
        outcome = AggregateOutcome((), None, None, 0.0, 0, 0.0)
        nodes = users if self.canaries is None else [u for u in users if u < self.canaries.first]
        if nodes:
            outcome = self.remote.run(r, nodes, self._nodes_ahead(ctx, users))
        if self.canaries is not None:  # the server's own: joined to the sum it unmasked
            outcome = self.canaries.join(outcome, ctx.selected, self.mechanism)
        noise = None
        if outcome.mean_update is not None:
            noise = self.mechanism.accounted_noise(outcome)
            update = self.mechanism.release(outcome.mean_update, len(outcome.aggregated))
            self.arrays = self.layout.unflatten(self.flat + update, base=self.arrays)
            self.flat = self.layout.flatten(self.arrays)
        wrap = outcome.wrap_log_probability
        record = RoundRecord(
            r,
            tuple(users),
            tuple(int(u) for u in outcome.aggregated),
            time.perf_counter() - started,
            outcome.aborted or "",
            float("nan") if noise is None else float(noise),
            float("nan") if wrap is None else float(wrap),
        )
        self.records.append(record)
        self.remote.exchange.log(event="round", **record.fields())
        return RoundResult(np.asarray(outcome.aggregated, dtype=np.intp), record)

    def _nodes_ahead(self, ctx: RoundContext, selected: list[int]) -> SelectAhead | None:
        """The loop's next selection for overlapped rounds, its canaries left to the server."""
        ahead, canaries = ctx.ahead, self.canaries
        if ahead is None or canaries is None:
            return ahead
        joined = [u for u in selected if u >= canaries.first]

        def nodes(aggregating: Sequence[int]) -> NDArray[np.intp] | None:
            drawn = ahead([*aggregating, *joined])
            return None if drawn is None else drawn[drawn < canaries.first]

        return nodes

    def epsilon_hat(self, delta: float) -> dict[str, float] | None:
        """The canaries' estimate from the arrays' change over the run (None without)."""
        if self.canaries is None:
            return None
        change = self.flat - self.start
        return self.canaries.estimate(change, delta, self.config.seed).fields()


class PrivateFedAvg:
    """The server workflow (see the module docstring).

    Parameters
    ----------
    config : PrivateFedAvgConfig
        Selection, secure aggregation and DP.
    stage_timeout : float, optional
        Seconds a stage waits for the nodes' replies (a node that does not answer dropped out;
        default: 60 s plus 2 s a node selected a round).
    node_wait : float, optional
        Seconds to wait for ``config.users`` nodes (default: 60 s plus 0.5 s a node).
    on_event : callable, optional
        Called with every event as it is logged (stages, dropouts, rounds, ``privacy``).

    Attributes
    ----------
    signers : Roster or None
        The federation's public keys, from ``config.roster``: nodes must sign their identity,
        and every secure round runs the survivor-list consistency check.
    """

    def __init__(
        self,
        config: PrivateFedAvgConfig,
        *,
        stage_timeout: float | None = None,
        node_wait: float | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.config = config.validate()
        default = 60.0 + 2.0 * self.config.per_round
        self.stage_timeout = default if stage_timeout is None else float(stage_timeout)
        self.node_wait = 60.0 + 0.5 * config.users if node_wait is None else float(node_wait)
        self.on_event = on_event
        self.signers = Roster.from_file(config.roster) if config.roster else None

    def start(self, grid: Any, initial_arrays: ArrayRecord, **options: Any) -> PrivateFedAvgResult:
        """Wait for the nodes on ``grid`` (a ``flwr.serverapp.Grid``), then :meth:`run`.

        ``options`` are :meth:`run`'s (``train_config``, ``evaluate_fn``, ``run_dir``).

        Raises
        ------
        RosterError
            If fewer than ``config.users`` nodes answered within ``node_wait`` seconds, or a
            node claims a user outside ``0 .. users - 1``: never a run on a partial federation.
        """
        from fedprivacy.flower.messaging.grid import GridTransport, discover_roster

        roster, refused = discover_roster(
            grid,
            self.config.users,
            wait=self.node_wait,
            timeout=self.stage_timeout,
            keys=self.signers,
            wire=MOD_WIRE,
        )
        RosterError.check(roster, self.config.users, self.node_wait, refused)
        transport = GridTransport(grid, roster, self.stage_timeout, MOD_WIRE)
        return self.run(transport, initial_arrays, roster=roster, **options)

    def run(
        self,
        transport: Transport,
        initial_arrays: ArrayRecord,
        *,
        train_config: Mapping[str, Any] | None = None,
        evaluate_fn: EvaluateFn | None = None,
        run_dir: str | Path | None = None,
        roster: dict[int, int] | None = None,
    ) -> PrivateFedAvgResult:
        """Run ``config.rounds`` rounds over ``transport``.

        Parameters
        ----------
        transport : Transport
            Reaches the nodes (:class:`~fedprivacy.flower.messaging.grid.GridTransport`, or
            :class:`~fedprivacy.flower.dropin.app_transport.ClientAppTransport` in this process).
        initial_arrays : flwr.app.ArrayRecord
            The app's initial model.
        train_config : mapping, optional
            The app's own training configuration, sent to its train function with the model
            (``lr``, local epochs, ...), as Flower's strategies send ``train_config``.
        evaluate_fn : callable, optional
            ``evaluate_fn(round, arrays)`` -> metrics (a mapping) or None: the app's own
            evaluation of the global model after each round (rounds count from 1, as Flower's).
        run_dir : str or Path, optional
            Where to write the run directory.
        roster : dict of int to int, optional
            User -> Flower node id (recorded in the result).
        """
        config = self.config
        exchange = StageExchange(transport, self.on_event)
        settings = ConfigRecord(dict(train_config or {}))
        selector = config.selector()
        batch = unit_size(selector)  # a batch of T, a partition group, or 1
        algorithm = _RemoteFedAvg(config, initial_arrays, exchange, settings, self.signers, batch)
        layout = algorithm.remote.draw_layout(config.users)  # the nodes' own batches
        if layout is not None:
            use_layout(selector, layout)
        live = LiveNodes(config.users, transport.users)
        exchange.on_silent = lambda users: live.gone.update(users)
        availability = CanaryAvailability(live, config.canaries) if config.canaries else live
        ledger = ParticipationLedger(selector.num_users)
        if config.epsilon_budget is not None:  # the server's filter (each node has its own)
            selector, _ = budget_filter(
                selector,
                ledger,
                config.epsilon_budget,
                config.target_delta,
                algorithm.mechanism,
                lambda: algorithm.records,
            )
        result = PrivateFedAvgResult(
            config,
            algorithm.arrays,
            algorithm.records,
            ledger,
            exchange.events,
            dict(roster or {}),
            authenticated=self.signers is not None,
            # who is live is the nodes' own business, not the models' observers': a random
            # selection among them is not a uniform sample of all users
            hidden=hidden_selection(selector, False, everyone_available=False),
        )

        def after_round(_: RoundResult[RoundRecord]) -> None:
            result.arrays = algorithm.arrays
            r = ledger.rounds - 1
            assert loop.view is not None  # the loop's live audit, updated before the callbacks
            exchange.log(round=r, event="privacy", **result.live_privacy(loop.view))
            metrics = None if evaluate_fn is None else evaluate_fn(r + 1, algorithm.arrays)
            if metrics is not None:
                result.evaluate_metrics_serverapp[r + 1] = dict(metrics)
                exchange.log(round=r, event="evaluate", **dict(metrics))

        loop: FederatedRun[RoundRecord] = FederatedRun(
            selector,
            availability,
            algorithm,
            selection_rng=lambda t: round_rng(config.seed, t, _SELECTION),
            ledger=ledger,
            callbacks=(after_round,),
            live_audit=True,
        )
        loop.run(config.rounds)
        result.epsilon_hat = algorithm.epsilon_hat(config.target_delta)
        if run_dir is not None:
            result.write(Path(run_dir))
        return result
