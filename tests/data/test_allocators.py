import numpy as np
import pytest

from fedprivacy.data.allocation import Allocation
from fedprivacy.data.allocators import allocate_pool, zipf_weights
from fedprivacy.data.fixed_silos import allocate_fixed_silos
from fedprivacy.errors import ParameterError

HEART_TRAIN = [199, 172, 30, 85]
TCGA_TRAIN = [248, 156, 164, 129, 129, 40]
NEEDED_DATA = ("mnist/train-labels-idx1-ubyte.gz",)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _labels(n=6000, classes=10, seed=0):
    return _rng(seed).integers(classes, size=n)


def _check_consistent(a: Allocation):
    h = a.histogram()
    assert h.shape == (a.num_silos, a.num_users)
    assert int(h.sum()) == a.num_records
    # every record exactly once: the per-silo, per-user record lists partition the pool
    seen = np.concatenate([a.silo_users(s).records for s in range(a.num_silos)])
    assert np.array_equal(np.sort(seen), np.arange(a.num_records))
    for s in range(a.num_silos):
        group = a.silo_users(s)
        assert np.array_equal(group.counts, h[s, group.users])
        for j in range(min(5, len(group.users))):
            u = int(group.users[j])
            assert np.array_equal(group.of(u), a.records(s, u))
            assert np.all(a.user[group.of(u)] == u) and np.all(a.silo[group.of(u)] == s)


def test_zipf_weights():
    w = zipf_weights(4, 1.0)
    assert np.allclose(w, np.array([1, 1 / 2, 1 / 3, 1 / 4]) / (25 / 12))
    assert np.allclose(zipf_weights(3, 0.0), 1 / 3)


@pytest.mark.parametrize("dist", ["uniform", "zipf"])
def test_pool_assigns_every_record_once(dist):
    y = _labels()
    a = allocate_pool(y, 100, 5, dist, _rng())
    _check_consistent(a)
    assert a.num_records == 6000 and not a.fixed_silos
    if dist == "uniform":
        assert set(a.records_per_user().tolist()) == {60}
        assert set(a.records_per_silo().tolist()) == {1200}
        assert a.main_silo is None
    else:
        assert a.main_silo is not None
        # silo ranks follow Zipf(2.0): the rank-1 silo holds 1 / sum_r r^-2 of the records
        assert a.main_silo_share() == pytest.approx(zipf_weights(5, 2.0)[0], abs=0.02)
        assert a.params == {"max_labels_per_user": None, "user_alpha": 0.5, "silo_alpha": 2.0}


def test_zipf_is_heavier_tailed_than_uniform():
    y = _labels()
    uni = allocate_pool(y, 100, 5, "uniform", _rng(1)).records_per_user()
    zipf = allocate_pool(y, 100, 5, "zipf", _rng(1)).records_per_user()
    assert zipf.max() > 3 * uni.max()
    assert np.std(zipf) > 5 * np.std(uni)
    # user 0 has Zipf rank 1: about 1 / sum_r r^-0.5 of the records
    assert zipf[0] / 6000 == pytest.approx(zipf_weights(100, 0.5)[0], rel=0.15)
    heart_uni = allocate_fixed_silos(HEART_TRAIN, 50, "uniform", _rng(1)).records_per_user()
    heart_zipf = allocate_fixed_silos(HEART_TRAIN, 50, "zipf", _rng(1)).records_per_user()
    assert heart_zipf.max() > 1.5 * heart_uni.max()
    assert np.std(heart_zipf) > 1.5 * np.std(heart_uni)


def test_same_seed_same_allocation():
    y = _labels()
    for make in (
        lambda r: allocate_pool(y, 100, 5, "zipf", r, max_labels_per_user=2),
        lambda r: allocate_fixed_silos(TCGA_TRAIN, 40, "zipf", r, min_records_per_user_silo=2),
    ):
        a, b, c = make(_rng(7)), make(_rng(7)), make(_rng(8))
        assert np.array_equal(a.user, b.user) and np.array_equal(a.silo, b.silo)
        assert not np.array_equal(a.user, c.user)


@pytest.mark.parametrize("dist", ["uniform", "zipf"])
@pytest.mark.parametrize("users", [5, 100, 1000])
def test_non_iid_at_most_two_labels(dist, users):
    y = _labels(classes=10, seed=users)
    a = allocate_pool(y, users, 5, dist, _rng(users), max_labels_per_user=2)
    _check_consistent(a)
    assert a.labels_per_user(y).max() <= 2
    if dist == "uniform" and users == 100:
        n = a.records_per_user()
        assert n.min() > 0 and abs(np.median(n) - 60) <= 5  # counts kept where labels allow
    # without the limit, users see more labels
    assert allocate_pool(y, users, 5, dist, _rng(0)).labels_per_user(y).max() > 2


