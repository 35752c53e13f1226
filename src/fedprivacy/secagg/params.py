"""Public parameters of one secure aggregation round, and the SecAgg+ neighbour graph."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fedprivacy._validation import require_int
from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.shamir import PRIME
from fedprivacy.errors import ParameterError
from fedprivacy.participation.layout import batches_of
from fedprivacy.secagg.graph import components

SESSION_ID_BYTES = 16
MIN_PARTICIPANTS = 3  # with two users, the sum and one's own input give away the other's
MIN_THRESHOLD = 2  # with t = 1, any single share holder alone could reveal a user's secrets
MAX_USER_ID = PRIME - 2  # a user's Shamir evaluation point is its id + 1, which must be < PRIME
DEFAULT_VECTOR_NAME = "update"


def default_degree(num_users: int) -> int:
    """Neighbour count of the SecAgg+ graph for ``num_users`` users.

    Bell et al. (CCS 2020) need k = O(log n) neighbours per user; we use the even number
    ``2 * ceil(log2(n))`` (at least 4), capped at ``n - 1`` (then the graph is complete).

    Parameters
    ----------
    num_users : int
        Number of participants of the round.

    Returns
    -------
    int
        The degree k.

    """
    n = require_int("num_users", num_users, minimum=MIN_PARTICIPANTS)
    k = max(4, 2 * math.ceil(math.log2(n)))
    return min(k, n - 1)


def batch_degree(num_users: int, block: int) -> int:
    """Neighbour count of the batch-aware SecAgg+ graph (see :func:`harary_neighbours`).

    ``max(default_degree(n), 2 * T + 2)`` capped at ``n - 1``, with ``T`` the block (batch)
    size: then ``k/2 >= T + 1``, so each batch is a clique, the ring edges bridge the gap left by
    any one removed batch, and the union of whole batches is disconnected only if two separate
    runs of removed batches, each at least ``k/2 > T`` users long, cut the ring. The degree
    stays ``O(log n)`` for a fixed ``T``.

    Parameters
    ----------
    num_users : int
        Number of participants of the round.
    block : int
        Batch size ``T`` (at least 1).

    Returns
    -------
    int
        The degree k.

    """
    n = require_int("num_users", num_users, minimum=MIN_PARTICIPANTS)
    t = require_int("block", block, minimum=1)
    return min(max(default_degree(n), 2 * t + 2), n - 1)


COMPLETE_GRAPH_UP_TO = 32
"""Rounds of at most this many parties use the complete graph unless a degree is configured.

