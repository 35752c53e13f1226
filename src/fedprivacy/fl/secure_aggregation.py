"""The secure path of aggregation: the SecAgg(+) protocol among the selected users every round.

:class:`SecureAggregator` computes, bit for bit, what
:class:`~fedprivacy.fl.aggregation.PlaintextAggregator` computes (the module docstring of
:mod:`fedprivacy.fl.aggregation` says how), but the server only learns the sum. A round starts
with :meth:`SecureAggregator.plan_round` (parameters, batch policy, distributed-DP noise) and ends
with :meth:`SecureAggregator.finish_round`; :meth:`SecureAggregator.aggregate` runs the protocol in
this process between the two, a deployment (:mod:`fedprivacy.flower`) runs it over the network.
It is registered as ``secagg`` in :data:`fedprivacy.fl.aggregators.AGGREGATORS`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Self

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.signing import SigningKey
from fedprivacy.dp.party_noise import PartyNoise, RoundNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import (
    AggregateOutcome,
    Aggregator,
    AggregatorOptions,
    outcome_of,
    rounding_rng,
)
from fedprivacy.participation.layout import BatchLayout
from fedprivacy.secagg.driver import Stage, run_round
from fedprivacy.secagg.errors import (
    DisconnectedSetError,
    ProtocolViolationError,
    RoundAbortedError,
    SecAggError,
)
from fedprivacy.secagg.multiround import (
    RoundObserver,
    aggregation_policy,
    parse_batch_policy,
    ring_block,
    sample_dropouts,
)
from fedprivacy.secagg.params import (
    MIN_PARTICIPANTS,
    MIN_THRESHOLD,
    SecAggParameters,
    round_degree,
)
from fedprivacy.secagg.result import AggregationResult
from fedprivacy.secagg.server import AggregationPolicy, SecAggServer

__all__ = ["SecureAggregator", "SecureRoundPlan"]


@dataclass(frozen=True)
class SecureRoundPlan:
    """What the server fixes before a secure round (:meth:`SecureAggregator.plan_round`).

    Attributes
    ----------
    params : SecAggParameters
        The round's public parameters.
    policy : callable
        The batch policy: maps the users whose inputs arrived to the set aggregated.
    removed : list of int
        Filled by ``policy``: users removed to keep the aggregated set connected.
    noise : RoundNoise or None
        Distributed DP: each party's noise in this round.
    started : float
        ``time.perf_counter()`` when the round started.
    """

    params: SecAggParameters
    policy: AggregationPolicy
    removed: list[int]
    noise: RoundNoise | None
    started: float


class SecureAggregator(Aggregator):
    """Runs the secure aggregation protocol among the selected users every round.

    Parameters
    ----------
    clip, per_round, bits, seed
        As in :class:`Aggregator`.
    degree : int or None
        SecAgg+ neighbour count (at least 2; ``K - 1`` or more: the complete graph), or ``None``
        for the default (:func:`~fedprivacy.secagg.params.round_degree`: the complete graph up to
        32 parties a round, SecAgg+ with ``O(log K)`` neighbours above). With
        batches (``batch_size > 1`` in :meth:`aggregate`) and the ``atomic`` or ``round`` policy
        the graph is batch-aware (see :func:`~fedprivacy.secagg.multiround.ring_block`).
    protocol_dropout : float
        Probability that a selected user drops during the protocol (before a uniform stage).
    batch_policy : str
        ``atomic``, ``round`` or ``partial`` (see :mod:`fedprivacy.secagg.multiround`).
    party_noise : PartyNoise, optional
        Distributed DP: every party adds discrete Gaussian noise on the encoding's grid before
        masking (:mod:`fedprivacy.dp.party_noise`); weights must then all be 1 and the round is
        unweighted (the count of aggregated users is the protocol's survivor set).
    weighted : bool
        Encode ``[w_u delta_u, w_u]`` (default); false sends ``delta_u`` alone, with every weight
        1, on a codec sized for the clip (selection simulations; always false with
        ``party_noise``).
    batch_ring : bool
        Use the batch-aware SecAgg+ graph (default); false keeps the plain random ring.
    observer : callable, optional
        Called with the round index and the server after every round that ran the protocol
        (completed or aborted), for example to compute :meth:`SecAggServer.view`.
    """

    name = "secagg"

    def __init__(
        self,
        clip: float,
        per_round: int,
        bits: int,
        seed: int,
        *,
        degree: int | None = None,
        protocol_dropout: float = 0.0,
        batch_policy: str = "atomic",
        party_noise: PartyNoise | None = None,
        weighted: bool = True,
        batch_ring: bool = True,
        observer: RoundObserver | None = None,
    ) -> None:
        super().__init__(clip, per_round, bits, seed)
        self.party_noise = party_noise
        self.weighted = weighted and party_noise is None
        if party_noise is not None:  # no weight entry; room for the noise
            self.codec = party_noise.codec(self.clip, per_round, bits)
        elif not weighted:  # no weight entry
            self.codec = FixedPointCodec.for_sum(self.clip, per_round, bits)
        self.batch_ring = batch_ring
        self.observer = observer
        if not 0.0 <= protocol_dropout < 1.0:
            raise ParameterError("protocol_dropout", f"must lie in [0, 1), got {protocol_dropout}")
        parse_batch_policy(batch_policy)
        if degree is not None:
            require_int("degree", degree, minimum=MIN_THRESHOLD)
        self.degree = degree
        self.protocol_dropout = float(protocol_dropout)
        self.batch_policy = batch_policy
        self.session = os.urandom(16)
        self.graph_seed: bytes | None = None
        """The SecAgg+ graph's seed; ``None``: the session id (in this process, where no party
        could grind it). A deployment sets the seed its nodes drew together
        (:mod:`fedprivacy.flower.messaging.joint_draw`)."""
        self.layout: BatchLayout | None = None
        """Where each user sits in the batches; ``None``: by id (batch ``u // T``). A
        deployment sets the layout its nodes drew together, and its selector's."""
        self.scripted_dropouts: Mapping[int, Mapping[int, Stage]] | None = None
        """Replaces the sampled dropouts: round -> user -> the stage before which it drops (the
        dropouts a deployment observed, replayed by its reference simulation)."""

    @classmethod
    def from_options(cls, options: AggregatorOptions) -> Self:
        """The secure aggregator ``options`` describe (every option applies).

        Examples
        --------
        >>> options = AggregatorOptions(clip=1.0, per_round=4, bits=32, seed=0, degree=2)
        >>> SecureAggregator.from_options(options).degree
        2
        """
        return cls(
            options.clip,
            options.per_round,
            options.bits,
            options.seed,
            degree=options.degree,
            protocol_dropout=options.protocol_dropout,
            batch_policy=options.batch_policy,
            party_noise=options.party_noise,
        )

    def check_dimension(self, dimension: int) -> None:
        """Refuse, before any round, updates of ``dimension`` the codec cannot noise well.

        Raises
        ------
        ParameterError
            With distributed DP, if the grid is too coarse for ``dimension`` (names ``bits``).
        """
        if self.party_noise is not None:
            self.party_noise.round_noise(self.codec, self.clip, MIN_THRESHOLD, dimension)

    def plan_round(
        self, round_index: int, users: Sequence[int], dimension: int, batch_size: int = 1
    ) -> SecureRoundPlan:
        """What the server fixes before round ``round_index`` of ``users``: parameters, policy.

        The in-process :meth:`aggregate` and a deployed server (:mod:`fedprivacy.flower`) start
        every secure round here, so both run the protocol with the same parameters.
        """
        started = time.perf_counter()
        users = sorted(int(u) for u in users)
        degree = round_degree(self.degree, len(users), batch_size, self.protocol_dropout)
        block = ring_block(batch_size, self.batch_policy, degree)
        params = SecAggParameters.create(
            self.session,
            round_index,
            users,
            dimension,
            self.codec,
            weighted=self.weighted,
            degree=degree,
            graph_seed=self.session if self.graph_seed is None else self.graph_seed,
            ring_block=block if self.batch_ring else None,
            positions=self._positions(users, batch_size),
        )
        removed: list[int] = []
        policy = aggregation_policy(
            params,
            batch_size,
            self.batch_policy,
            on_shrink=lambda before, after: removed.append(len(before) - len(after)),
        )
        noise = None
        if self.party_noise is not None:
            noise = self.party_noise.round_noise(
                self.codec, self.clip, params.threshold, dimension, parties=len(users)
            )
        return SecureRoundPlan(params, policy, removed, noise, started)

    def _positions(self, users: Sequence[int], batch_size: int) -> tuple[int, ...]:
        """The users' places in the drawn layout, where the round has batches (else none)."""
        if self.layout is None or batch_size == 1:
            return ()
        return tuple(self.layout.position[u] for u in sorted(users))

    def client_arguments(self, plan: SecureRoundPlan, user: int, weight: float) -> dict[str, Any]:
        """The keyword arguments of ``user``'s :meth:`SecAggClient.masked_input` in ``plan``.

        The weight (weighted rounds), the rounding randomness (:func:`rounding_rng`) and the
        distributed-DP noise: what a client computes for itself in a deployment.
        """
        kw: dict[str, Any] = {
            "rng": rounding_rng(self.seed, plan.params.round_index, int(user)),
        }
        if self.weighted:
            kw["weight"] = float(weight)
        if plan.noise is not None:
            kw["noise"] = plan.noise.draw
        return kw

    def finish_round(
        self,
        plan: SecureRoundPlan,
        result: AggregationResult | SecAggError,
        clipped: int,
        *,
        client_seconds: float = 0.0,
        server_seconds: float = 0.0,
    ) -> AggregateOutcome:
        """The round's outcome from the protocol's result (or the error that aborted it).

        Any :class:`~fedprivacy.secagg.errors.SecAggError` that ended the protocol (too few
        users, a disconnected set, unrecoverable secrets, a violation) gives an aborted round:
        nothing aggregated, nothing for the ledger, the reason in ``aborted``.
        """
        removed = sum(plan.removed)
        if not isinstance(result, SecAggError) and result.aggregated and result.total_weight <= 0:
            result = ProtocolViolationError(
                "the unmasked total weight is not positive: the masks did not cancel (the "
                "parties masked with different models, or one deviated)"
            )
        if isinstance(result, SecAggError):
            lost = "aborted" if plan.removed or isinstance(result, DisconnectedSetError) else ""
            seconds = time.perf_counter() - plan.started
            reason = str(result)
            if not isinstance(result, RoundAbortedError):
                reason = (
                    f"round {plan.params.round_index} aborted: {type(result).__name__}: {reason}"
                )
            return AggregateOutcome(
                (),
                None,
                None,
                0.0,
                0,
                seconds,
                reason,
                connectivity=lost,
                connectivity_removed=removed,
            )
        if result.aggregated:
            total = np.append(result.sum, result.total_weight)
            out = outcome_of(
                tuple(result.aggregated), total, clipped, time.perf_counter() - plan.started
            )
        else:
            out = AggregateOutcome((), None, None, 0.0, clipped, time.perf_counter() - plan.started)
        out = replace(
            out,
            client_seconds=client_seconds,
            server_seconds=server_seconds,
            connectivity="shrunk" if plan.removed else "",
            connectivity_removed=removed,
        )
        noise, n = plan.noise, len(result.aggregated)
        if noise is None or not n:
            return out
        draws = noise.draw.in_sum(result.aggregated, result.excess_removed)
        return replace(
            out,
            noise_multiplier=noise.noise_multiplier(draws),
            wrap_log_probability=noise.wrap_log_probability(n, draws),
        )

    def aggregate(
        self,
        round_index: int,
        deltas: Mapping[int, NDArray[np.floating]],
        weights: Mapping[int, float],
        *,
        batch_size: int = 1,
        rng: np.random.Generator | None = None,
    ) -> AggregateOutcome:
        """See :meth:`Aggregator.aggregate`."""
        users = sorted(deltas)
        if len(users) < MIN_PARTICIPANTS:  # with fewer, the sum would expose a user's update
            reason = f"fewer than {MIN_PARTICIPANTS} users selected" if users else None
            return AggregateOutcome((), None, None, 0.0, 0, 0.0, reason)
        started = time.perf_counter()
        values, clipped = self._prepare(deltas, weights)
        dim = next(iter(values.values())).shape[0]
        if not self.weighted and any(float(weights[u]) != 1.0 for u in users):
            raise ParameterError("weights", "an unweighted secure round needs every weight to be 1")
        plan = self.plan_round(round_index, users, dim, batch_size)
        plan = replace(plan, started=started)
        if self.scripted_dropouts is not None:
            dropouts = dict(self.scripted_dropouts.get(round_index, {}))
        else:
            dropouts = {} if rng is None else sample_dropouts(users, self.protocol_dropout, rng)
        try:
            outcome = run_round(
                plan.params,
                values,
                weights={u: float(weights[u]) for u in users} if self.weighted else None,
                dropouts=dropouts,
                policy=plan.policy,
                rngs={u: rounding_rng(self.seed, round_index, u) for u in users},
                noise=None if plan.noise is None else plan.noise.draw,
                observer=self._observer(round_index),
                signing_keys=_signing_keys(plan),
            )
        except RoundAbortedError as exc:
            return self.finish_round(plan, exc, clipped)
        took_part = [t for u, t in outcome.client_seconds.items() if u not in dropouts]
        return self.finish_round(
            plan,
            outcome.result,
            clipped,
            client_seconds=float(np.mean(took_part)) if took_part else 0.0,
            server_seconds=outcome.server_seconds,
        )

    def _observer(self, round_index: int) -> Callable[[SecAggServer], None] | None:
        observer = self.observer
        if observer is None:
            return None
        return lambda server: observer(round_index, server)


def _signing_keys(plan: SecureRoundPlan) -> dict[int, SigningKey] | None:
    """Fresh signing keys for the consistency check, which the exact noise mode needs."""
    if plan.noise is None or not plan.noise.draw.removable:
        return None
    return {u: SigningKey.generate() for u in plan.params.participants}