def test_non_iid_mnist_labels(data_dir):
    from fedprivacy.data.tabular import load_mnist_pool

    _, y = load_mnist_pool(data_dir).pooled_train()
    for users in (100, 10000):
        a = allocate_pool(y, users, 5, "zipf", _rng(users), max_labels_per_user=2)
        assert a.num_records == 60000 and int(a.histogram().sum()) == 60000
        assert a.labels_per_user(y).max() <= 2


def test_fixed_silos_keep_sizes_and_every_record():
    for dist in ("uniform", "zipf"):
        a = allocate_fixed_silos(HEART_TRAIN, 50, dist, _rng(3))
        _check_consistent(a)
        assert a.fixed_silos and a.records_per_silo().tolist() == HEART_TRAIN
        assert np.array_equal(a.silo, np.repeat(np.arange(4), HEART_TRAIN))
    z = allocate_fixed_silos(HEART_TRAIN, 50, "zipf", _rng(3))
    assert z.records_per_user().min() >= 1  # every user has a record under zipf


def test_main_silo_share_on_average():
    # equal silos and many users: the demand per silo is nearly balanced, little spill-over
    shares = [
        allocate_fixed_silos([3000] * 4, 1000, "zipf", _rng(seed)).main_silo_share()
        for seed in range(3)
    ]
    assert np.mean(shares) == pytest.approx(0.8, abs=0.03)
    a = allocate_fixed_silos([3000] * 4, 1000, "zipf", _rng(0), main_silo_share=0.5)
    assert a.main_silo_share() == pytest.approx(0.5, abs=0.03)
    # the records outside the main silo are spread over the other silos
    assert a.silos_per_user()[a.records_per_user() >= 20].min() >= 3
    # Heart Disease's tiny Switzerland silo forces spill-over: the share drops, sizes hold
    heart = allocate_fixed_silos(HEART_TRAIN, 50, "zipf", _rng(0))
    assert 0.3 < heart.main_silo_share() < 0.8
    with pytest.raises(ParameterError, match="main_silo"):
        allocate_fixed_silos(HEART_TRAIN, 50, "uniform", _rng(0)).main_silo_share()


@pytest.mark.parametrize("dist", ["uniform", "zipf"])
@pytest.mark.parametrize("users", [10, 100, 400])
def test_tcga_two_records_per_present_user_and_silo(dist, users):
    a = allocate_fixed_silos(TCGA_TRAIN, users, dist, _rng(users), min_records_per_user_silo=2)
    _check_consistent(a)
    h = a.histogram()
    assert h[h > 0].min() >= 2
    assert a.min_records_per_present_user_silo() >= 2
    assert a.records_per_silo().tolist() == TCGA_TRAIN
    if dist == "zipf":
        assert a.records_per_user().min() >= 2


def test_impossible_requests_are_parameter_errors():
    y = _labels(n=50)
    with pytest.raises(ParameterError, match="num_users"):
        allocate_pool(y, 51, 5, "uniform", _rng())
    with pytest.raises(ParameterError, match="max_labels_per_user"):
        allocate_pool(_labels(classes=10), 4, 5, "uniform", _rng(), max_labels_per_user=2)
    with pytest.raises(ParameterError, match="distribution"):
        allocate_pool(y, 5, 5, "pareto", _rng())
    with pytest.raises(ParameterError, match="rng"):
        allocate_pool(y, 5, 5, "zipf", 0)
    with pytest.raises(ParameterError, match="user_alpha"):
        allocate_pool(y, 5, 5, "zipf", _rng(), user_alpha=-1.0)
    # TCGA: 866 records hold 432 blocks of 2, so at most 432 users can each get 2 records
    allocate_fixed_silos(TCGA_TRAIN, 432, "zipf", _rng(), min_records_per_user_silo=2)
    with pytest.raises(ParameterError, match="433 users"):
        allocate_fixed_silos(TCGA_TRAIN, 433, "zipf", _rng(), min_records_per_user_silo=2)
    with pytest.raises(ParameterError, match="silo 1 holds 1 record"):
        allocate_fixed_silos([10, 1], 3, "uniform", _rng(), min_records_per_user_silo=2)
    with pytest.raises(ParameterError, match="main_silo_share"):
        allocate_fixed_silos(HEART_TRAIN, 3, "zipf", _rng(), main_silo_share=1.2)
    with pytest.raises(ParameterError, match="silo_sizes"):
        allocate_fixed_silos([0, 0], 3, "zipf", _rng())
