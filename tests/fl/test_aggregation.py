from dataclasses import replace

import numpy as np
import pytest

from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import AggregatorOptions, FloatAggregator, PlaintextAggregator
from fedprivacy.fl.aggregators import (
    AGGREGATORS,
    aggregator_name,
    build_aggregator,
    make_aggregator,
)
from fedprivacy.fl.secure_aggregation import SecureAggregator


def _deltas(rng, users, dim, scale=0.1):
    return {u: rng.normal(0, scale, dim).astype(np.float32) for u in users}


@pytest.mark.parametrize("users", [[0, 1, 2], [2, 5, 7, 9], [0, 1, 2, 3, 4, 5]])
def test_plaintext_and_secure_paths_are_bit_identical(users):
    rng = np.random.default_rng(len(users))
    deltas = _deltas(rng, users, 300)
    weights = {u: float(rng.uniform(0.2, 1.0)) for u in users}
    plain = PlaintextAggregator(1.0, 6, 32, seed=3).aggregate(7, deltas, weights)
    secure = SecureAggregator(1.0, 6, 32, seed=3).aggregate(7, deltas, weights)
    assert plain.aggregated == secure.aggregated == tuple(users)
    assert plain.mean_update is not None and secure.mean_update is not None
    assert np.array_equal(plain.mean_update, secure.mean_update)
    assert plain.total_weight == secure.total_weight


def test_mean_update_matches_the_float_weighted_mean_within_the_resolution():
    rng = np.random.default_rng(0)
    users = [0, 1, 2, 3]
    deltas = _deltas(rng, users, 1000)
    weights = {0: 1.0, 1: 0.5, 2: 0.25, 3: 0.75}
    out = PlaintextAggregator(1.0, 4, 32, seed=0).aggregate(0, deltas, weights)
    exact = sum(weights[u] * deltas[u].astype(np.float64) for u in users) / sum(weights.values())
    resolution = 1.0 / PlaintextAggregator(1.0, 4, 32, seed=0).codec.scale
    assert np.max(np.abs(out.mean_update - exact)) < 8 * resolution
    assert np.max(np.abs(out.mean_update - exact)) > 0  # it really is quantised


def test_rounding_randomness_depends_on_round_and_seed():
    rng = np.random.default_rng(1)
    deltas = _deltas(rng, [0, 1], 500)
    w = {0: 1.0, 1: 1.0}
    a = PlaintextAggregator(1.0, 2, 32, seed=0).aggregate(0, deltas, w).mean_update
    b = PlaintextAggregator(1.0, 2, 32, seed=0).aggregate(0, deltas, w).mean_update
    c = PlaintextAggregator(1.0, 2, 32, seed=0).aggregate(1, deltas, w).mean_update
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_entries_beyond_the_clip_are_clipped_and_counted():
    deltas = {0: np.array([0.5, 3.0, -4.0]), 1: np.array([0.1, 0.2, 0.3])}
    out = PlaintextAggregator(1.0, 2, 32, seed=0).aggregate(0, deltas, {0: 1.0, 1: 1.0})
    assert out.clipped_entries == 2
    assert out.mean_update is not None
    np.testing.assert_allclose(out.mean_update, [0.3, 0.6, -0.35], atol=1e-7)


def test_secure_clipping_matches_plaintext_at_the_clip_boundary():
    deltas = {
        0: np.array([10.0, -10.0, 1.0]),
        1: np.array([1.0, 1.0, -1.0]),
        2: np.array([-0.5, 0.25, 4.0]),
    }
    w = {0: 0.3, 1: 1.0, 2: 0.5}
    p = PlaintextAggregator(1.0, 3, 32, seed=5).aggregate(2, deltas, w)
    s = SecureAggregator(1.0, 3, 32, seed=5).aggregate(2, deltas, w)
    assert np.array_equal(p.mean_update, s.mean_update)


