from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

from fedprivacy.errors import ParameterError
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.models.images import VGG11, DigitsMLP, LeNet5, MnistCNN, PaperMnistCNN
from fedprivacy.models.registry import (
    FEDAVG_MODELS,
    REGISTRY,
    ModelBuilder,
    build_model,
    model_names,
)
from fedprivacy.models.tabular import CoxLinear, FraudNet, LogisticRegression

# name -> (input shape, num_classes, the same model built directly, output shape of a batch of 2)
DIRECT: dict[str, tuple[tuple[int, ...], int, Callable[[], nn.Module], tuple[int, ...]]] = {
    "mnist-cnn": ((1, 28, 28), 10, lambda: MnistCNN(10), (2, 10)),
    "lenet": ((3, 32, 32), 10, lambda: LeNet5(10), (2, 10)),
    "vgg11": ((3, 32, 32), 100, lambda: VGG11(100), (2, 100)),
    "mlp": ((1, 8, 8), 10, lambda: DigitsMLP(64, 10), (2, 10)),
    "mlp-wide": ((1, 8, 8), 10, lambda: DigitsMLP(64, 10, hidden=13333), (2, 10)),
    "logistic": ((13,), 2, lambda: LogisticRegression(13), (2,)),
    "cox-linear": ((39,), 0, lambda: CoxLinear(39), (2,)),
    "paper-mnist-cnn": ((1, 28, 28), 10, lambda: PaperMnistCNN(10), (2, 10)),
    "fraudnet": ((30,), 2, lambda: FraudNet(30), (2, 2)),
}


@pytest.fixture
def scratch_name() -> Iterator[str]:
    name = "test-scratch-model"
    yield name
    if name in REGISTRY:
        REGISTRY.unregister(name)


def test_one_registry_holds_every_model() -> None:
    assert model_names() == tuple(DIRECT)
    assert set(FEDAVG_MODELS) <= set(REGISTRY)


@pytest.mark.parametrize("name", list(DIRECT))
def test_defaults_and_initialisation_match_direct_construction(name: str) -> None:
    shape, classes, direct, out = DIRECT[name]
    model = build_model(name, seed=5)
    assert (
        build_model(name, shape, classes, seed=5).state_dict().keys() == model.state_dict().keys()
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        reference = direct()
    # the same parameters in the same order: a seed initialises a model as it always did
    assert type(model) is type(reference)
    assert torch.equal(flatten_parameters(model), flatten_parameters(reference))
    assert torch.equal(
        flatten_parameters(build_model(name, shape, classes, seed=5)), flatten_parameters(model)
    )
    assert not list(model.buffers())
    assert model(torch.zeros(2, *shape)).shape == out


def test_tabular_models_take_any_number_of_features() -> None:
    model = build_model("logistic", (5,), seed=0)
    assert isinstance(model, LogisticRegression) and model(torch.zeros(3, 5)).shape == (3,)
    assert build_model("fraudnet", (12,), 2, seed=0)(torch.zeros(3, 12)).shape == (3, 2)
    assert build_model("cox-linear", (7,), 0, seed=0)(torch.zeros(3, 7)).shape == (3,)


def test_shape_and_class_errors() -> None:
    with pytest.raises(ParameterError, match="input_shape"):
        build_model("logistic", (1, 8, 8), seed=0)
    with pytest.raises(ParameterError, match="input_shape"):
        build_model("fraudnet", (0,), seed=0)
    with pytest.raises(ParameterError, match="input_shape"):
        build_model("fraudnet", 30, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError) as info:
        build_model("paper-mnist-cnn", (3, 32, 32), seed=0)
    assert info.value.name == "model"
    with pytest.raises(ParameterError, match="num_classes"):
        build_model("logistic", (13,), 3, seed=0)
    with pytest.raises(ParameterError, match="num_classes"):
        build_model("cox-linear", (39,), 2, seed=0)
    with pytest.raises(ParameterError, match="num_classes"):
        build_model("fraudnet", num_classes=2.0, seed=0)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="seed"):
        build_model("logistic", seed=-1)
    with pytest.raises(ParameterError, match="unknown model 'resnet'; choose one of mnist-cnn"):
        build_model("resnet")


def test_register_refuses_duplicates_and_builds_new_models(scratch_name: str) -> None:
    builder = ModelBuilder(lambda shape, k: nn.Linear(shape[0], k), (4,), 3, fixed_shape=False)
    assert REGISTRY.register(scratch_name, builder) is builder
    model = build_model(scratch_name, (6,), seed=0)
    assert isinstance(model, nn.Linear) and model.weight.shape == (3, 6)
    with pytest.raises(ParameterError, match="registered already"):
        REGISTRY.register(scratch_name, builder)
    for name in model_names():
        with pytest.raises(ParameterError, match="registered already"):
            REGISTRY.register(name, REGISTRY[name])
    with pytest.raises(ParameterError, match="name"):
        REGISTRY.register("", builder)
