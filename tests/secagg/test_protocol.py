"""End-to-end correctness of the secure aggregation protocol under dropouts."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.errors import OverflowRiskError, ParameterError
from fedprivacy.secagg import (
    RoundAbortedError,
    SecAggParameters,
    Stage,
    run_round,
)
from fedprivacy.secagg.params import default_degree, harary_neighbours
from fedprivacy.secagg.server import ServerStage


def make_params(
    n: int, d: int, *, bits: int = 32, degree: int | None = None, **kw: object
) -> SecAggParameters:
    codec = FixedPointCodec.for_sum(1.0, n, bits)
    return SecAggParameters.create(
        os.urandom(16),
        7,
        list(range(100, 100 + n)),
        d,
        codec,
        degree=degree,
        graph_seed=b"graph",
        **kw,  # type: ignore[arg-type]
    )


def expected_integers(params, updates, aggregated, seed):  # type: ignore[no-untyped-def]
    """The exact quantised plaintext sum, replaying each client's rounding randomness."""
    total = np.zeros(params.vector_length, dtype=np.int64)
    for u in aggregated:
        total += params.codec.quantize(updates[u], np.random.default_rng([seed, u]))
    return total


def run(params, dropouts, seed, policy=None):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    updates = {u: rng.uniform(-1, 1, params.dimension) for u in params.participants}
    rngs = {u: np.random.default_rng([seed, u]) for u in params.participants}
    outcome = run_round(params, updates, dropouts=dropouts, rngs=rngs, policy=policy)
    return updates, outcome


@pytest.mark.parametrize("seed", range(12))
def test_aggregate_equals_quantised_plaintext_sum_under_random_dropouts(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(3, 12))
    degree = None if seed % 2 == 0 or n < 5 else int(rng.integers(2, n - 1))
    bits = int(rng.choice([20, 32, 48, 64]))
    params = make_params(n, int(rng.integers(1, 300)), bits=bits, degree=degree)
    # drop at most enough users that the threshold can still be met
    spare = params.min_holders - params.threshold
    victims = rng.choice(params.participants, size=int(rng.integers(0, spare + 1)), replace=False)
    dropouts = {int(u): Stage(int(rng.integers(0, 4))) for u in victims}
    try:
        updates, outcome = run(params, dropouts, seed)
    except RoundAbortedError:
        # with a sparse graph a dropout can leave one user short of neighbours: legitimate
        assert degree is not None
        return
    result = outcome.result
    submitted = {u for u in params.participants if dropouts.get(u, Stage.UNMASK) is Stage.UNMASK}
    assert set(result.aggregated) == submitted
    exact = expected_integers(params, updates, result.aggregated, seed)
    np.testing.assert_array_equal(params.codec.decode_integers(result.field_sum), exact)
    plain = np.sum([updates[u] for u in result.aggregated], axis=0)
    bound = len(result.aggregated) / params.codec.scale + 1e-12 * len(result.aggregated)
    assert np.max(np.abs(result.sum - plain)) <= bound


@pytest.mark.parametrize("stage", list(Stage))
def test_dropout_at_each_stage_is_recovered(stage: Stage) -> None:
    params = make_params(8, 50)
    updates, outcome = run(params, {101: stage, 105: stage}, 3)
    result = outcome.result
    if stage is Stage.UNMASK:  # they sent their input before dropping: it is aggregated
        assert 101 in result.aggregated and 105 in result.aggregated
    else:
        assert 101 not in result.aggregated and 105 not in result.aggregated
    exact = expected_integers(params, updates, result.aggregated, 3)
    np.testing.assert_array_equal(params.codec.decode_integers(result.field_sum), exact)


def test_wire_and_in_memory_runs_agree_and_count_bytes() -> None:
    params = make_params(5, 20)
    rng = np.random.default_rng(0)
    updates = {u: rng.uniform(-1, 1, 20) for u in params.participants}
    a = run_round(params, updates, rngs={u: np.random.default_rng(u) for u in updates})
    b = run_round(params, updates, rngs={u: np.random.default_rng(u) for u in updates}, wire=False)
    np.testing.assert_array_equal(a.result.field_sum, b.result.field_sum)
    assert a.wire_bytes > 5 * 20 * 4 and b.wire_bytes == 0


def test_weighted_round_gives_weighted_mean() -> None:
    n, d = 6, 30
    codec = FixedPointCodec.for_sum(1.0, n, 48)
    params = SecAggParameters.create(os.urandom(16), 0, range(n), d, codec, weighted=True)
    rng = np.random.default_rng(5)
    updates = {u: rng.uniform(-1, 1, d) for u in range(n)}
    weights = {u: float(w) for u, w in zip(range(n), rng.uniform(0.1, 1.0, n), strict=True)}
    outcome = run_round(params, updates, weights=weights, dropouts={2: Stage.MASKED_INPUT})
    kept = [u for u in range(n) if u != 2]
    expected = sum(weights[u] * updates[u] for u in kept) / sum(weights[u] for u in kept)
    np.testing.assert_allclose(outcome.result.mean, expected, atol=1e-9)
    assert outcome.result.total_weight == pytest.approx(sum(weights[u] for u in kept), abs=1e-9)


