import numpy as np
import pytest

from fedprivacy.data.partition import (
    PARTITIONERS,
    PARTITIONS,
    Partition,
    make_partition,
    partition_data_sharing,
    partition_dirichlet,
    partition_iid,
    partition_shards,
)
from fedprivacy.errors import ParameterError


def cifar_like_labels(seed: int = 0) -> np.ndarray:
    """50,000 labels, 5,000 per class, in random order (like CIFAR-10's training set)."""
    return np.random.default_rng(seed).permutation(np.repeat(np.arange(10), 5000))


def check_structure(p: Partition, n: int) -> None:
    assert p.name in PARTITIONS
    for u in p.user_indices:
        assert u.dtype == np.int64 and u.ndim == 1
        assert np.all(np.diff(u) > 0)  # sorted ascending, no duplicates
    assert p.shared_indices.dtype == np.int64
    private = np.concatenate(p.user_indices)
    everything = np.concatenate([private, p.shared_indices])
    # disjoint and covering: every index exactly once (shared ones once, as the shared set)
    np.testing.assert_array_equal(np.sort(everything), np.arange(n))
    sizes = p.sizes()
    assert sizes.dtype == np.int64 and sizes.shape == (p.num_users,)
    np.testing.assert_array_equal(sizes, [len(u) + len(p.shared_indices) for u in p.user_indices])


@pytest.mark.parametrize("name", PARTITIONS)
@pytest.mark.parametrize("num_users", [1, 7, 120])
def test_disjoint_and_covering(name, num_users):
    labels = np.random.default_rng(5).integers(0, 10, size=3001)
    p = make_partition(name, labels, num_users, np.random.default_rng(1), shared=50)
    assert p.name == name and p.num_users == num_users
    check_structure(p, len(labels))
    counts = p.label_counts(labels, 10)
    assert counts.shape == (num_users, 10) and counts.dtype == np.int64
    np.testing.assert_array_equal(counts.sum(axis=1), p.sizes())
    u = num_users - 1
    np.testing.assert_array_equal(
        p.user_data(u), np.concatenate([p.shared_indices, p.user_indices[u]])
    )


@pytest.mark.parametrize("name", PARTITIONS)
def test_reproducible(name):
    labels = cifar_like_labels()
    a = make_partition(name, labels, 30, np.random.default_rng(42))
    b = make_partition(name, labels, 30, np.random.default_rng(42))
    c = make_partition(name, labels, 30, np.random.default_rng(43))
    for x, y in zip(a.user_indices, b.user_indices, strict=True):
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.shared_indices, b.shared_indices)
    assert any(
        len(x) != len(y) or np.any(x != y)
        for x, y in zip(a.user_indices, c.user_indices, strict=True)
    )


def test_iid_sizes():
    p = partition_iid(cifar_like_labels(), 120, np.random.default_rng(0))
    assert set(p.sizes().tolist()) == {416, 417}
    assert p.sizes().sum() == 50000
    assert len(p.shared_indices) == 0


def test_shards_one_label_per_user_on_sorted_classes():
    labels = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 6000))
    p = partition_shards(labels, 120, np.random.default_rng(0))
    assert p.sizes().tolist() == [500] * 120
    assert all(len(np.unique(labels[u])) == 1 for u in p.user_indices)
    assert (p.label_counts(labels, 10) > 0).sum(axis=0).tolist() == [12] * 10


def test_shards_uneven_and_several_per_user():
    labels = np.arange(1003) % 10
    p = partition_shards(labels, 10, np.random.default_rng(0))
    assert p.sizes().max() - p.sizes().min() <= 1
    check_structure(p, 1003)
    p2 = partition_shards(np.repeat(np.arange(10), 100), 10, np.random.default_rng(0), 2)
    assert p2.sizes().tolist() == [100] * 10
    labels2 = np.repeat(np.arange(10), 100)
    assert all(len(np.unique(labels2[u])) <= 2 for u in p2.user_indices)


def test_shards_on_real_mnist(data_dir):
    from fedprivacy.data import load_dataset

    labels = load_dataset("mnist", data_dir).train_y
    p = partition_shards(labels, 120, np.random.default_rng(0))
    assert p.sizes().tolist() == [500] * 120
    distinct = [len(np.unique(labels[u])) for u in p.user_indices]
    assert max(distinct) <= 2
    assert sum(d == 1 for d in distinct) >= 100


def test_data_sharing_appendix_e():
    labels = cifar_like_labels()
    p = partition_data_sharing(labels, 120, 200, np.random.default_rng(0))
    assert len(p.shared_indices) == 200
    assert np.all(np.diff(p.shared_indices) > 0)
    assert p.sizes().tolist() == [615] * 120
    assert [len(u) for u in p.user_indices] == [415] * 120
    assert all(1 <= len(np.unique(labels[u])) <= 2 for u in p.user_indices)
    assert len(np.intersect1d(np.concatenate(p.user_indices), p.shared_indices)) == 0
    data = p.user_data(7)
    assert len(data) == 615
    np.testing.assert_array_equal(data[:200], p.shared_indices)
    # the shared set is a uniform sample: all classes present
    assert len(np.unique(labels[p.shared_indices])) == 10
    check_structure(p, 50000)


