"""Aggregation of local updates: a plaintext path and the secure aggregation protocol.

Both paths compute the same thing, bit for bit: every aggregated user ``u`` encodes
``[w_u * delta_u, w_u]`` with the same :class:`~fedprivacy.crypto.fixed_point.FixedPointCodec`
and the same rounding randomness, the encodings are summed modulo ``2**bits`` and the sum is
decoded. The plaintext path sums the encodings directly; the secure path runs SecAgg(+) between
the users and the server (:func:`fedprivacy.secagg.driver.run_round`), so the server only learns
the sum. The new global model is ``x + sum_u w_u delta_u / sum_u w_u``, which is eq. (2) of the
Multi-RoundSecAgg paper (the weighted mean of the aggregated local models) written on updates.

Entries of an update beyond ``clip`` are clipped (element-wise) before encoding in both paths,
and the number of clipped entries is reported.

Every aggregator is built from one :class:`AggregatorOptions` by its class's
:meth:`Aggregator.from_options`, which is how :data:`fedprivacy.fl.aggregators.AGGREGATORS` (the
registry of aggregators by name) builds the one a configuration asks for.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import ParameterError

if TYPE_CHECKING:
    from fedprivacy.dp.party_noise import PartyNoise


@dataclass(frozen=True)
class AggregateOutcome:
    """What the server obtained in one round.

    Attributes
    ----------
    aggregated : tuple of int
        The users whose updates are in the aggregate (empty if nothing was aggregated).
    mean_update : numpy.ndarray or None
        ``sum_u w_u delta_u / sum_u w_u`` (float64), or ``None`` if nothing was aggregated.
    weighted_sum : numpy.ndarray or None
        ``sum_u w_u delta_u``: what the server observes (the input of the reconstruction attack).
    total_weight : float
        ``sum_u w_u``.
    clipped_entries : int
        Entries clipped to ``[-clip, clip]`` before encoding, over all aggregated users.
    seconds : float
        Wall-clock time of the aggregation (encoding, protocol, decoding).
    aborted : str or None
        Why the protocol aborted (secure path only).
    noise_multiplier : float or None
        With distributed DP: the noise multiplier of the noise really in the sum (the parties
        that were aggregated; :meth:`~fedprivacy.dp.party_noise.RoundNoise.noise_multiplier`).
    wrap_log_probability : float or None
        With distributed DP: log of a bound on the probability that the noisy sum wrapped.
    client_seconds, server_seconds : float
        Secure path: the mean computation time of the clients that took part, and the server's.
    connectivity : str
        Secure path: ``"shrunk"`` when the batch policy removed users to keep the aggregated set
        connected in the neighbour graph, ``"aborted"`` when that (or a disconnected set) ended
        the round, else empty; ``connectivity_removed`` counts the users removed.
    """

    aggregated: tuple[int, ...]
    mean_update: NDArray[np.float64] | None
    weighted_sum: NDArray[np.float64] | None
    total_weight: float
    clipped_entries: int
    seconds: float
    aborted: str | None = None
    noise_multiplier: float | None = None
    wrap_log_probability: float | None = None
    client_seconds: float = 0.0
    server_seconds: float = 0.0
    connectivity: str = ""
    connectivity_removed: int = 0


ENCODINGS = ("fixed-point", "float")


@dataclass(frozen=True)
class AggregatorOptions:
    """What a configuration says about aggregation; every aggregator is built from one.

    A class's :meth:`Aggregator.from_options` takes what it uses and refuses what it cannot
    honour (the paths that sum in the clear refuse ``protocol_dropout`` and ``party_noise``).

    Attributes
    ----------
    clip, per_round, bits, seed
        As in :class:`Aggregator`.
    degree : int or None
        SecAgg+ neighbour count, or ``None`` for the default graph (secure path; see
        :func:`~fedprivacy.secagg.params.round_degree`).
    protocol_dropout : float
        Probability that a selected user drops during the protocol (secure path only).
    batch_policy : str
        ``atomic``, ``round`` or ``partial`` (secure path).
    party_noise : PartyNoise or None
        Distributed DP, which the parties add inside secure aggregation (secure path only).

    Examples
    --------
    >>> options = AggregatorOptions(clip=1.0, per_round=4, bits=32, seed=0)
    >>> type(PlaintextAggregator.from_options(options)).__name__
    'PlaintextAggregator'
    >>> from dataclasses import replace
    >>> FloatAggregator.from_options(replace(options, protocol_dropout=0.1))
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: protocol_dropout: applies to the secure path only (--secagg)
    """

    clip: float
    per_round: int
    bits: int
    seed: int
    degree: int | None = None
    protocol_dropout: float = 0.0
    batch_policy: str = "atomic"
    party_noise: PartyNoise | None = None


def rounding_rng(seed: int, round_index: int, user: int) -> np.random.Generator:
    """The stochastic-rounding randomness of ``user`` in ``round_index`` (same on both paths)."""
    return np.random.default_rng([seed, round_index, user, 0x51A6])


class Aggregator(ABC):
    """Combines the updates of the selected users into the server's aggregate.

    Parameters
    ----------
    clip : float
        Bound on the absolute value of every entry of ``w_u * delta_u``; larger entries are
        clipped. Weights must lie in ``(0, 1]``.
    per_round : int
        ``K``, the most users aggregated in one round (fixes the codec's scale).
    bits : int
        The encoding works modulo ``2**bits`` (8 to 64).
    seed : int
        Seed of the rounding randomness.
    """

    #: The name the class is registered under in :data:`fedprivacy.fl.aggregators.AGGREGATORS`.
    name: ClassVar[str]
    #: Whether the class sums a fixed-point encoding, whose range needs a finite ``clip``.
    encodes: ClassVar[bool] = True

    def __init__(self, clip: float, per_round: int, bits: int, seed: int) -> None:
        unbounded = clip == math.inf and not self.encodes
        if not (isinstance(clip, int | float) and clip > 0 and (np.isfinite(clip) or unbounded)):
            raise ParameterError("update_clip", f"must be a finite positive number, got {clip!r}")
        k = require_int("per_round", per_round, minimum=1)
        self.clip = float(clip)
        # the weight entry (at most 1) is encoded with the same codec
        self.codec = FixedPointCodec.for_sum(1.0 if unbounded else max(self.clip, 1.0), k, bits)
        self.seed = int(seed)

    @classmethod
    def from_options(cls, options: AggregatorOptions) -> Self:
        """The aggregator ``options`` describe (default: a path that sums in the clear).

        Raises
        ------
        ParameterError
            Naming ``dp`` or ``protocol_dropout``: options only the secure path honours.
        """
        if options.party_noise is not None:
            raise ParameterError(
                "dp", "distributed DP is added inside secure aggregation (--secagg)"
            )
        if options.protocol_dropout:
            raise ParameterError("protocol_dropout", "applies to the secure path only (--secagg)")
        return cls(options.clip, options.per_round, options.bits, options.seed)

    def _prepare(
        self, deltas: Mapping[int, NDArray[np.floating]], weights: Mapping[int, float]
    ) -> tuple[dict[int, NDArray[np.float64]], int]:
        clipped = 0
        out: dict[int, NDArray[np.float64]] = {}
        for u, d in deltas.items():
            w = float(weights[u])
            if not 0.0 < w <= 1.0:
                raise ParameterError("weights", f"must lie in (0, 1], user {u} has {w}")
            v = np.asarray(d, dtype=np.float64)
            over = np.abs(v * w) > self.clip
            if over.any():
                clipped += int(np.count_nonzero(over))
                # two ulps inside, so that (v / w) * w never rounds above the codec's clip
                bound = np.nextafter(np.nextafter(self.clip / w, 0.0), 0.0)
                v = np.clip(v, -bound, bound)
            out[u] = v
        return out, clipped

    def clip_update(
        self, delta: NDArray[np.floating], weight: float
    ) -> tuple[NDArray[np.float64], int]:
        """One user's update as the aggregator encodes it: clipped, and the entries clipped.

        What a user of a deployment computes for itself before masking (see
        :mod:`fedprivacy.flower`); :meth:`aggregate` does the same for every user.
        """
        out, clipped = self._prepare({0: delta}, {0: weight})
        return out[0], clipped

    @abstractmethod
    def aggregate(
        self,
        round_index: int,
        deltas: Mapping[int, NDArray[np.floating]],
        weights: Mapping[int, float],
        *,
        batch_size: int = 1,
        rng: np.random.Generator | None = None,
    ) -> AggregateOutcome:
        """Aggregate the updates of the users in ``deltas``.

        Parameters
        ----------
        round_index : int
            The round (binds the protocol messages and the rounding randomness).
        deltas : mapping of int to numpy.ndarray
            Each selected user's update ``x_u - x`` (all of the same length).
        weights : mapping of int to float
            Each user's weight ``w_u`` in ``(0, 1]``.
        batch_size : int
            ``T`` of batch partitioning (secure path: only whole batches are aggregated).
        rng : numpy.random.Generator, optional
            Simulation randomness of the protocol (dropouts); unused by the plaintext path.

        Returns
        -------
        AggregateOutcome
        """


class _ClearAggregator(Aggregator):
    """The paths that sum in the clear: timing, the empty round and clipping done once here."""

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
        started = time.perf_counter()
        users = sorted(deltas)
        if not users:
            return AggregateOutcome((), None, None, 0.0, 0, 0.0)
        values, clipped = self._prepare(deltas, weights)
        total = self._total(round_index, users, values, weights)
        return outcome_of(tuple(users), total, clipped, time.perf_counter() - started)

    @abstractmethod
    def _total(
        self,
        round_index: int,
        users: list[int],
        values: dict[int, NDArray[np.float64]],
        weights: Mapping[int, float],
    ) -> NDArray[np.float64]:
        """``[sum_u w_u delta_u, sum_u w_u]`` of the (clipped) ``values``."""


class PlaintextAggregator(_ClearAggregator):
    """Sums the fixed-point encodings in the clear: the result the secure path decodes."""

    name = "plaintext"

    def _total(
        self,
        round_index: int,
        users: list[int],
        values: dict[int, NDArray[np.float64]],
        weights: Mapping[int, float],
    ) -> NDArray[np.float64]:
        acc: NDArray[np.uint64] | None = None
        for u in users:
            w = float(weights[u])
            enc = self.codec.encode(
                np.append(values[u] * w, w), rounding_rng(self.seed, round_index, u)
            ).astype(np.uint64)
            acc = enc if acc is None else acc + enc  # uint64 wraps modulo 2**64 ⊇ 2**bits
        assert acc is not None
        total: NDArray[np.float64] = self.codec.decode_sum(acc, len(users))
        return total


class FloatAggregator(_ClearAggregator):
    """The exact weighted mean in float64, without the fixed-point encoding.

    For accuracy studies where the encoding does not matter (its resolution is ``1 / scale``,
    about ``7e-9`` for 32 bits and ``K = 12``) and its cost would dominate a round on a GPU. It
    clips like the other paths, so it differs from :class:`PlaintextAggregator` only by the
    encoding's stochastic rounding; it is not what the secure path computes bit for bit. Only
    this path takes ``clip = inf`` (no clipping), which is how ULDP-FL sums its silos' noised
    contributions by default (:meth:`fedprivacy.uldp.methods.MethodRunner.sum_silos`).

    Examples
    --------
    >>> agg = FloatAggregator(math.inf, per_round=2, bits=32, seed=0)
    >>> out = agg.aggregate(1, {0: np.array([3.0, -1.0]), 1: np.array([5.0, 1.0])}, {0: 1, 1: 1})
    >>> out.weighted_sum.tolist(), out.clipped_entries
    ([8.0, 0.0], 0)
    >>> PlaintextAggregator(math.inf, per_round=2, bits=32, seed=0)
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: update_clip: must be a finite positive number, got inf
    """

    name = "float"
    encodes = False

    def _total(
        self,
        round_index: int,
        users: list[int],
        values: dict[int, NDArray[np.float64]],
        weights: Mapping[int, float],
    ) -> NDArray[np.float64]:
        acc = np.zeros(values[users[0]].shape[0] + 1, dtype=np.float64)
        for u in users:
            w = float(weights[u])
            acc[:-1] += values[u] * w
            acc[-1] += w
        return acc


def outcome_of(
    users: Sequence[int], total: NDArray[np.float64], clipped: int, seconds: float
) -> AggregateOutcome:
    """The outcome of a weighted sum ``total`` whose last entry is the total weight."""
    weight = float(total[-1])
    s = np.asarray(total[:-1], dtype=np.float64)
    if weight <= 0:
        raise ParameterError("weights", "the decoded total weight is not positive")
    return AggregateOutcome(tuple(int(u) for u in users), s / weight, s, weight, clipped, seconds)
