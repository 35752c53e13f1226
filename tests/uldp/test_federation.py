from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprivacy.data.fixed_silos import allocate_fixed_silos
from fedprivacy.data.shards import silo_shards
from fedprivacy.errors import ParameterError
from fedprivacy.uldp.federation import Federation, build_federation


def test_build_matches_allocation(heart) -> None:  # type: ignore[no-untyped-def]
    alloc = allocate_fixed_silos(heart.train_sizes(), 25, "zipf", np.random.default_rng(3))
    fed = build_federation(heart, alloc)
    assert fed.num_silos == 4 and fed.num_users == 25 and fed.pool_size == 486
    assert np.array_equal(fed.histogram(), alloc.histogram())
    assert np.array_equal(fed.records_per_user(), alloc.records_per_user())
    shards = silo_shards(heart, alloc)
    for s, sh in enumerate(shards):
        assert torch.equal(fed.x[fed.silo_slice(s)], torch.from_numpy(np.array(sh.x)))
        assert np.array_equal(fed.silo_users[s], sh.users)
    tx, _ = heart.pooled_test()
    assert fed.test_x.shape == tx.shape
    w = fed.weights(weighted=True)
    active = fed.records_per_user() > 0
    assert np.allclose(w.sum(axis=0)[active], 1.0)
    assert np.allclose(fed.weights(weighted=False), 0.25)


def test_without_user_keeps_the_others(heart_fed: Federation) -> None:
    fed = heart_fed
    u = int(np.argmax((fed.histogram() > 0).sum(axis=0)))
    rows = fed.user_rows(u)
    assert len(rows) == fed.records_per_user()[u] > 0
    other = fed.without_user(u)
    assert other.num_records == fed.num_records - len(rows)
    assert other.records_per_user()[u] == 0
    keep = np.setdiff1d(np.arange(fed.num_records), rows)
    assert torch.equal(other.x, fed.x[torch.from_numpy(keep)])
    assert np.array_equal(other.record_index, fed.record_index[keep])
    h, h2 = fed.histogram(), other.histogram()
    h[:, u] = 0
    assert np.array_equal(h, h2)
    assert other.pool_size == fed.pool_size and other.num_users == fed.num_users


def test_keep_rows_validation(heart_fed: Federation) -> None:
    with pytest.raises(ParameterError, match="keep"):
        heart_fed.keep_rows(np.ones(3, dtype=bool))
    none = heart_fed.keep_rows(np.zeros(heart_fed.num_records, dtype=bool))
    assert none.num_records == 0 and all(len(u) == 0 for u in none.silo_users)
