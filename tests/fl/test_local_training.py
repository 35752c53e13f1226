from __future__ import annotations

import numpy as np
import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_training import (
    LocalTrainingSpec,
    VectorisedTrainer,
    batch_plan,
    train_clients_loop,
)
from fedprivacy.fl.params import flatten_parameters
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


# ---------------------------------------------------------------------------- spec and plan


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


def test_batch_plan_properties() -> None:
    sizes = [7, 3, 10, 0, 4]
    spec = LocalTrainingSpec(epochs=2, batch_size=4)
    plan = batch_plan(sizes, spec, np.random.default_rng(1))
    steps = [2 * -(-n // 4) for n in sizes]  # [4, 2, 6, 0, 2]
    assert plan.dtype == np.int64
    assert plan.shape == (5, max(steps), 4)
    for c, n in enumerate(sizes):
        k = steps[c] // 2
        # padding rows after the client's own steps
        assert np.all(plan[c, steps[c] :] == -1)
        for e in range(2):
            epoch = plan[c, e * k : (e + 1) * k]
            # full batches, then one partial batch with its real entries first
            for j, row in enumerate(epoch):
                real = row[row >= 0]
                expected = 4 if (j < k - 1 or n % 4 == 0) else n % 4
                assert real.size == expected
                assert np.all(row[: real.size] >= 0) and np.all(row[real.size :] == -1)
            # each epoch is a permutation of range(n)
            flat = epoch[epoch >= 0]
            assert sorted(flat.tolist()) == list(range(n))
    # fresh permutation per epoch (overwhelmingly likely to differ for n = 10)
    assert not np.array_equal(plan[2, :3], plan[2, 3:6])


def test_batch_plan_deterministic_and_edge_cases() -> None:
    spec = LocalTrainingSpec(batch_size=3)
    a = batch_plan([5, 6], spec, np.random.default_rng(7))
    b = batch_plan([5, 6], spec, np.random.default_rng(7))
    assert np.array_equal(a, b)
    assert batch_plan([0, 0], spec, np.random.default_rng(0)).shape == (2, 0, 3)
    assert batch_plan([], spec, np.random.default_rng(0)).shape == (0, 0, 3)
    with pytest.raises(ParameterError):
        batch_plan([3, -1], spec, np.random.default_rng(0))
    with pytest.raises(ParameterError):
        batch_plan([3], LocalTrainingSpec(batch_size=0), np.random.default_rng(0))


# ------------------------------------------------------------- vectorised == loop (the oracle)

SPECS = {
    "sgd": LocalTrainingSpec(epochs=2, batch_size=4, lr=0.05),
    "momentum+wd": LocalTrainingSpec(
        epochs=2, batch_size=4, lr=0.05, momentum=0.9, weight_decay=1e-3
    ),
}


@pytest.mark.parametrize("spec_name", sorted(SPECS))
@pytest.mark.parametrize("model_name", ["mlp", "lenet", "mnist-cnn", "vgg11"])
def test_vectorised_matches_loop(model_name: str, spec_name: str) -> None:
    shape, num_classes = SHAPES[model_name]
    spec = SPECS[spec_name]
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
    else:
        # different sizes: partial last batches (11 % 4, 6 % 4) and padded steps (6 vs 4 vs 2)
        sizes = [11, 6, 3]
    features, labels, clients = make_data(shape, num_classes, sizes)
    model = build_model(model_name, shape, num_classes, seed=3)
    global_flat = flatten_parameters(model)
    plan = batch_plan(sizes, spec, np.random.default_rng(5))
    assert (plan == -1).any()
    expected = train_clients_loop(model, spec, global_flat, features, labels, clients, plan)
    got = VectorisedTrainer(model, spec).train(global_flat, features, labels, clients, plan)
    assert got.shape == (len(sizes), global_flat.numel()) and got.dtype == torch.float32
    # the clients really moved, and differently
    assert (expected - global_flat).abs().max() > 1e-3
    assert (expected[0] - expected[1]).abs().max() > 1e-3
    torch.testing.assert_close(got, expected, rtol=RTOL, atol=ATOL)
    # the model given to the trainers is not modified
    assert torch.equal(flatten_parameters(model), global_flat)


# ----------------------------------------------------------------- trainer behaviour and errors


def mlp_setup(
    sizes: list[int], spec: LocalTrainingSpec, seed: int = 0
) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor, list[np.ndarray], np.ndarray]:
    features, labels, clients = make_data((1, 8, 8), 10, sizes, seed)
    model = build_model("mlp", (1, 8, 8), 10, seed=seed)
    plan = batch_plan(sizes, spec, np.random.default_rng(seed))
    return model, flatten_parameters(model), features, labels, clients, plan


@pytest.mark.parametrize("model_name", ["mlp", "lenet"])
def test_chunk_size_gives_same_result(model_name: str) -> None:
    shape, num_classes = SHAPES[model_name]
    spec = LocalTrainingSpec(epochs=1, batch_size=3, lr=0.1, momentum=0.5, weight_decay=1e-2)
    sizes = [7, 2, 5, 0, 4]
    features, labels, clients = make_data(shape, num_classes, sizes)
    model = build_model(model_name, shape, num_classes, seed=0)
    global_flat = flatten_parameters(model)
    plan = batch_plan(sizes, spec, np.random.default_rng(2))
    full = VectorisedTrainer(model, spec).train(global_flat, features, labels, clients, plan)
    for chunk in (1, 2, 3, 5, 100):
        trainer = VectorisedTrainer(model, spec, chunk_size=chunk)
        got = trainer.train(global_flat, features, labels, clients, plan)
        torch.testing.assert_close(got, full, rtol=RTOL, atol=ATOL)


def test_all_padding_client_returns_global_unchanged() -> None:
    spec = LocalTrainingSpec(epochs=2, batch_size=4, lr=0.1, momentum=0.9, weight_decay=0.1)
    sizes = [9, 0, 5]
    model, global_flat, features, labels, clients, plan = mlp_setup(sizes, spec)
    assert np.all(plan[1] == -1)
    out = VectorisedTrainer(model, spec).train(global_flat, features, labels, clients, plan)
    assert torch.equal(out[1], global_flat)
    assert not torch.equal(out[0], global_flat) and not torch.equal(out[2], global_flat)
    ref = train_clients_loop(model, spec, global_flat, features, labels, clients, plan)
    assert torch.equal(ref[1], global_flat)
    # a plan with no step at all
    empty = np.full((3, 0, 4), -1, dtype=np.int64)
    out = VectorisedTrainer(model, spec).train(global_flat, features, labels, clients, empty)
    assert torch.equal(out, global_flat.expand(3, -1))


def test_trainer_is_reusable_and_deterministic() -> None:
    spec = LocalTrainingSpec(epochs=1, batch_size=5, lr=0.1, momentum=0.9)
    model, global_flat, features, labels, clients, plan = mlp_setup([12, 8], spec)
    trainer = VectorisedTrainer(model, spec)
    first = trainer.train(global_flat, features, labels, clients, plan)
    second = trainer.train(global_flat, features, labels, clients, plan)
    assert torch.equal(first, second)
    assert first.data_ptr() != global_flat.data_ptr()


def test_partial_batch_is_the_gradient_of_the_smaller_batch() -> None:
    # one client, one step with 3 real samples out of a batch of 8: the update must equal
    # lr * gradient of the mean loss over those 3 samples only
    spec = LocalTrainingSpec(batch_size=8, lr=1.0)
    model, global_flat, features, labels, clients, plan = mlp_setup([3], spec)
    out = VectorisedTrainer(model, spec).train(global_flat, features, labels, clients, plan)
    idx = torch.from_numpy(clients[0])
    model.zero_grad()
    torch.autograd.backward(torch.nn.functional.cross_entropy(model(features[idx]), labels[idx]))
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    torch.testing.assert_close(out[0], global_flat - grad, rtol=RTOL, atol=ATOL)


def test_trainer_errors() -> None:
    spec = LocalTrainingSpec(batch_size=4)
    model, global_flat, features, labels, clients, plan = mlp_setup([5, 3], spec)
    with pytest.raises(ParameterError, match="chunk_size"):
        VectorisedTrainer(model, spec, chunk_size=0)
    with pytest.raises(ParameterError, match="lr"):
        VectorisedTrainer(model, LocalTrainingSpec(lr=0.0))
    bn = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 4), torch.nn.BatchNorm1d(4))
    with pytest.raises(ParameterError, match="model"):
        VectorisedTrainer(bn, spec)
    trainer = VectorisedTrainer(model, spec)
    with pytest.raises(ParameterError, match="global_flat"):
        trainer.train(global_flat[:-1], features, labels, clients, plan)
    with pytest.raises(ParameterError, match="global_flat"):
        trainer.train(global_flat.double(), features, labels, clients, plan)
    with pytest.raises(ParameterError, match="features"):
        trainer.train(global_flat, features.double(), labels, clients, plan)
    with pytest.raises(ParameterError, match="labels"):
        trainer.train(global_flat, features, labels.int(), clients, plan)
    with pytest.raises(ParameterError, match="labels"):
        trainer.train(global_flat, features, labels[:-1], clients, plan)
    with pytest.raises(ParameterError, match="client_indices"):
        trainer.train(global_flat, features, labels, clients[:1], plan)
    with pytest.raises(ParameterError, match="client_indices"):
        trainer.train(global_flat, features, labels, [clients[0], clients[1] + 10_000], plan)
    with pytest.raises(ParameterError, match="plan"):
        trainer.train(global_flat, features, labels, clients, plan[0])
    bad = plan.copy()
    bad[1, 0, 0] = 3  # client 1 has only 3 samples
    with pytest.raises(ParameterError, match="plan"):
        trainer.train(global_flat, features, labels, clients, bad)
    bad[1, 0, 0] = -2
    with pytest.raises(ParameterError, match="plan"):
        train_clients_loop(model, spec, global_flat, features, labels, clients, bad)
