from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LocalTrainingSpec, require_plain_sgd
from fedprivacy.fl.local_training import VectorisedTrainer, default_max_rows
from fedprivacy.fl.losses import (
    MaskedLoss,
    binary_logistic_loss,
    cox_loss,
    cross_entropy_loss,
)
from fedprivacy.fl.minibatches import client_orders, epoch_orders
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.training_loops import group_gradients_loop, train_groups_loop
from fedprivacy.models.registry import build_model

# Float32 tolerance of "vectorised == loop": batched kernels (grouped convolutions, bmm) sum in
# another order than the per-client ones, so the results agree to rounding, not bit for bit.
RTOL = 1e-4
ATOL = 1e-5

SHAPES = {
    "mlp": ((1, 8, 8), 10),
    "lenet": ((3, 32, 32), 10),
    "mnist-cnn": ((1, 28, 28), 10),
    "vgg11": ((3, 32, 32), 100),
}


def make_data(
    shape: tuple[int, int, int], num_classes: int, sizes: list[int], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, list[np.ndarray]]:
    gen = torch.Generator().manual_seed(seed)
    n = sum(sizes) + 5  # a few samples that belong to no client
    features = torch.randn((n, *shape), generator=gen)
    labels = torch.randint(0, num_classes, (n,), generator=gen)
    perm = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum([0, *sizes])
    return features, labels, [perm[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


# ----------------------------------------------------------------------------------- spec


def test_spec_validation() -> None:
    LocalTrainingSpec().validate()
    LocalTrainingSpec(epochs=3, batch_size=1, lr=1.0, momentum=0.99, weight_decay=0.0).validate()
    bad = [
        ({"epochs": 0}, "epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"lr": 0.0}, "lr"),
        ({"lr": -0.1}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"lr": float("inf")}, "lr"),
        ({"momentum": 1.0}, "momentum"),
        ({"momentum": -0.1}, "momentum"),
        ({"weight_decay": -1e-4}, "weight_decay"),
        ({"epochs": 1.5}, "epochs"),
    ]
    for kwargs, name in bad:
        with pytest.raises(ParameterError) as info:
            LocalTrainingSpec(**kwargs).validate()  # type: ignore[arg-type]
        assert info.value.name == name


def test_require_plain_sgd() -> None:
    # one spec for FedAvg and ULDP-FL: ULDP-FL refuses what its paper does not run
    plain = LocalTrainingSpec(epochs=1, batch_size=2, lr=0.1)
    assert require_plain_sgd(plain) is plain
    for changes, name in [
        ({"momentum": 0.9}, "momentum"),
        ({"weight_decay": 1e-4}, "weight_decay"),
    ]:
        with pytest.raises(ParameterError) as info:
            require_plain_sgd(LocalTrainingSpec(**changes))  # type: ignore[arg-type]
        assert info.value.name == name
    assert default_max_rows("cpu") < default_max_rows("cuda")


# ------------------------------------------------ vectorised == loop (the oracle): FedAvg

SPECS = {
    "sgd": LocalTrainingSpec(epochs=2, batch_size=4, lr=0.05),
    "momentum+wd": LocalTrainingSpec(
        epochs=2, batch_size=4, lr=0.05, momentum=0.9, weight_decay=1e-3
    ),
}


def fedavg_setup(
    model_name: str, sizes: list[int], spec: LocalTrainingSpec, seed: int = 0
) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor, np.ndarray, np.ndarray]:
    shape, num_classes = SHAPES[model_name]
    features, labels, clients = make_data(shape, num_classes, sizes, seed)
    model = build_model(model_name, shape, num_classes, seed=seed + 3)
    offsets, orders = client_orders(clients, spec.epochs, np.random.default_rng(seed + 5))
    return model, flatten_parameters(model), features, labels, offsets, orders


@pytest.mark.parametrize("gradient", ["vmap", "bmm"])
@pytest.mark.parametrize("spec_name", sorted(SPECS))
@pytest.mark.parametrize("model_name", ["mlp", "lenet", "mnist-cnn", "vgg11"])
def test_vectorised_matches_loop(model_name: str, spec_name: str, gradient: str) -> None:
    spec = SPECS[spec_name]
    # different sizes: partial last batches (11 % 4, 6 % 4) and padded steps (6 vs 4 vs 2)
    sizes = [11, 6, 3]
    if model_name == "vgg11":
        # expensive model: 2 clients, tiny batches, 1 epoch (2 and 1 steps; a partial batch)
        spec = LocalTrainingSpec(
            epochs=1,
            batch_size=2,
            lr=spec.lr,
            momentum=spec.momentum,
            weight_decay=spec.weight_decay,
        )
        sizes = [3, 2]
    model, flat, features, labels, off, orders = fedavg_setup(model_name, sizes, spec)
    data = (flat, features, labels, off, orders, spec)
    expected = train_groups_loop(model, cross_entropy_loss, *data)
    trainer = VectorisedTrainer(model, cross_entropy_loss, max_rows=None, gradient=gradient)
    got = trainer.train(*data)
    assert got.shape == (len(sizes), flat.numel()) and got.dtype == torch.float32
    # the clients really moved, and differently
    assert expected.abs().max() > 1e-3
    assert (expected[0] - expected[1]).abs().max() > 1e-3
    torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)
    # the model given to the trainers is not modified
    assert torch.equal(flatten_parameters(model), flat)


