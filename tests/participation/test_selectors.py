from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.participation.family import ExplicitFamilySelector
from fedprivacy.participation.selectors import (
    SCHEMES,
    SELECTORS,
    BatchPartitionSelector,
    RandomSelector,
    Selector,
    UserPartitionSelector,
    WeightedRandomSelector,
    make_selector,
)

N, K, T = 24, 6, 2

FACTORIES: dict[str, Callable[[], Selector]] = {
    "random": lambda: RandomSelector(N, K),
    "weighted-random": lambda: WeightedRandomSelector(N, K),
    "partition": lambda: UserPartitionSelector(N, K),
    "multiround-uniform": lambda: BatchPartitionSelector(N, K, T),
    "multiround-fair": lambda: BatchPartitionSelector(N, K, T, fairness=True),
    "multiround-authors": lambda: BatchPartitionSelector(N, K, T, True, "authors"),
    "explicit-uniform": lambda: ExplicitFamilySelector.batch_partition(N, K, T),
    "explicit-fair": lambda: ExplicitFamilySelector.batch_partition(N, K, T, fairness=True),
    "explicit-authors": lambda: ExplicitFamilySelector.batch_partition(
        N, K, T, fairness=True, fairness_rule="authors"
    ),
}


def _random_inputs(
    rng: np.random.Generator, p: float, n: int = N
) -> tuple[NDArray[np.bool_], NDArray[np.int64]]:
    available = rng.random(n) >= p
    frequency = rng.integers(0, 4, size=n).astype(np.int64)
    return available, frequency


def _batches_available(available: NDArray[np.bool_], t: int) -> int:
    return int(available.reshape(-1, t).all(axis=1).sum())


@pytest.mark.parametrize("key", sorted(FACTORIES))
def test_selection_invariants(key: str) -> None:
    selector = FACTORIES[key]()
    rng = np.random.default_rng(42)
    sizes = set()
    for p in (0.0, 0.1, 0.3, 0.5, 0.8):
        for _ in range(100):
            available, frequency = _random_inputs(rng, p)
            out = selector.select(available, frequency, rng)
            assert out.dtype == np.intp
            assert out.ndim == 1
            assert out.size in (0, K)
            sizes.add(out.size)
            if out.size:
                assert np.all(np.diff(out) > 0)  # sorted and distinct
                assert np.all(available[out])
    assert sizes == {0, K}  # both selections and skips occurred


@pytest.mark.parametrize("key", sorted(FACTORIES))
def test_seeded_reproducibility(key: str) -> None:
    def run(seed: int) -> list[list[int]]:
        selector = FACTORIES[key]()
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(30):
            available, frequency = _random_inputs(rng, 0.2)
            out.append(selector.select(available, frequency, rng).tolist())
        return out

    assert run(3) == run(3)
    assert run(3) != run(4)


def test_random_and_weighted_skip_exactly_when_fewer_than_k_available() -> None:
    rng = np.random.default_rng(0)
    for selector in (RandomSelector(N, K), WeightedRandomSelector(N, K)):
        for count in range(N + 1):
            available = np.zeros(N, dtype=bool)
            available[rng.choice(N, count, replace=False)] = True
            out = selector.select(available, np.zeros(N, dtype=np.int64), rng)
            assert (out.size == 0) == (count < K)
            if count == K:
                np.testing.assert_array_equal(out, np.flatnonzero(available))


def test_random_selector_is_uniform_over_available_users() -> None:
    selector = RandomSelector(10, 3)
    rng = np.random.default_rng(1)
    available = np.array([1, 1, 1, 1, 1, 1, 0, 0, 1, 1], dtype=bool)
    counts = np.zeros(10)
    for _ in range(4000):
        counts[selector.select(available, np.zeros(10, dtype=np.int64), rng)] += 1
    assert counts[~available].sum() == 0
    np.testing.assert_allclose(counts[available] / 4000, 3 / 8, atol=0.04)


def test_weighted_random_picks_minimum_frequency_users() -> None:
    selector = WeightedRandomSelector(N, K)
    rng = np.random.default_rng(5)
    for _ in range(300):
        available, frequency = _random_inputs(rng, 0.3)
        out = selector.select(available, frequency, rng)
        if out.size == 0:
            continue
        rest = np.setdiff1d(np.flatnonzero(available), out)
        if rest.size:
            assert frequency[out].max() <= frequency[rest].min()


def test_weighted_random_breaks_ties_at_random() -> None:
    selector = WeightedRandomSelector(8, 3)
    rng = np.random.default_rng(2)
    frequency = np.array([0, 5, 1, 1, 1, 1, 0, 9], dtype=np.int64)
    available = np.ones(8, dtype=bool)
    seen = np.zeros(8)
    for _ in range(3000):
        out = selector.select(available, frequency, rng)
        assert {0, 6} <= set(out.tolist())  # the two zero-frequency users always
        seen[out] += 1
    assert seen[[1, 7]].sum() == 0
    np.testing.assert_allclose(seen[2:6] / 3000, 0.25, atol=0.04)  # one of four tied users