@pytest.mark.parametrize(
    ("stage", "count"),
    [(Stage.ADVERTISE_KEYS, 4), (Stage.SHARE_KEYS, 4), (Stage.MASKED_INPUT, 4), (Stage.UNMASK, 4)],
)
def test_below_threshold_aborts_with_clear_error(stage: Stage, count: int) -> None:
    params = make_params(7, 10)  # threshold 4 of 6 holders
    assert params.threshold == 4
    dropouts = {100 + i: stage for i in range(count)}
    with pytest.raises(RoundAbortedError, match="threshold"):
        run(params, dropouts, 0)


def test_overflow_check_rejects_too_many_summands() -> None:
    codec = FixedPointCodec(clip=1.0, scale=2.0**10, bits=16)
    cap = codec.capacity()  # 2**16 // (2 * 2**10 + 1) = 31
    assert cap == 31
    with pytest.raises(OverflowRiskError, match="summands"):
        SecAggParameters.create(os.urandom(16), 0, range(cap + 1), 3, codec)
    SecAggParameters.create(os.urandom(16), 0, range(cap), 3, codec)


def test_parameter_validation() -> None:
    codec = FixedPointCodec.for_sum(1.0, 10, 32)
    good = {"session_id": os.urandom(16), "round_index": 0, "dimension": 3, "codec": codec}
    with pytest.raises(ParameterError, match="threshold"):
        SecAggParameters(participants=(0, 1, 2), threshold=3, **good)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="duplicate"):
        SecAggParameters(participants=(0, 1, 1), threshold=2, **good)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="session_id"):
        SecAggParameters.create(b"short", 0, range(3), 3, codec)
    with pytest.raises(ParameterError, match="at least 3"):
        SecAggParameters.create(os.urandom(16), 0, [4], 3, codec)


def test_threshold_of_at_least_2_and_at_least_3_participants() -> None:
    """Issue #15, section 3: with t = 1 or two users, one user's view gives the other away."""
    codec = FixedPointCodec.for_sum(1.0, 10, 32)
    good = {"session_id": os.urandom(16), "round_index": 0, "dimension": 3, "codec": codec}
    with pytest.raises(ParameterError, match="threshold"):
        SecAggParameters(participants=(0, 1, 2, 3), threshold=1, **good)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="participants.*at least 3"):
        SecAggParameters.create(os.urandom(16), 0, [4, 9], 3, codec)
    with pytest.raises(ParameterError, match="degree"):
        SecAggParameters.create(os.urandom(16), 0, range(8), 3, codec, degree=1)
    assert SecAggParameters.create(os.urandom(16), 0, range(3), 3, codec).threshold == 2
    assert SecAggParameters.create(os.urandom(16), 0, range(9), 3, codec, degree=2).threshold == 2
    assert SecAggParameters.create(os.urandom(16), 0, range(9), 3, codec).threshold == 5


def test_harary_graph_is_symmetric_regular_and_public() -> None:
    users = list(range(3, 43))
    k = default_degree(len(users))
    g = harary_neighbours(users, k, b"seed")
    assert g == harary_neighbours(users, k, b"seed")
    assert g != harary_neighbours(users, k, b"other")
    for u, vs in g.items():
        assert u not in vs and len(vs) == k
        assert all(u in g[v] for v in vs)


def test_secagg_plus_shares_only_with_neighbours() -> None:
    params = make_params(30, 40, degree=6)
    assert params.min_holders == 6 and params.threshold == 4
    updates, outcome = run(params, {110: Stage.MASKED_INPUT, 120: Stage.UNMASK}, 11)
    exact = expected_integers(params, updates, outcome.result.aggregated, 11)
    np.testing.assert_array_equal(params.codec.decode_integers(outcome.result.field_sum), exact)


def test_policy_excluded_inputs_stay_hidden_and_are_not_aggregated() -> None:
    params = make_params(9, 25)
    keep = frozenset(range(100, 106))
    updates, outcome = run(params, {}, 4, policy=lambda submitted: submitted & keep)
    assert set(outcome.result.aggregated) == keep
    exact = expected_integers(params, updates, sorted(keep), 4)
    np.testing.assert_array_equal(params.codec.decode_integers(outcome.result.field_sum), exact)


def test_aborted_server_produces_nothing() -> None:
    from fedprivacy.secagg import SecAggClient, SecAggServer

    params = make_params(5, 4)
    server = SecAggServer(params)
    clients = {u: SecAggClient(params, u) for u in params.participants}
    for u in list(clients)[:2]:
        server.receive(clients[u].advertise_keys())
    with pytest.raises(RoundAbortedError):
        server.finish_keys()
    assert server.stage is ServerStage.ABORTED
    from fedprivacy.secagg import OutOfOrderError

    with pytest.raises(OutOfOrderError):
        server.finish_unmask()


def test_unrecoverable_secret_aborts_before_asking_for_shares() -> None:
    params = make_params(10, 5, degree=4)
    assert params.threshold == 3
    victim = params.participants[0]
    gone = sorted(params.neighbours[victim])[:2]
    with pytest.raises(RoundAbortedError, match=f"holders of the shares of user {victim}"):
        run(params, dict.fromkeys(gone, Stage.MASKED_INPUT), 0)
