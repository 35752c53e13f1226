"""The batch-aware SecAgg+ graph: batches contiguous on the ring, unions of batches connected."""

from __future__ import annotations

import hashlib
import itertools
import os

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import ParameterError
from fedprivacy.secagg import SecAggParameters
from fedprivacy.secagg.driver import Stage
from fedprivacy.secagg.graph import components
from fedprivacy.secagg.multiround import aggregation_policy, ring_block, sample_dropouts
from fedprivacy.secagg.params import batch_degree, default_degree, harary_neighbours

CODEC = FixedPointCodec.for_sum(1.0, 200, 32)


def batches_of(users: list[int], t: int) -> list[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for u in users:
        groups.setdefault(u // t, set()).add(u)
    return [frozenset(g) for _, g in sorted(groups.items())]


SMALL = [
    (n, t, k)
    for t in (2, 3, 4)
    for n in range(2 * t, 6 * t + 1, t)
    for k in range(2, n - 1)
    if n >= 4
]


@pytest.mark.parametrize(("n", "t", "k"), SMALL)
def test_the_batch_ring_is_a_symmetric_public_graph_of_the_requested_degree(
    n: int, t: int, k: int
) -> None:
    users = list(range(5 * t, 5 * t + n))  # whole batches, not starting at 0
    g = harary_neighbours(users, k, b"seed", block=t)
    assert g == harary_neighbours(list(reversed(users)), k, b"seed", block=t)
    assert set(g) == set(users)
    for u, vs in g.items():
        assert u not in vs and vs <= set(users)
        assert all(u in g[v] for v in vs)
        assert len(vs) == k or (k % 2 == 1 and len(vs) == k - 1)  # Harary: odd k, odd n


@pytest.mark.parametrize(("n", "t", "k"), SMALL)
def test_each_batch_is_a_clique_once_half_the_degree_reaches_t_minus_1(
    n: int, t: int, k: int
) -> None:
    users = list(range(n))
    g = harary_neighbours(users, k, os.urandom(8), block=t)
    for batch in batches_of(users, t):
        # members are contiguous on the ring, so the farthest two are t - 1 apart
        assert all(batch - {u} <= g[u] for u in batch) == (k // 2 >= t - 1 or len(batch) == 1)


@pytest.mark.parametrize(("n", "t", "k"), SMALL)
def test_removing_one_whole_batch_or_two_when_half_the_degree_exceeds_t_keeps_it_connected(
    n: int, t: int, k: int
) -> None:
    users = list(range(n))
    g = harary_neighbours(users, k, hashlib.sha256(bytes([n, t, k])).digest(), block=t)
    batches = batches_of(users, t)
    everyone = frozenset(users)
    for b in batches:  # the rest is one arc of the ring
        assert len(components(g, everyone - b)) == 1
    if k // 2 > t:  # a gap of one batch is bridged; two adjacent batches leave one arc
        for a, b in itertools.combinations(batches, 2):
            assert len(components(g, everyone - a - b)) == 1


def test_partial_batches_are_grouped_by_user_id_over_t() -> None:
    users = [0, 1, 5, 6, 7, 9, 12, 13, 14, 15, 17]
    g = harary_neighbours(users, 6, b"x", block=4)
    for batch in batches_of(users, 4):
        assert all(batch - {u} <= g[u] for u in batch)


def test_parameters_carry_the_ring_block_and_every_party_gets_the_same_graph() -> None:
    session = os.urandom(16)
    users = list(range(24))
    a = SecAggParameters.create(
        session, 3, users, 2, CODEC, degree=10, graph_seed=b"s", ring_block=4
    )
    b = SecAggParameters.create(
        session, 3, users[::-1], 2, CODEC, degree=10, graph_seed=b"s", ring_block=4
    )
    plain = SecAggParameters.create(session, 3, users, 2, CODEC, degree=10, graph_seed=b"s")
    assert a.ring_block == 4 and a == b and a.neighbours == b.neighbours
    assert a.neighbours == harary_neighbours(users, 10, b"s", block=4)
    assert plain.neighbours == harary_neighbours(users, 10, b"s")  # the plain ring is unchanged
    assert a.min_holders == 10 and a.threshold == 6


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"ring_block": 4}, "ring_block"),  # complete graph: nothing to arrange
        ({"degree": 4, "ring_block": 1}, "ring_block"),
        ({"degree": 4, "ring_block": 0}, "ring_block"),
        ({"degree": 4, "ring_block": 2.5}, "ring_block"),
        ({"degree": 4, "ring_block": True}, "ring_block"),
    ],
)
def test_invalid_ring_blocks_are_rejected_by_name(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        SecAggParameters.create(os.urandom(16), 0, range(8), 2, CODEC, **kwargs)  # type: ignore[arg-type]


def test_harary_rejects_an_invalid_block() -> None:
    with pytest.raises(ParameterError, match="block"):
        harary_neighbours(range(8), 4, b"s", block=0)  # type: ignore[arg-type]


def test_batch_degree_rule() -> None:
    assert batch_degree(24, 4) == 10 == default_degree(24)
    assert batch_degree(24, 6) == 14
    assert batch_degree(120, 6) == 14 == default_degree(120)
    assert batch_degree(120, 10) == 22
    assert batch_degree(8, 4) == 7  # capped at n - 1: the complete graph
    with pytest.raises(ParameterError, match="block"):
        batch_degree(24, 0)


def test_only_whole_batch_policies_with_batches_on_secagg_plus_use_the_batch_ring() -> None:
    assert ring_block(4, "atomic", 10) == 4
    assert ring_block(4, "round", 10) == 4
    assert ring_block(4, "partial", 10) is None
    assert ring_block(1, "atomic", 10) is None
    assert ring_block(4, "atomic", None) is None
    with pytest.raises(ParameterError, match="batch_policy"):
        ring_block(4, "nope", 10)


def connectivity_losses(
    k: int, t: int, degree: int, rounds: int, block: int | None
) -> tuple[int, int]:
    """Rounds the atomic policy shrank, and those it shrank below the threshold (they abort).

    A round counts as lost only if its whole batches alone would have met the threshold. Graph
    level, no cryptography: a user dropping before ``UNMASK`` has not submitted its input.
    """
    rng = np.random.default_rng(2024)
    shrinks: list[int] = []
    lost = 0
    for r in range(rounds):
        first = int(rng.integers(0, 4)) * k  # whole batches of a population of 4K users
        users = list(range(first, first + k))
        params = SecAggParameters.create(
            bytes(16),
            r,
            users,
            1,
            CODEC,
            degree=degree,
            graph_seed=r.to_bytes(4, "big"),
            ring_block=block,
        )
        dropped = sample_dropouts(users, 0.3, rng)
        submitted = frozenset(u for u in users if dropped.get(u, Stage.UNMASK) == Stage.UNMASK)
        choose = aggregation_policy(
            params, t, "atomic", on_shrink=lambda a, b: shrinks.append(len(a))
        )
        before = len(shrinks)
        chosen = choose(submitted)
        start = shrinks[-1] if len(shrinks) > before else 0  # |S0|, when the policy shrank it
        lost += len(chosen) < params.threshold <= start
    return len(shrinks), lost


@pytest.mark.parametrize(("k", "t", "gain"), [(24, 4, 1), (120, 6, 3)])
def test_the_atomic_policy_loses_fewer_rounds_to_connectivity_on_the_batch_ring(
    k: int, t: int, gain: int
) -> None:
    """Same degree (:func:`batch_degree`), same dropouts; deterministic seeds, fixed counts.

    Measured (500 rounds): (24, 4) shrinks 119 -> 40, rounds lost 43 -> 40 (on the batch ring
    only two intact batches opposite on the ring of six disconnect, and those have 8 >= t users;
    most plain-ring disconnections are single batches, below the threshold anyway); (120, 6)
    shrinks 457 -> 457 (mostly dropping a small piece), rounds lost 435 -> 103.
    """
    rounds, degree = 500, batch_degree(k, t)
    plain = connectivity_losses(k, t, degree, rounds, None)
    ring = connectivity_losses(k, t, degree, rounds, t)
    assert plain[1] >= 40  # the measured problem: the plain ring loses rounds
    assert ring[1] * gain <= plain[1] and ring[0] <= plain[0]
    if k == 24:
        assert ring[0] * 2 <= plain[0]
