import numpy as np
import pytest

from fedprivacy.data.allocators import allocate_pool
from fedprivacy.data.creditcard import creditcard_pool, synthetic_creditcard
from fedprivacy.data.fixed_silos import allocate_fixed_silos
from fedprivacy.data.shards import silo_shards
from fedprivacy.errors import ParameterError

NEEDED_DATA = ("tcga_brca",)


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_silo_shards_for_pool_and_fixed_silos():
    pool = creditcard_pool(synthetic_creditcard(3000, seed=1, fraud_rate=0.05), seed=1)
    x, y = pool.pooled_train()
    a = allocate_pool(y, 20, 3, "zipf", _rng(2))
    shards = silo_shards(pool, a)
    assert [s.name for s in shards] == ["silo0", "silo1", "silo2"]
    assert sum(s.num_records for s in shards) == len(y)
    for s in shards:
        assert np.all(np.diff(s.user) >= 0)
        assert np.array_equal(s.x, x[s.record_index]) and np.array_equal(s.y, y[s.record_index])
        u = int(s.users[0])
        rows = s.rows_of(u)
        assert np.all(s.user[rows] == u)
        assert np.array_equal(np.sort(s.record_index[rows]), a.records(s.silo, u))
        assert s.counts.tolist() == a.histogram()[s.silo, s.users].tolist()
    with pytest.raises(ParameterError, match="covers"):
        silo_shards(pool, allocate_pool(y[:-1], 20, 3, "zipf", _rng(2)))


def test_silo_shards_require_the_fixed_silos(data_dir):
    from fedprivacy.data.tcga_brca import load_tcga_brca

    ds = load_tcga_brca(data_dir)
    a = allocate_fixed_silos(ds.train_sizes(), 50, "zipf", _rng(), min_records_per_user_silo=2)
    shards = silo_shards(ds, a)
    assert [s.name for s in shards] == list(ds.silo_names)
    assert all(int(s.counts.min()) >= 2 for s in shards)
    assert np.array_equal(shards[1].x[shards[1].rows_of(int(shards[1].users[0]))].shape[1:], [39])
    _, y = ds.pooled_train()
    with pytest.raises(ParameterError, match="fixed silos"):
        silo_shards(ds, allocate_pool(np.zeros(len(y), dtype=np.int64), 50, 6, "uniform", _rng()))
