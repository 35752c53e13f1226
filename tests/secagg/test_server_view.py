"""What the server sees: a masked input that is uniform, and exactly the sum over S unmasked."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.linalg import exact_rank
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.secagg import (
    RoundAbortedError,
    SecAggClient,
    SecAggParameters,
    SecAggServer,
    Stage,
    run_round,
)
from fedprivacy.secagg.messages import MaskedInput
from fedprivacy.secagg.multiround import BatchPolicy, aggregation_policy
from fedprivacy.secagg.server import AggregationPolicy
from fedprivacy.secagg.server_view import ReceivedState, mask_incidence, server_view

BITS, D, ROUNDS = 16, 2000, 12


def masked_inputs_of_user_0(value: float) -> np.ndarray:
    """User 0's masked vectors, as received by the server, over fresh rounds."""
    codec = FixedPointCodec.for_sum(1.0, 3, BITS)
    seen = []
    for r in range(ROUNDS):
        params = SecAggParameters.create(os.urandom(16), r, [0, 1, 2], D, codec)
        server = SecAggServer(params)
        clients = {u: SecAggClient(params, u) for u in range(3)}
        for c in clients.values():
            server.receive(c.advertise_keys())
        rosters = server.finish_keys()
        for u, c in clients.items():
            server.receive(c.share_keys(rosters[u]))
        deliveries = server.finish_shares()
        message = clients[0].masked_input(deliveries[0], np.full(D, value))
        assert isinstance(message, MaskedInput)
        seen.append(message.vector.astype(np.int64))
    return np.concatenate(seen)


def chi_square_p(values: np.ndarray, buckets: int) -> float:
    counts = np.bincount(values, minlength=buckets)
    return float(stats.chisquare(counts).pvalue)


def test_masked_input_is_uniform_for_any_input() -> None:
    zeros = masked_inputs_of_user_0(0.0)
    extreme = masked_inputs_of_user_0(1.0)  # the largest encodable value, a constant vector
    for sample in (zeros, extreme):
        assert sample.max() < 2**BITS
        # top byte and low byte of Z_{2^16} are each uniform on 256 values
        assert chi_square_p(sample >> 8, 256) > 1e-6
        assert chi_square_p(sample & 0xFF, 256) > 1e-6
    # and the two views cannot be told apart
    assert stats.ks_2samp(zeros, extreme).pvalue > 1e-6
    # the unmasked encodings would be trivially distinguishable: the test has power
    codec = FixedPointCodec.for_sum(1.0, 3, BITS)
    plain = codec.encode(np.full(D, 1.0), np.random.default_rng(0)).astype(np.int64)
    assert chi_square_p(plain >> 8, 256) < 1e-6


# ---------------------------------------------------------------------------------------------
# The span the server can unmask (fedprivacy.secagg.server_view), checked in exact arithmetic.


def span_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """rank([A; B]) == rank(A) == rank(B), exactly."""
    both = exact_rank(np.vstack([a, b]))
    return both == exact_rank(a) == exact_rank(b)


@st.composite
def received_states(draw: st.DrawFn) -> ReceivedState:
    """Any graph, any U3 within U2, any reconstructable secrets (a curious server's wishes)."""
    n = draw(st.integers(1, 9))
    users = range(n)
    edges = draw(st.sets(st.tuples(st.sampled_from(users), st.sampled_from(users))))
    graph: dict[int, set[int]] = {u: set() for u in users}
    for u, v in edges:
        if u != v:
            graph[u].add(v)
            graph[v].add(u)
    subset = st.frozensets(st.sampled_from(users))
    shared = draw(subset)
    submitted = frozenset(u for u in draw(subset) if u in shared)
    return ReceivedState(
        submitted,
        shared,
        {u: frozenset(vs) for u, vs in graph.items()},
        seeds=draw(subset),
        mask_keys=draw(subset),
    )


@settings(max_examples=150, deadline=None)
@given(received_states())
def test_components_are_a_basis_of_the_left_null_space(state: ReceivedState) -> None:
    rows, incidence = mask_incidence(state)
    basis = server_view(state).matrix(rows)
    assert not np.any(basis @ incidence)  # every component sum is free of unknown masks
    # and they span the whole left null space: its dimension is |U3| - rank(M)
    assert exact_rank(basis) == len(basis) == len(rows) - exact_rank(incidence)


def check_round(
    params: SecAggParameters, dropouts: dict[int, Stage], policy: AggregationPolicy | None
) -> None:
    """Run the round; the span the server can unmask equals the span of the ledger's record."""
    users = list(params.participants)
    servers: list[SecAggServer] = []
    ledger = ParticipationLedger(len(users))
    updates = {u: np.full(params.dimension, 0.1) for u in users}
    try:
        outcome = run_round(
            params, updates, dropouts=dropouts, policy=policy, observer=servers.append
        )
        ledger.record(list(outcome.result.aggregated))
        assert len(params.components(outcome.result.aggregated)) == 1
    except RoundAbortedError:
        ledger.record([])
    (server,) = servers
    seen = server.view().matrix(users)
    recorded = ledger.matrix()
    recorded = recorded[recorded.any(axis=1)]  # exactly one set per completed round, none else
    assert span_equal(seen, recorded)


@st.composite
def rounds(draw: st.DrawFn, sparse: bool) -> tuple[SecAggParameters, dict[int, Stage]]:
    """Parameters (complete or SecAgg+ graph) and a few dropouts at random stages."""
    n = draw(st.integers(5 if sparse else 3, 14))
    dense = st.one_of(st.none(), st.integers(2, n - 1))
    degree = draw(st.integers(2, 4) if sparse else dense)
    users = list(range(n))
    dropouts = draw(
        st.dictionaries(st.sampled_from(users), st.sampled_from(Stage), max_size=n // 3)
    )
    codec = FixedPointCodec.for_sum(1.0, n, 32)
    params = SecAggParameters.create(
        os.urandom(16), 0, users, 2, codec, degree=degree, graph_seed=os.urandom(8)
    )
    return params, dropouts


@settings(max_examples=40, deadline=None)
@given(rounds(sparse=False), st.sampled_from([None, *BatchPolicy]), st.integers(1, 4))
def test_ledger_records_exactly_what_the_server_can_unmask_under_each_policy(
    round_: tuple[SecAggParameters, dict[int, Stage]],
    policy: BatchPolicy | None,
    batch_size: int,
) -> None:
    params, dropouts = round_
    chooser = None if policy is None else aggregation_policy(params, batch_size, policy)
    check_round(params, dropouts, chooser)


@settings(max_examples=40, deadline=None)
@given(rounds(sparse=True), st.data())
def test_a_server_choosing_any_s_still_unmasks_only_its_sum(
    round_: tuple[SecAggParameters, dict[int, Stage]], data: st.DataObject
) -> None:
    params, dropouts = round_
    users = st.sampled_from(params.participants)
    wanted = data.draw(st.frozensets(users, min_size=params.threshold), label="S")
    check_round(params, dropouts, lambda submitted: submitted & wanted)