def test_data_sharing_zero_shared_is_shards_like():
    labels = cifar_like_labels()
    p = partition_data_sharing(labels, 100, 0, np.random.default_rng(0))
    assert len(p.shared_indices) == 0 and p.sizes().tolist() == [500] * 100


def mean_max_fraction(p: Partition, labels: np.ndarray) -> float:
    counts = p.label_counts(labels, 10)
    return float(np.mean(counts.max(axis=1) / counts.sum(axis=1)))


def test_dirichlet_skew_depends_on_beta():
    labels = cifar_like_labels()
    skewed = partition_dirichlet(labels, 120, 0.5, np.random.default_rng(0))
    flat = partition_dirichlet(labels, 120, 100.0, np.random.default_rng(0))
    check_structure(skewed, 50000)
    check_structure(flat, 50000)
    assert mean_max_fraction(skewed, labels) > 0.35
    assert mean_max_fraction(flat, labels) < 0.2
    assert skewed.sizes().min() >= 1


def test_dirichlet_min_size_and_failure():
    labels = cifar_like_labels()[:2000]
    p = partition_dirichlet(labels, 20, 0.3, np.random.default_rng(0), min_size=20)
    assert p.sizes().min() >= 20
    p0 = partition_dirichlet(labels, 20, 0.3, np.random.default_rng(0), min_size=0)
    check_structure(p0, 2000)
    with pytest.raises(ParameterError) as info:
        partition_dirichlet(np.zeros(100, dtype=int), 50, 1e-3, np.random.default_rng(0), 2)
    assert info.value.name == "min_size"


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda r: partition_iid(np.arange(10), 0, r), "users"),
        (lambda r: partition_iid(np.arange(10), 11, r), "users"),
        (lambda r: partition_iid(np.arange(10), 2.0, r), "users"),
        (lambda r: partition_iid(np.zeros((3, 3), dtype=int), 2, r), "labels"),
        (lambda r: partition_iid(np.array([0.0, 1.0]), 2, r), "labels"),
        (lambda r: partition_iid(np.array([0, -1]), 2, r), "labels"),
        (lambda r: partition_iid(np.array([True, False]), 2, r), "labels"),
        (lambda r: partition_iid(np.array([], dtype=int), 1, r), "labels"),
        (lambda r: partition_iid(np.arange(10), 2, 0), "rng"),
        (lambda r: partition_shards(np.arange(10), 4, r, shards_per_user=3), "shards_per_user"),
        (lambda r: partition_shards(np.arange(10), 4, r, shards_per_user=0), "shards_per_user"),
        (lambda r: partition_dirichlet(np.arange(10), 2, 0.0, r), "beta"),
        (lambda r: partition_dirichlet(np.arange(10), 2, float("nan"), r), "beta"),
        (lambda r: partition_dirichlet(np.arange(10), 2, float("inf"), r), "beta"),
        (lambda r: partition_dirichlet(np.arange(10), 2, True, r), "beta"),
        (lambda r: partition_dirichlet(np.arange(10), 2, 1.0, r, min_size=6), "min_size"),
        (lambda r: partition_data_sharing(np.arange(10), 3, 8, r), "shared"),
        (lambda r: partition_data_sharing(np.arange(10), 3, -1, r), "shared"),
        (lambda r: make_partition("random", np.arange(10), 2, r), "partition"),
    ],
)
def test_parameter_errors(call, param):
    with pytest.raises(ParameterError) as info:
        call(np.random.default_rng(0))
    assert info.value.name == param


def test_unknown_partition_lists_choices():
    with pytest.raises(ParameterError) as info:
        make_partition("pathological", np.arange(10), 2, np.random.default_rng(0))
    for name in PARTITIONS:
        assert name in str(info.value)


def test_partition_accessor_errors():
    labels = np.arange(20) % 4
    p = partition_iid(labels, 4, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="user"):
        p.user_data(4)
    with pytest.raises(ParameterError, match="labels"):
        p.label_counts(labels, 3)
    with pytest.raises(ParameterError, match="labels"):
        p.label_counts(labels[:10], 4)


@pytest.fixture
def saved_partitioners():
    with PARTITIONERS.restoring():
        yield PARTITIONERS


def test_partition_registry(saved_partitioners):
    assert PARTITIONS == tuple(PARTITIONERS) == ("iid", "shards", "dirichlet", "data-sharing")
    with pytest.raises(ParameterError, match="'iid' is registered already") as info:
        PARTITIONERS.register("iid", PARTITIONERS["shards"])
    assert info.value.name == "partition"
    assert make_partition("iid", np.arange(10), 2, np.random.default_rng(0)).name == "iid"
    calls = []

    def build(labels, num_users, rng, beta, shared, shards_per_user):
        calls.append((num_users, beta, shared, shards_per_user))
        return partition_iid(labels, num_users, rng)

    assert PARTITIONERS.register("uniform", build) is build
    p = make_partition("uniform", np.arange(10), 2, np.random.default_rng(0), beta=0.3)
    assert p.num_users == 2 and calls == [(2, 0.3, 200, 1)]
    with pytest.raises(ParameterError) as info:
        make_partition("pathological", np.arange(10), 2, np.random.default_rng(0))
    assert str(info.value) == (
        "partition: must be one of iid, shards, dirichlet, data-sharing, uniform; "
        "got 'pathological'"
    )