Measured (``benchmarks/flower_simulation.py``, benchmarks/RESULTS.md): up to 20 parties a round
SecAgg+ with 8 neighbours costs what the complete graph does; from 40 the complete graph's share
and mask stages cost more (0.79x at 40, 0.77x at 100).
"""


def round_degree(
    configured: int | None, num_users: int, batch_size: int = 1, dropout: float = 0.0
) -> int | None:
    """The SecAgg+ degree of a round of ``num_users`` parties; ``None``: the complete graph.

    A configured degree is capped at ``num_users - 1`` (so ``K - 1`` or more always means the
    complete graph). Without one, rounds of at most :data:`COMPLETE_GRAPH_UP_TO` parties use the
    complete graph and larger ones SecAgg+ with the larger of :func:`batch_degree` (Bell et al.'s
    ``O(log n)``, with each batch of ``batch_size`` a clique) and :func:`~fedprivacy.secagg.
    degree_bound.secure_degree` for the default fraction of corrupt parties and ``dropout``
    (what a node's default policy asks, and what keeps the round correct under that dropout
    rate): a random graph whose guarantee needs that bound on colluders, which the privacy
    report names.

    Parameters
    ----------
    configured : int or None
        The degree from the configuration (``secagg_degree``), or ``None``.
    num_users : int
        Parties of the round.
    batch_size : int
        ``T`` of Multi-RoundSecAgg batches, 1 without batches.
    dropout : float
        The fraction of parties expected to drop out during the protocol.

    Returns
    -------
    int or None
        The degree, or ``None`` for the complete graph.

    Examples
    --------
    >>> round_degree(None, 32), round_degree(None, 40), round_degree(None, 40, batch_size=6)
    (None, 12, 14)
    >>> round_degree(8, 100), round_degree(8, 6), round_degree(99, 100)
    (8, 5, 99)
    >>> round_degree(None, 1000), round_degree(None, 100, dropout=0.3)
    (34, 60)
    """
    from fedprivacy.secagg.degree_bound import DEFAULT_CORRUPT_FRACTION, secure_degree

    if configured is not None:
        return min(configured, num_users - 1)
    if num_users <= COMPLETE_GRAPH_UP_TO:
        return None
    bound = secure_degree(num_users, DEFAULT_CORRUPT_FRACTION, dropout)
    return min(max(batch_degree(num_users, batch_size), bound), num_users - 1)


def _ring_order(
    participants: Sequence[int],
    rng: np.random.Generator,
    block: int | None,
    position: Mapping[int, int] | None,
) -> list[int]:
    """The participants in ring order: uniform, or batch by batch (both orders from ``rng``)."""
    if block is None:
        return [participants[i] for i in rng.permutation(len(participants))]
    groups = batches_of(participants, block, position)
    keys = sorted(groups)
    ring: list[int] = []
    for b in rng.permutation(len(keys)):
        members = sorted(groups[keys[int(b)]])
        ring.extend(members[int(i)] for i in rng.permutation(len(members)))
    return ring


def harary_neighbours(
    participants: Sequence[int],
    degree: int,
    seed: bytes,
    *,
    block: int | None = None,
    position: Mapping[int, int] | None = None,
) -> dict[int, frozenset[int]]:
    """Random Harary graph H(k, n) of SecAgg+ over ``participants``.

    The participants are placed on a ring in a random order and each is joined to the
    ``k/2`` nearest on both sides (for odd ``k`` also to the opposite node when ``n`` is even,
    as in Harary's construction). The order is a public function of ``seed`` (on a
    deployment one the nodes drew together, :mod:`fedprivacy.flower.messaging.joint_draw`), so every
    party computes the same graph.

    With ``block = T`` the ring is *batch-aware*: the participants are grouped by
    ``position[u] // T`` (``u // T`` without ``position``), the batches of
    :class:`~fedprivacy.participation.selectors.BatchPartitionSelector`; the
    groups are placed on the ring in a seeded random order, each group contiguous and in a
    seeded random order within. With ``k/2 >= T - 1`` each batch is then a clique, and removing
    whole batches disconnects the rest only when two separate runs of removed users, each at
    least ``k/2`` long, cut the ring (see :func:`batch_degree` for the degree to use).

    Parameters
    ----------
    participants : sequence of int
        Distinct user ids.
    degree : int
        Neighbours per user, ``1 <= degree <= n - 1``.
    seed : bytes
        Public randomness fixing the ring order.
    block : int or None
        Batch size ``T`` (at least 1) for the batch-aware ring; ``None`` for a uniform order.
    position : mapping of int to int, optional
        Each participant's place in the batch layout
        (:class:`~fedprivacy.participation.layout.BatchLayout`); by default its id.

    Returns
    -------
    dict of int to frozenset of int
        The neighbours of each participant (symmetric, never containing the user itself).

    """
    n = len(participants)
    k = require_int("degree", degree, minimum=1, maximum=max(1, n - 1))
    if block is not None:
        require_int("block", block, minimum=1)
    if k == n - 1:
        return {u: frozenset(set(participants) - {u}) for u in participants}
    order_seed = int.from_bytes(hashlib.sha256(b"fedprivacy/secagg+/graph" + seed).digest(), "big")
    ring = _ring_order(participants, np.random.default_rng(order_seed), block, position)
    neighbours: dict[int, set[int]] = {u: set() for u in participants}
    steps = list(range(1, k // 2 + 1)) + ([n // 2] if k % 2 == 1 and n % 2 == 0 else [])
    for pos, u in enumerate(ring):
        for step in steps:
            v = ring[(pos + step) % n]
            neighbours[u].add(v)
            neighbours[v].add(u)
    return {u: frozenset(vs) for u, vs in neighbours.items()}


@dataclass(frozen=True)
class SecAggParameters:
    """Everything the parties of one round agree on before it starts (all public).

    Parameters
    ----------
    session_id : bytes
        16 random bytes naming the training session; bound into every key and message.
    round_index : int
        The training round; bound into every key and message, so nothing replays across rounds.
    participants : sequence of int
        The users asked to take part (the selection of this round): at least 3 distinct ids in
        ``[0, 2**31 - 3]``.
    threshold : int
        Shares needed to recover a secret (t of Bonawitz et al.), at least 2. Must not exceed the
        number of share holders of a user (``n - 1``, or the degree with SecAgg+).
    dimension : int
        Length of each user's update vector.
    codec : FixedPointCodec
        Fixed-point encoding; its capacity must cover ``len(participants)`` summands.
    weighted : bool
        If true each user also submits a weight ``w`` and the masked vector is ``[w * x, w]``,
        so the server learns only the weighted sum and the total weight.
    degree : int or None
        ``None`` for the complete graph of SecAgg; otherwise the SecAgg+ neighbour count, at
        least 2.
    graph_seed : bytes
        Public randomness of the SecAgg+ graph (ignored for the complete graph).
    vector_name : str
        Name of the aggregated vector, bound into the mask keys.
    ring_block : int or None
        SecAgg+ only: the batch size ``T`` (at least 2) for a batch-aware graph, whose ring
        keeps the users of each batch contiguous (see :func:`harary_neighbours`), so
        that unions of whole batches stay connected; ``None`` for the plain random ring.
    positions : tuple of int
        Each participant's place in the batch layout, in the order of ``participants`` (a
        deployment's layout drawn by the nodes, :mod:`fedprivacy.flower.messaging.joint_draw`);
        empty: the participant's id (batch ``u // T``).

    """

    session_id: bytes
    round_index: int
    participants: tuple[int, ...]
    threshold: int
    dimension: int
    codec: FixedPointCodec
    weighted: bool = False
    degree: int | None = None
    graph_seed: bytes = b""
    vector_name: str = DEFAULT_VECTOR_NAME
    ring_block: int | None = None
    positions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.session_id, bytes) or len(self.session_id) != SESSION_ID_BYTES:
            raise ParameterError("session_id", f"must be {SESSION_ID_BYTES} bytes")
        require_int("round_index", self.round_index, minimum=0, maximum=2**63 - 1)
        users = tuple(int(u) for u in self.participants)
        if len(users) < MIN_PARTICIPANTS:
            raise ParameterError(
                "participants",
                f"need at least {MIN_PARTICIPANTS} users to aggregate securely, got {len(users)}",
            )
        if len(set(users)) != len(users):
            raise ParameterError("participants", "contains duplicate user ids")
        if min(users) < 0 or max(users) > MAX_USER_ID:
            raise ParameterError("participants", f"user ids must lie in [0, {MAX_USER_ID}]")
        object.__setattr__(self, "participants", tuple(sorted(users)))
        require_int("dimension", self.dimension, minimum=1)
        if self.degree is not None:
            require_int("degree", self.degree, minimum=MIN_THRESHOLD, maximum=len(users) - 1)
        if self.ring_block is not None:
            if self.degree is None:
                raise ParameterError("ring_block", "applies to the SecAgg+ graph only (set degree)")
            require_int("ring_block", self.ring_block, minimum=2, maximum=MAX_USER_ID + 1)
        self._check_positions()
        require_int("threshold", self.threshold, minimum=MIN_THRESHOLD, maximum=self.min_holders)
        self.codec.check_capacity(len(users))
        if not self.vector_name:
            raise ParameterError("vector_name", "must not be empty")

    def _check_positions(self) -> None:
        positions = tuple(int(p) for p in self.positions)
        if positions and len(positions) != len(self.participants):
            raise ParameterError("positions", "must hold one place per participant, or none")
        if len(set(positions)) != len(positions):
            raise ParameterError("positions", "places two participants at one position")
        if positions and (min(positions) < 0 or max(positions) > MAX_USER_ID):
            raise ParameterError("positions", f"must lie in [0, {MAX_USER_ID}]")
        object.__setattr__(self, "positions", positions)

    @classmethod
    def create(
        cls,
        session_id: bytes,
        round_index: int,
        participants: Sequence[int],
        dimension: int,
        codec: FixedPointCodec,
        *,
        threshold: int | None = None,
        weighted: bool = False,
        degree: int | None = None,
        graph_seed: bytes = b"",
        ring_block: int | None = None,
        positions: Sequence[int] = (),
    ) -> SecAggParameters:
        """Parameters with the default threshold: a strict majority of each user's sharing group.

        Parameters
        ----------
        session_id, round_index, participants, dimension, codec, weighted, degree, graph_seed
        ring_block, positions
            As in the class (``positions`` in the order of the sorted participants).
        threshold : int, optional
            Defaults to ``max(2, floor((h + 1) / 2) + 1)`` where ``h`` is the number of share
            holders per user: a strict majority of the user and its holders (all ``n`` parties
            for SecAgg). Two disjoint sets of parties cannot both reach it, which the
            survivor-list consistency check against a lying server relies on.

        Returns
        -------
        SecAggParameters
            The validated parameters.

        """
        n = len(set(participants))
        # an odd degree on an odd ring leaves every user one holder short (Harary's H(k, n))
        holders = (n - 1) if degree is None else min(degree - (degree % 2) * (n % 2), n - 1)
        t = threshold if threshold is not None else max(MIN_THRESHOLD, (holders + 1) // 2 + 1)
        return cls(
            session_id=session_id,
            round_index=round_index,
            participants=tuple(participants),
            threshold=t,
            dimension=dimension,
            codec=codec,
            weighted=weighted,
            degree=degree,
            graph_seed=graph_seed,
            ring_block=ring_block,
            positions=tuple(positions),
        )

    @property
    def num_users(self) -> int:
        """Number of participants."""
        return len(self.participants)

    @property
    def vector_length(self) -> int:
        """Length of the masked vector (``dimension``, plus one for the weight if weighted)."""
        return self.dimension + (1 if self.weighted else 0)

    @property
    def complete_graph(self) -> bool:
        """Whether every participant neighbours every other (SecAgg; no graph seed needed)."""
        return self.degree is None or self.degree >= self.num_users - 1

    @property
    def min_holders(self) -> int:
        """Share holders per user (``n - 1`` for the complete graph, ``degree`` or more else)."""
        if self.degree is None:
            return self.num_users - 1
        return min(len(vs) for vs in self.neighbours.values())

    @cached_property
    def neighbours(self) -> dict[int, frozenset[int]]:
        """Each participant's neighbours: the users it exchanges shares and pairwise masks with."""
        degree = self.num_users - 1 if self.degree is None else self.degree  # None: complete
        return harary_neighbours(
            self.participants,
            degree,
            self.graph_seed,
            block=self.ring_block,
            position=self.position,
        )

    @property
    def position(self) -> dict[int, int] | None:
        """Each participant's place in the batch layout; ``None``: its id."""
        if not self.positions:
            return None
        return dict(zip(self.participants, self.positions, strict=True))

    def batches(self, batch_size: int) -> dict[int, frozenset[int]]:
        """The participants grouped by batch of ``batch_size`` in the round's layout."""
        return batches_of(self.participants, batch_size, self.position)

    def components(self, users: Iterable[int]) -> list[frozenset[int]]:
        """Connected components of the neighbour graph restricted to ``users``.

        The pairwise masks of ``users`` cancel only within a component, so a server holding
        their self-mask seeds can unmask the sum of each component separately. The complete
        graph (SecAgg) is answered without a graph traversal.

        Parameters
        ----------
        users : iterable of int
            A subset of the participants (typically the aggregated set ``S``).

        Returns
        -------
        list of frozenset of int
            The components, largest first; a single one exactly when ``G[users]`` is connected,
            none when ``users`` is empty.

        """
        chosen = frozenset(users)
        if self.complete_graph:
            return [chosen] if chosen else []
        return components(self.neighbours, chosen)

    def share_point(self, user: int) -> int:
        """The Shamir evaluation point of ``user`` (its id plus one)."""
        return user + 1