def test_empty_and_single_user_rounds():
    plain = PlaintextAggregator(1.0, 4, 32, seed=0)
    assert plain.aggregate(0, {}, {}).aggregated == ()
    secure = SecureAggregator(1.0, 4, 32, seed=0)
    one = secure.aggregate(0, {3: np.zeros(4)}, {3: 1.0})
    assert one.aggregated == () and one.mean_update is None and one.aborted
    # two users: the sum and either one's own update would give away the other's
    two = secure.aggregate(0, {3: np.zeros(4), 5: np.ones(4)}, {3: 1.0, 5: 1.0})
    assert two.aggregated == () and two.mean_update is None
    assert two.aborted == "fewer than 3 users selected"


def test_atomic_policy_with_protocol_dropout_aggregates_whole_batches_only():
    rng = np.random.default_rng(2)
    users = list(range(12))
    deltas = _deltas(rng, users, 50)
    w = dict.fromkeys(users, 1.0)
    agg = SecureAggregator(1.0, 12, 32, seed=0, protocol_dropout=0.3, batch_policy="atomic")
    seen = 0
    for r in range(6):
        out = agg.aggregate(r, deltas, w, batch_size=3, rng=np.random.default_rng(r))
        batches = {u // 3 for u in out.aggregated}
        for b in batches:
            assert {3 * b, 3 * b + 1, 3 * b + 2} <= set(out.aggregated)
        if out.aggregated:
            seen += 1
            exact = np.mean([deltas[u].astype(np.float64) for u in out.aggregated], axis=0)
            assert np.max(np.abs(out.mean_update - exact)) < 1e-6
    assert seen > 0


def test_invalid_parameters():
    with pytest.raises(ParameterError, match="update_clip"):
        PlaintextAggregator(0.0, 2, 32, seed=0)
    with pytest.raises(ParameterError, match="weights"):
        PlaintextAggregator(1.0, 2, 32, seed=0).aggregate(0, {0: np.zeros(3)}, {0: 1.5})
    with pytest.raises(ParameterError, match="protocol_dropout"):
        make_aggregator(False, clip=1.0, per_round=2, bits=32, seed=0, protocol_dropout=0.1)
    with pytest.raises(ParameterError, match="batch_policy"):
        SecureAggregator(1.0, 2, 32, seed=0, batch_policy="sometimes")


def test_float_aggregation_is_the_exact_weighted_mean_and_clips_like_the_others():
    rng = np.random.default_rng(5)
    users = [1, 4, 6]
    deltas = _deltas(rng, users, 500)
    deltas[4][3] = 3.0  # beyond the clip of 1.0 (weight 0.5 -> 1.5 > 1)
    weights = {1: 1.0, 4: 0.5, 6: 0.8}
    out = make_aggregator(
        False, clip=1.0, per_round=3, bits=32, seed=0, encoding="float"
    ).aggregate(0, deltas, weights)
    assert out.aggregated == (1, 4, 6) and out.clipped_entries == 1
    clipped = {
        u: np.clip(deltas[u].astype(np.float64), -1.0 / weights[u], 1.0 / weights[u]) for u in users
    }
    exact = sum(weights[u] * clipped[u] for u in users) / sum(weights.values())
    assert np.allclose(out.mean_update, exact, rtol=0, atol=1e-12)
    fixed_path = PlaintextAggregator(1.0, 3, 32, seed=0)
    fixed = fixed_path.aggregate(0, deltas, weights)
    # the two paths differ only by the encoding's stochastic rounding
    assert np.max(np.abs(fixed.mean_update - out.mean_update)) < 8 / fixed_path.codec.scale


def test_float_encoding_is_plaintext_only_and_names_are_checked():
    with pytest.raises(ParameterError, match="encoding"):
        make_aggregator(True, clip=1.0, per_round=2, bits=32, seed=0, encoding="float")
    with pytest.raises(ParameterError, match="encoding"):
        make_aggregator(False, clip=1.0, per_round=2, bits=32, seed=0, encoding="int8")


@pytest.mark.parametrize(
    ("secure", "encoding", "cls"),
    [
        (False, "fixed-point", PlaintextAggregator),
        (False, "float", FloatAggregator),
        (True, "fixed-point", SecureAggregator),
    ],
)
def test_secagg_and_encoding_name_a_registered_aggregator(secure, encoding, cls):
    name = aggregator_name(secure, encoding)
    assert AGGREGATORS[name] is cls and cls.name == name
    agg = make_aggregator(secure, clip=1.0, per_round=4, bits=32, seed=0, encoding=encoding)
    assert type(agg) is cls


def test_the_registry_builds_each_aggregator_from_the_options():
    assert AGGREGATORS.names() == ("plaintext", "float", "secagg")
    options = AggregatorOptions(1.0, 4, 32, 5, degree=2, batch_policy="round")
    secure = build_aggregator("secagg", options)
    assert isinstance(secure, SecureAggregator)
    assert (secure.degree, secure.batch_policy, secure.seed) == (2, "round", 5)
    with pytest.raises(
        ParameterError, match=r"^aggregator: must be one of plaintext, float, secagg"
    ):
        build_aggregator("median", options)
    noisy = replace(options, party_noise=PartyNoise(1.0, 1.0))
    with pytest.raises(ParameterError, match="^dp: distributed DP is added inside secure"):
        build_aggregator("plaintext", noisy)
    assert build_aggregator("secagg", noisy).party_noise is not None


def test_a_new_aggregator_is_one_class_and_one_registration():
    class Doubled(FloatAggregator):
        name = "test-doubled"

        def _total(self, round_index, users, values, weights):
            total = super()._total(round_index, users, values, weights)
            total[:-1] *= 2.0
            return total

    deltas = {0: np.array([1.0, -2.0]), 1: np.array([3.0, 0.0])}
    with AGGREGATORS.restoring():
        AGGREGATORS.register(Doubled.name, Doubled)
        agg = build_aggregator("test-doubled", AggregatorOptions(10.0, 2, 32, 0))
        out = agg.aggregate(0, deltas, {0: 1.0, 1: 1.0})
    assert type(agg) is Doubled
    assert np.array_equal(out.mean_update, [4.0, -2.0])  # twice the mean [2, -1]
    assert "test-doubled" not in AGGREGATORS


@pytest.mark.parametrize(
    ("users", "configured", "batch_size", "degree"),
    [
        (32, None, 1, None),  # the complete graph up to 32 parties
        (40, None, 1, 12),  # SecAgg+ above: 2 ceil(log2 40)
        (40, None, 8, 18),  # batch-aware: each batch of 8 a clique, 2T + 2
        (40, 39, 1, 39),  # K - 1 configured: the complete graph at any size
        (40, 6, 1, 6),
    ],
)
def test_the_round_degree_is_the_complete_graph_up_to_32_parties(
    users, configured, batch_size, degree
):
    agg = SecureAggregator(1.0, users, 32, seed=0, degree=configured, batch_policy="atomic")
    plan = agg.plan_round(0, range(users), 20, batch_size=batch_size)
    assert plan.params.degree == degree
    if degree is not None:  # every user's share holders are its neighbours
        assert plan.params.min_holders >= min(degree, users - 1) - 1


def test_the_default_secagg_plus_round_above_32_parties_sums_exactly():
    """What the server unmasks with the default sparse graph is the plaintext sum, bit for bit."""
    rng = np.random.default_rng(4)
    users = list(range(40))
    deltas = _deltas(rng, users, 50)
    weights = dict.fromkeys(users, 1.0)
    plain = PlaintextAggregator(1.0, 40, 32, seed=1).aggregate(0, deltas, weights)
    secure = SecureAggregator(1.0, 40, 32, seed=1).aggregate(0, deltas, weights)
    assert secure.aggregated == tuple(users)
    assert np.array_equal(plain.mean_update, secure.mean_update)