def test_partition_picks_group_with_minimum_frequency_user() -> None:
    selector = UserPartitionSelector(N, K)
    assert selector.num_units == 4
    np.testing.assert_array_equal(selector.units[1], np.arange(6, 12))
    rng = np.random.default_rng(8)
    for _ in range(400):
        available, frequency = _random_inputs(rng, 0.1)
        out = selector.select(available, frequency, rng)
        groups_ok = available.reshape(4, K).all(axis=1)
        assert (out.size == 0) == (not groups_ok.any())
        if out.size:
            assert out[0] % K == 0
            np.testing.assert_array_equal(out, np.arange(out[0], out[0] + K))
            covered = np.repeat(groups_ok, K)
            assert frequency[out].min() == frequency[covered].min()


def test_partition_ignores_available_users_of_unavailable_groups() -> None:
    selector = UserPartitionSelector(8, 4)
    available = np.array([1, 1, 1, 0, 1, 1, 1, 1], dtype=bool)
    frequency = np.array([0, 0, 0, 0, 7, 7, 7, 7], dtype=np.int64)
    out = selector.select(available, frequency, np.random.default_rng(0))
    assert out.tolist() == [4, 5, 6, 7]


def test_multiround_selects_unions_of_whole_batches_and_skips_correctly() -> None:
    for t in (1, 2, 3, 6):
        for fairness, rule in ((False, "paper"), (True, "paper"), (True, "authors")):
            selector = BatchPartitionSelector(N, K, t, fairness=fairness, fairness_rule=rule)
            assert selector.num_units == N // t
            np.testing.assert_array_equal(selector.units, np.arange(N).reshape(N // t, t))
            rng = np.random.default_rng(t)
            for p in (0.05, 0.2, 0.4):
                for _ in range(100):
                    available, frequency = _random_inputs(rng, p)
                    out = selector.select(available, frequency, rng)
                    skip = _batches_available(available, t) < K // t
                    assert (out.size == 0) == skip
                    if out.size:
                        blocks = out.reshape(K // t, t)
                        assert np.all(blocks[:, 0] % t == 0)
                        np.testing.assert_array_equal(blocks, blocks[:, :1] + np.arange(t)[None, :])


def test_multiround_fair_contains_minimum_frequency_user_of_available_batches() -> None:
    selector = BatchPartitionSelector(N, K, T, fairness=True)
    rng = np.random.default_rng(9)
    for _ in range(400):
        available, frequency = _random_inputs(rng, 0.2)
        out = selector.select(available, frequency, rng)
        if out.size:
            covered = np.repeat(available.reshape(-1, T).all(axis=1), T)
            assert frequency[out].min() == frequency[covered].min()


def test_multiround_extremes_match_partition_and_random_structure() -> None:
    # T = K: every selection is one group, like user partitioning.
    sel = BatchPartitionSelector(N, K, K)
    out = sel.select(np.ones(N, dtype=bool), np.zeros(N, dtype=np.int64), np.random.default_rng(0))
    assert out[0] % K == 0 and out.tolist() == list(range(out[0], out[0] + K))
    # T = 1: any K available users; every user eventually selected.
    sel = BatchPartitionSelector(N, K, 1)
    rng = np.random.default_rng(0)
    seen = np.zeros(N, dtype=bool)
    for _ in range(50):
        seen[sel.select(np.ones(N, dtype=bool), np.zeros(N, dtype=np.int64), rng)] = True
    assert seen.all()


def test_multiround_large_scale_smoke() -> None:
    n, k, t = 1_000_000, 10_000, 10
    rng = np.random.default_rng(0)
    available = rng.random(n) >= 0.05
    frequency = rng.integers(0, 10, size=n).astype(np.int64)
    for fairness, rule in ((False, "paper"), (True, "paper"), (True, "authors")):
        out = BatchPartitionSelector(n, k, t, fairness, rule).select(available, frequency, rng)
        assert out.size == k
        assert np.all(available[out])
        assert np.all(np.diff(out) > 0)


def test_available_may_be_zero_one_integers() -> None:
    selector = RandomSelector(4, 2)
    out = selector.select(
        np.array([1, 0, 1, 0]),  # type: ignore[arg-type]
        np.zeros(4, dtype=np.int64),
        np.random.default_rng(0),
    )
    assert out.tolist() == [0, 2]


@pytest.mark.parametrize("key", sorted(FACTORIES))
def test_select_rejects_bad_shapes(key: str) -> None:
    selector = FACTORIES[key]()
    rng = np.random.default_rng(0)
    ok_avail = np.ones(N, dtype=bool)
    ok_freq = np.zeros(N, dtype=np.int64)
    for bad in (np.ones(N - 1, dtype=bool), np.ones((N, 1), dtype=bool), np.full(N, 2)):
        with pytest.raises(ParameterError) as info:
            selector.select(bad, ok_freq, rng)
        assert info.value.name == "available"
    with pytest.raises(ParameterError) as info:
        selector.select(ok_avail, np.zeros(N + 1, dtype=np.int64), rng)
    assert info.value.name == "frequency"


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: RandomSelector(0, 1), "num_users"),
        (lambda: RandomSelector(10, 0), "per_round"),
        (lambda: RandomSelector(10, 11), "per_round"),
        (lambda: WeightedRandomSelector(5, 6), "per_round"),
        (lambda: RandomSelector(10, 2.0), "per_round"),
        (lambda: UserPartitionSelector(10, 4), "per_round"),
        (lambda: UserPartitionSelector(4, 8), "per_round"),
        (lambda: BatchPartitionSelector(120, 12, 13), "target_privacy"),
        (lambda: BatchPartitionSelector(120, 12, 5), "target_privacy"),
        (lambda: BatchPartitionSelector(20, 12, 3), "target_privacy"),
        (lambda: BatchPartitionSelector(120, 12, 0), "target_privacy"),
        (lambda: BatchPartitionSelector(10, 12, 4), "per_round"),
        (lambda: BatchPartitionSelector(0, 12, 4), "num_users"),
        (lambda: BatchPartitionSelector(120, 12, 4, True, "greedy"), "fairness_rule"),
        (lambda: ExplicitFamilySelector(np.eye(2), True, "greedy"), "fairness_rule"),
    ],
)
def test_constructor_validation(factory: Callable[[], Selector], name: str) -> None:
    with pytest.raises(ParameterError) as info:
        factory()
    assert info.value.name == name


