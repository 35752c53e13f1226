from __future__ import annotations

import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.fl.minibatches import check_offsets, client_orders, epoch_orders


def test_client_orders_properties() -> None:
    sizes = [7, 3, 10, 0, 4]
    rng = np.random.default_rng(0)
    clients = [rng.choice(100, n, replace=False) for n in sizes]
    offsets, orders = client_orders(clients, 2, np.random.default_rng(1))
    assert offsets.tolist() == [0, 7, 10, 20, 20, 24]
    assert orders.dtype == np.int64 and orders.shape == (2, 24)
    for c, idx in enumerate(clients):
        for e in range(2):
            # each epoch visits the client's samples once, in some order
            block = orders[e, offsets[c] : offsets[c + 1]]
            assert sorted(block.tolist()) == sorted(idx.tolist())
    # fresh permutation per epoch (overwhelmingly likely to differ for n = 10)
    assert not np.array_equal(orders[0, 10:20], orders[1, 10:20])


def test_client_orders_draws_a_permutation_per_client_and_epoch() -> None:
    # the draws of FedAvg's rounds: rng.permutation(n_c) for each client, then each epoch
    clients = [np.array([10, 11, 12]), np.array([], dtype=np.int64), np.array([20, 21])]
    offsets, orders = client_orders(clients, 2, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    expected = [clients[0][rng.permutation(3)], clients[0][rng.permutation(3)]]
    expected += [clients[2][rng.permutation(2)], clients[2][rng.permutation(2)]]
    assert orders[0, 0:3].tolist() == expected[0].tolist()
    assert orders[1, 0:3].tolist() == expected[1].tolist()
    assert orders[0, 3:5].tolist() == expected[2].tolist()
    assert orders[1, 3:5].tolist() == expected[3].tolist()
    assert offsets.tolist() == [0, 3, 3, 5]


def test_client_orders_edge_cases() -> None:
    a = client_orders([np.arange(5), np.arange(6)], 1, np.random.default_rng(7))
    b = client_orders([np.arange(5), np.arange(6)], 1, np.random.default_rng(7))
    assert all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
    offsets, orders = client_orders([], 3, np.random.default_rng(0))
    assert offsets.tolist() == [0] and orders.shape == (3, 0)
    with pytest.raises(ParameterError, match="client_indices"):
        client_orders([np.array([3, -1])], 1, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="client_indices"):
        client_orders([np.zeros((2, 2), dtype=np.int64)], 1, np.random.default_rng(0))
    with pytest.raises(ParameterError, match="epochs"):
        client_orders([np.arange(3)], 0, np.random.default_rng(0))


def test_epoch_orders() -> None:
    off = np.array([0, 3, 3, 7, 8])
    keys = np.random.default_rng(0).random((2, 8))
    orders = epoch_orders(keys, off, 2)
    assert orders.shape == (2, 8)
    for e in range(2):
        for g in range(4):
            block = orders[e, off[g] : off[g + 1]]
            assert sorted(block.tolist()) == list(range(off[g], off[g + 1]))
            assert np.all(np.diff(keys[e, block]) >= 0)
    assert np.array_equal(epoch_orders(None, off, 1), np.arange(8)[None, :])
    with pytest.raises(ParameterError, match="keys"):
        epoch_orders(keys[:, :5], off, 2)
    with pytest.raises(ParameterError, match="offsets"):
        epoch_orders(None, np.array([1, 3]), 1)


def test_check_offsets() -> None:
    assert check_offsets([0, 2, 2, 5], 5).dtype == np.int64
    for bad in ([0, 3, 2], [1, 5], [0, 4], np.array([0.0, 5.0]), np.zeros((2, 2), dtype=int)):
        with pytest.raises(ParameterError, match="offsets"):
            check_offsets(bad, 5)