def test_loop_is_torch_mean_cross_entropy() -> None:
    # the masked mean with an all-ones mask gives the gradients of torch's mean cross-entropy
    spec = LocalTrainingSpec(epochs=2, batch_size=4, lr=0.1, momentum=0.5)
    model, flat, features, labels, off, orders = fedavg_setup("mlp", [7], spec)
    got = train_groups_loop(model, cross_entropy_loss, flat, features, labels, off, orders, spec)
    opt = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    for e in range(2):
        for lo in (0, 4):
            rows = torch.from_numpy(orders[e, lo : lo + 4])
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(features[rows]), labels[rows])
            torch.autograd.backward(loss)
            opt.step()
    assert torch.equal(got[0], flatten_parameters(model) - flat)


# ----------------------------------------- vectorised == loop (the oracle): ULDP-FL's losses


def uldp_data(
    kind: str, counts: list[int], seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, MaskedLoss]:
    rng = np.random.default_rng(seed)
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    n = int(off[-1])
    y = torch.from_numpy(rng.integers(0, 2, n))
    loss: MaskedLoss = binary_logistic_loss
    if kind == "logistic":
        x = rng.normal(size=(n, 13))
    elif kind == "cox-linear":
        x = rng.normal(size=(n, 39))
        times = np.stack([rng.integers(0, 2, n), rng.integers(1, 9, n)], 1)
        y, loss = torch.from_numpy(times.astype(np.float32)), cox_loss
    elif kind == "fraudnet":
        x, loss = rng.normal(size=(n, 30)), cross_entropy_loss
    else:
        x = rng.normal(size=(n, 1, 28, 28))
        y, loss = torch.from_numpy(rng.integers(0, 10, n)), cross_entropy_loss
    return torch.from_numpy(x.astype(np.float32)), y, off, loss


CASES = [
    ("logistic", [3, 0, 7, 1, 12, 5, 2, 9], 3, 4),
    ("cox-linear", [2, 4, 6, 2, 3, 0, 8], 2, 3),
    ("fraudnet", [5, 1, 0, 9, 4, 4, 13], 2, 4),
    ("paper-mnist-cnn", [3, 1, 5, 2], 2, 2),
]