def test_per_round_message_mentions_limit() -> None:
    with pytest.raises(ParameterError, match="must not exceed num_users"):
        RandomSelector(3, 4)


def test_make_selector() -> None:
    expected = {
        "random": RandomSelector,
        "weighted-random": WeightedRandomSelector,
        "partition": UserPartitionSelector,
        "multiround": BatchPartitionSelector,
    }
    assert set(SCHEMES) == set(expected)
    for scheme in SCHEMES:
        selector = make_selector(scheme, 120, 12, target_privacy=4, fairness=True)
        assert type(selector) is expected[scheme]
        assert selector.name == scheme
        assert (selector.num_users, selector.per_round) == (120, 12)
    multi = make_selector("multiround", 120, 12, 4, fairness=True)
    assert isinstance(multi, BatchPartitionSelector)
    assert multi.target_privacy == 4 and multi.fairness
    assert multi.fairness_rule == "paper"
    assert "target_privacy=4" in repr(multi)
    authors = make_selector("multiround", 120, 12, 4, fairness=True, fairness_rule="authors")
    assert isinstance(authors, BatchPartitionSelector) and authors.fairness_rule == "authors"
    assert "fairness_rule='authors'" in repr(authors)


def test_make_selector_rejects() -> None:
    with pytest.raises(ParameterError) as info:
        make_selector("greedy", 120, 12)
    assert info.value.name == "scheme"
    with pytest.raises(ParameterError) as info:
        make_selector("multiround", 120, 12)
    assert info.value.name == "target_privacy"
    with pytest.raises(ParameterError) as info:
        make_selector("partition", 120, 11)
    assert info.value.name == "per_round"
    for scheme in ("multiround", "random"):  # a bad rule is refused whatever the scheme
        with pytest.raises(ParameterError, match="paper, authors; got 'greedy'") as info:
            make_selector(scheme, 120, 12, 4, fairness=True, fairness_rule="greedy")
        assert info.value.name == "fairness_rule"


@pytest.fixture
def saved_selectors():
    with SELECTORS.restoring():
        yield SELECTORS


def test_selector_registry(saved_selectors) -> None:
    assert SCHEMES == tuple(SELECTORS) == ("random", "weighted-random", "partition", "multiround")
    with pytest.raises(ParameterError, match="'random' is registered already") as info:
        SELECTORS.register("random", RandomSelector)
    assert info.value.name == "scheme"
    assert type(make_selector("random", 10, 2)) is RandomSelector
    calls = []

    class Blocks(UserPartitionSelector):
        """Groups of K, recording the options it was built with."""

        name = "blocks"
        label = "Blocks"

        @classmethod
        def from_options(cls, n, k, t, fair, rule):
            calls.append((n, k, t, fair, rule))
            return cls(n, k)

    assert SELECTORS.register("blocks", Blocks) is Blocks
    blocks = make_selector("blocks", 12, 4, 2, fairness=True)
    assert type(blocks) is Blocks and blocks.describe() == "Blocks" and blocks.unit == 4
    make_selector("blocks", 12, 4, 2, True, "authors")
    assert calls == [(12, 4, 2, True, "paper"), (12, 4, 2, True, "authors")]
    # a configuration takes the registered scheme like a built-in one
    config = TrainConfig(users=12, per_round=4, rounds=1, scheme="blocks")
    assert config.label == "Blocks" and type(config.selector()) is Blocks
    with pytest.raises(ParameterError) as info:
        make_selector("greedy", 12, 4)
    assert str(info.value) == (
        "scheme: must be one of random, weighted-random, partition, multiround, blocks; "
        "got 'greedy'"
    )
