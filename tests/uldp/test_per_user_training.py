from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_training import LocalTrainingSpec
from fedprivacy.fl.losses import (
    binary_logistic_loss,
    cox_loss,
    cross_entropy_loss,
)
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.models.registry import build_model
from fedprivacy.uldp.per_user_loops import group_gradients_loop, train_groups_loop
from fedprivacy.uldp.per_user_training import (
    PerUserTrainer,
    epoch_orders,
    require_plain_sgd,
)


def _data(kind: str, counts: list[int], seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n = int(off[-1])
    if kind == "logistic":
        x = rng.normal(size=(n, 13))
        y = torch.from_numpy(rng.integers(0, 2, n))
        loss = binary_logistic_loss
    elif kind == "cox-linear":
        x = rng.normal(size=(n, 39))
        y = torch.from_numpy(
            np.stack([rng.integers(0, 2, n), rng.integers(1, 9, n)], 1).astype(np.float32)
        )
        loss = cox_loss
    elif kind == "fraudnet":
        x = rng.normal(size=(n, 30))
        y = torch.from_numpy(rng.integers(0, 2, n))
        loss = cross_entropy_loss
    else:
        x = rng.normal(size=(n, 1, 28, 28))
        y = torch.from_numpy(rng.integers(0, 10, n))
        loss = cross_entropy_loss
    return torch.from_numpy(x.astype(np.float32)), y, off, loss


CASES = [
    ("logistic", [3, 0, 7, 1, 12, 5, 2, 9], 3, 4),
    ("cox-linear", [2, 4, 6, 2, 3, 0, 8], 2, 3),
    ("fraudnet", [5, 1, 0, 9, 4, 4, 13], 2, 4),
    ("paper-mnist-cnn", [3, 1, 5, 2], 2, 2),
]


@pytest.mark.parametrize(("name", "counts", "epochs", "batch"), CASES)
def test_vectorised_equals_per_user_loop(
    name: str, counts: list[int], epochs: int, batch: int
) -> None:
    x, y, off, loss = _data(name, counts)
    model = build_model(name, seed=1)
    flat = flatten_parameters(model)
    spec = LocalTrainingSpec(epochs=epochs, batch_size=batch, lr=0.1)
    orders = epoch_orders(np.random.default_rng(5).random((epochs, len(x))), off, epochs)
    expected = train_groups_loop(model, loss, flat, x, y, off, orders, spec)
    assert float(expected.abs().max()) > 1e-3  # the users did move
    for max_rows in (7, 4096):  # chunked and all at once
        got = PerUserTrainer(model, loss, max_rows=max_rows).train(flat, x, y, off, orders, spec)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    empty = np.flatnonzero(np.diff(off) == 0)
    assert torch.all(got[torch.from_numpy(empty)] == 0)


@pytest.mark.parametrize(("name", "counts", "epochs", "batch"), CASES)
def test_gradients_equal_per_user_loop(
    name: str, counts: list[int], epochs: int, batch: int
) -> None:
    x, y, off, loss = _data(name, counts, seed=1)
    model = build_model(name, seed=2)
    flat = flatten_parameters(model)
    expected = group_gradients_loop(model, loss, flat, x, y, off)
    got = PerUserTrainer(model, loss, max_rows=10).gradients(flat, x, y, off)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_groups_subset_and_independence_from_other_users() -> None:
    x, y, off, loss = _data("logistic", [4, 6, 3, 5])
    model = build_model("logistic", seed=0)
    flat = flatten_parameters(model)
    spec = LocalTrainingSpec(epochs=2, batch_size=2, lr=0.2)
    keys = np.random.default_rng(0).random((2, len(x)))
    trainer = PerUserTrainer(model, loss)
    full = trainer.train(flat, x, y, off, epoch_orders(keys, off, 2), spec)
    ids = [
        i
        for ids, _ in trainer.iter_deltas(
            flat, x, y, off, epoch_orders(keys, off, 2), spec, groups=[1, 3]
        )
        for i in ids
    ]
    assert sorted(ids) == [1, 3]
    # group 1 alone, with its own keys, trains exactly as inside the silo
    lo, hi = int(off[1]), int(off[2])
    alone_off = np.array([0, hi - lo])
    alone = trainer.train(
        flat, x[lo:hi], y[lo:hi], alone_off, epoch_orders(keys[:, lo:hi], alone_off, 2), spec
    )
    torch.testing.assert_close(alone[0], full[1], rtol=1e-6, atol=1e-7)


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


def test_local_sgd_validation() -> None:
    with pytest.raises(ParameterError, match="epochs"):
        LocalTrainingSpec(epochs=0).validate()
    with pytest.raises(ParameterError, match="lr"):
        LocalTrainingSpec(lr=-1.0).validate()
    with pytest.raises(ParameterError, match="model"):
        PerUserTrainer(torch.nn.BatchNorm1d(3), cross_entropy_loss)


def test_per_user_training_is_plain_sgd() -> None:
    # one spec for FedAvg and ULDP: the per-user trainers refuse what they do not implement
    x, y, off, loss = _data("logistic", [4, 6])
    model = build_model("logistic", seed=0)
    flat = flatten_parameters(model)
    orders = epoch_orders(None, off, 1)
    for changes, name in [
        ({"momentum": 0.9}, "momentum"),
        ({"weight_decay": 1e-4}, "weight_decay"),
    ]:
        spec = LocalTrainingSpec(epochs=1, batch_size=2, lr=0.1, **changes)  # type: ignore[arg-type]
        with pytest.raises(ParameterError) as info:
            PerUserTrainer(model, loss).train(flat, x, y, off, orders, spec)
        assert info.value.name == name
        with pytest.raises(ParameterError) as info:
            train_groups_loop(model, loss, flat, x, y, off, orders, spec)
        assert info.value.name == name
    plain = LocalTrainingSpec(epochs=1, batch_size=2, lr=0.1)
    assert require_plain_sgd(plain) is plain
