"""Issue #50, finding 2: the degree a node accepts, against a server that picks the graph.

The server proposes the SecAgg+ degree and (today) the graph's seed. Measured on the real
parameters (``SecAggParameters.neighbours``): with a sparse graph it can grind seeds until its
colluders hold ``t`` of a victim's share holders. The node's floor, computed by the node from
Bell et al.'s bound for the fraction of colluders it assumes, leaves no such seed when the
colluders are fewer than ``t``, and makes a good seed improbable (at most ``2**-40 / n`` a seed)
otherwise.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from scipy.stats import hypergeom

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import PolicyViolationError
from fedprivacy.policy import PartyPolicy
from fedprivacy.secagg.degree_bound import secure_degree
from fedprivacy.secagg.params import SecAggParameters, harary_neighbours, round_degree

VICTIM = 0


def _params(n: int, degree: int | None, seed: bytes) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, n, 32)
    return SecAggParameters.create(bytes(16), 0, range(n), 8, codec, degree=degree, graph_seed=seed)


def _grind(n: int, degree: int, colluders: frozenset[int], tries: int) -> int | None:
    """The first seed whose graph gives ``colluders`` a threshold of the victim's holders."""
    for i in range(tries):
        params = _params(n, degree, i.to_bytes(8, "big"))
        if len(params.neighbours[VICTIM] & colluders) >= params.threshold:
            return i
    return None


def test_the_degree_downgrade_at_ten_parties_is_refused_by_the_default_policy() -> None:
    """Degree 2 (threshold 2) and two colluders: a ground seed surrounds the victim."""
    colluders = frozenset({1, 2})
    found = _grind(10, 2, colluders, 200)
    assert found is not None  # the attack the reviewer ran: the victim's only neighbours
    params = _params(10, 2, found.to_bytes(8, "big"))
    assert params.neighbours[VICTIM] == colluders
    with pytest.raises(PolicyViolationError, match="minimum 9 .the complete graph"):
        PartyPolicy().check_degree(params.min_holders, params.num_users)


def test_a_third_colluding_at_a_hundred_parties() -> None:
    """The default graph (k = 14, t = 8) falls to grinding when 33 of 100 parties collude."""
    n, colluders = 100, frozenset(range(1, 34))
    assert round_degree(None, n) == 14
    assert _grind(n, 14, colluders, 500) is not None
    node = PartyPolicy(corrupt_fraction=1 / 3)  # a node that assumes as much
    floor = secure_degree(n, 1 / 3)
    with pytest.raises(PolicyViolationError, match=f"minimum {floor}"):
        node.check_degree(14, n)
    node.check_degree(floor, n)
    # at the node's floor the threshold exceeds the colluders: no seed can work
    assert _params(n, floor, b"").threshold > len(colluders)
    assert _grind(n, floor, colluders, 50) is None


def test_a_users_neighbours_are_a_uniform_subset_as_the_bound_assumes() -> None:
    """The corrupt neighbours of one user over random rings follow the hypergeometric law."""
    n, k, corrupt = 40, 6, frozenset(range(1, 11))
    counts = np.array(
        [len(harary_neighbours(range(n), k, os.urandom(16))[VICTIM] & corrupt) for _ in range(3000)]
    )
    law = hypergeom(n - 1, len(corrupt), k)
    for c in range(k + 1):  # 3000 draws: within 4 standard deviations of each frequency
        p = law.pmf(c)
        assert abs(np.mean(counts == c) - p) <= 4 * np.sqrt(p * (1 - p) / 3000) + 1e-3, c


def test_the_servers_default_degree_meets_the_default_floor_and_its_dropout_rate() -> None:
    for n in (33, 40, 100, 200, 1000):
        degree = round_degree(None, n)
        assert degree is not None
        PartyPolicy().check_degree(degree, n)
    assert round_degree(None, 100, dropout=0.3) == secure_degree(100, dropout=0.3) == 60