@pytest.mark.parametrize("gradient", ["vmap", "bmm"])
@pytest.mark.parametrize(("name", "counts", "epochs", "batch"), CASES)
def test_vectorised_equals_per_user_loop(
    name: str, counts: list[int], epochs: int, batch: int, gradient: str
) -> None:
    x, y, off, loss = uldp_data(name, counts)
    model = build_model(name, seed=1)
    flat = flatten_parameters(model)
    spec = LocalTrainingSpec(epochs=epochs, batch_size=batch, lr=0.1)
    orders = epoch_orders(np.random.default_rng(5).random((epochs, len(x))), off, epochs)
    expected = train_groups_loop(model, loss, flat, x, y, off, orders, spec)
    assert float(expected.abs().max()) > 1e-3  # the users did move
    for max_rows in (7, 4096):  # chunked and all at once
        trainer = VectorisedTrainer(model, loss, max_rows=max_rows, gradient=gradient)
        got = trainer.train(flat, x, y, off, orders, spec)
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    empty = np.flatnonzero(np.diff(off) == 0)
    assert torch.all(got[torch.from_numpy(empty)] == 0)


@pytest.mark.parametrize(("name", "counts", "epochs", "batch"), CASES)
def test_gradients_equal_per_user_loop(
    name: str, counts: list[int], epochs: int, batch: int
) -> None:
    x, y, off, loss = uldp_data(name, counts, seed=1)
    model = build_model(name, seed=2)
    flat = flatten_parameters(model)
    expected = group_gradients_loop(model, loss, flat, x, y, off)
    got = VectorisedTrainer(model, loss, max_rows=10).gradients(flat, x, y, off)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------- trainer behaviour and errors


@pytest.mark.parametrize("model_name", ["mlp", "lenet"])
def test_chunking_gives_same_result(model_name: str) -> None:
    spec = LocalTrainingSpec(epochs=1, batch_size=3, lr=0.1, momentum=0.5, weight_decay=1e-2)
    model, flat, features, labels, off, orders = fedavg_setup(model_name, [7, 2, 5, 0, 4], spec)
    data = (flat, features, labels, off, orders, spec)
    full = VectorisedTrainer(model, cross_entropy_loss, max_rows=None).train(*data)
    for chunk in (1, 2, 3, 5, 100):
        trainer = VectorisedTrainer(model, cross_entropy_loss, max_rows=None, chunk_size=chunk)
        torch.testing.assert_close(trainer.train(*data), full, rtol=RTOL, atol=ATOL)
    for rows in (1, 3, 6, 12):
        trainer = VectorisedTrainer(model, cross_entropy_loss, max_rows=rows)
        torch.testing.assert_close(trainer.train(*data), full, rtol=RTOL, atol=ATOL)


def test_empty_groups_do_not_move() -> None:
    spec = LocalTrainingSpec(epochs=2, batch_size=4, lr=0.1, momentum=0.9, weight_decay=0.1)
    model, flat, features, labels, off, orders = fedavg_setup("mlp", [9, 0, 5], spec)
    data = (flat, features, labels, off, orders, spec)
    out = VectorisedTrainer(model, cross_entropy_loss).train(*data)
    assert torch.equal(out[1], torch.zeros_like(flat))
    assert out[0].abs().max() > 0 and out[2].abs().max() > 0
    ref = train_groups_loop(model, cross_entropy_loss, *data)
    assert torch.equal(ref[1], torch.zeros_like(flat))
    # no group at all
    none = VectorisedTrainer(model, cross_entropy_loss).train(
        flat, features, labels, np.array([0]), orders[:, :0], spec
    )
    assert none.shape == (0, flat.numel())


def test_trainer_is_reusable_and_deterministic() -> None:
    spec = LocalTrainingSpec(epochs=1, batch_size=5, lr=0.1, momentum=0.9)
    model, flat, features, labels, off, orders = fedavg_setup("mlp", [12, 8], spec)
    trainer = VectorisedTrainer(model, cross_entropy_loss)
    first = trainer.train(flat, features, labels, off, orders, spec)
    second = trainer.train(flat, features, labels, off, orders, spec)
    assert torch.equal(first, second)
    # steps of 5 + 5, 5 + 3 (width 5) and 2 (the larger client alone) rows, twice
    assert trainer.calls == 2 * 3 and trainer.rows == 2 * (10 + 10 + 2)


def test_partial_batch_is_the_gradient_of_the_smaller_batch() -> None:
    # one client, one step with 3 real samples out of a batch of 8: the update must equal
    # lr * gradient of the mean loss over those 3 samples only
    spec = LocalTrainingSpec(batch_size=8, lr=1.0)
    model, flat, features, labels, off, orders = fedavg_setup("mlp", [3], spec)
    out = VectorisedTrainer(model, cross_entropy_loss).train(
        flat, features, labels, off, orders, spec
    )
    idx = torch.from_numpy(orders[0])
    model.zero_grad()
    torch.autograd.backward(torch.nn.functional.cross_entropy(model(features[idx]), labels[idx]))
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(out[0], -grad, rtol=RTOL, atol=ATOL)


def test_groups_subset_and_independence_from_other_users() -> None:
    x, y, off, loss = uldp_data("logistic", [4, 6, 3, 5])
    model = build_model("logistic", seed=0)
    flat = flatten_parameters(model)
    spec = LocalTrainingSpec(epochs=2, batch_size=2, lr=0.2)
    keys = np.random.default_rng(0).random((2, len(x)))
    orders = epoch_orders(keys, off, 2)
    trainer = VectorisedTrainer(model, loss)
    full = trainer.train(flat, x, y, off, orders, spec)
    chunks = trainer.iter_deltas(flat, x, y, off, orders, spec, groups=[1, 3])
    assert sorted(i for ids, _ in chunks for i in ids) == [1, 3]
    # group 1 alone, with its own keys, trains exactly as inside the silo
    lo, hi = int(off[1]), int(off[2])
    alone_off = np.array([0, hi - lo])
    alone_orders = epoch_orders(keys[:, lo:hi], alone_off, 2)
    alone = trainer.train(flat, x[lo:hi], y[lo:hi], alone_off, alone_orders, spec)
    torch.testing.assert_close(alone[0], full[1], rtol=1e-6, atol=1e-7)


def test_trainer_errors() -> None:
    spec = LocalTrainingSpec(batch_size=4)
    model, flat, features, labels, off, orders = fedavg_setup("mlp", [5, 3], spec)
    with pytest.raises(ParameterError, match="chunk_size"):
        VectorisedTrainer(model, cross_entropy_loss, chunk_size=0)
    with pytest.raises(ParameterError, match="max_rows"):
        VectorisedTrainer(model, cross_entropy_loss, max_rows=0)
    bn = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 4), torch.nn.BatchNorm1d(4))
    with pytest.raises(ParameterError, match="model"):
        VectorisedTrainer(bn, cross_entropy_loss)
    trainer = VectorisedTrainer(model, cross_entropy_loss)
    data = (features, labels, off, orders)
    with pytest.raises(ParameterError, match="lr"):
        trainer.train(flat, *data, LocalTrainingSpec(lr=0.0))
    with pytest.raises(ParameterError, match="global_flat"):
        trainer.train(flat[:-1], *data, spec)
    with pytest.raises(ParameterError, match="global_flat"):
        trainer.train(flat.double(), *data, spec)
    with pytest.raises(ParameterError, match="y"):
        trainer.train(flat, features, labels[:-1], off, orders, spec)
    with pytest.raises(ParameterError, match="offsets"):
        trainer.train(flat, features, labels, off[:-1], orders, spec)
    with pytest.raises(ParameterError, match="orders"):
        trainer.train(flat, features, labels, off, orders[0], spec)
    with pytest.raises(ParameterError, match="orders"):
        trainer.train(flat, features, labels, off, orders + len(features), spec)
    with pytest.raises(ParameterError, match="orders"):
        trainer.train(flat, features, labels, off, orders, LocalTrainingSpec(epochs=2))
    with pytest.raises(ParameterError, match="offsets"):
        trainer.gradients(flat, features, labels, off)
    with pytest.raises(ParameterError, match="offsets"):
        train_groups_loop(model, cross_entropy_loss, flat, *data[:2], off[:-1], orders, spec)
