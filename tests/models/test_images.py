from __future__ import annotations

import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.models.images import VGG11, DigitsMLP, LeNet5, MnistCNN
from fedprivacy.models.registry import FEDAVG_MODELS as MODELS
from fedprivacy.models.registry import build_model, count_parameters

CASES = [
    ("mnist-cnn", (1, 28, 28), 10, MnistCNN, 1_663_370),
    ("lenet", (3, 32, 32), 10, LeNet5, 62_006),
    ("vgg11", (3, 32, 32), 100, VGG11, 9_271_780),
    ("mlp", (1, 8, 8), 10, DigitsMLP, 9_610),
    ("mlp-wide", (1, 8, 8), 10, DigitsMLP, 999_985),
]


def test_models_tuple() -> None:
    assert MODELS == ("mnist-cnn", "lenet", "vgg11", "mlp", "mlp-wide")
    assert sorted(name for name, *_ in CASES) == sorted(MODELS)


def test_mnist_cnn_has_exactly_the_papers_parameter_count() -> None:
    assert count_parameters(MnistCNN()) == 1_663_370


@pytest.mark.parametrize(("name", "shape", "num_classes", "cls", "count"), CASES)
def test_build_model(
    name: str,
    shape: tuple[int, int, int],
    num_classes: int,
    cls: type[torch.nn.Module],
    count: int,
) -> None:
    model = build_model(name, shape, num_classes, seed=0)
    assert isinstance(model, cls)
    assert count_parameters(model) == count
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert list(model.buffers()) == []  # pure function of the parameters (vmap-able)
    out = model(torch.randn(2, *shape))
    assert out.shape == (2, num_classes)


def test_mlp_any_shape_and_other_class_counts() -> None:
    model = build_model("mlp", (3, 4, 5), 7, seed=0)
    assert isinstance(model, DigitsMLP)
    assert count_parameters(model) == 60 * 128 + 128 + 128 * 7 + 7
    assert model(torch.randn(4, 3, 4, 5)).shape == (4, 7)
    lenet100 = build_model("lenet", (3, 32, 32), 100, seed=0)
    assert lenet100(torch.randn(1, 3, 32, 32)).shape == (1, 100)
    assert count_parameters(build_model("vgg11", (3, 32, 32), 10, seed=0)) == 9_225_610


@pytest.mark.parametrize("name", MODELS)
def test_build_model_is_deterministic_by_seed(name: str) -> None:
    shape = {"mnist-cnn": (1, 28, 28), "mlp": (1, 8, 8)}.get(name, (3, 32, 32))
    state = torch.random.get_rng_state()
    a = flatten_parameters(build_model(name, shape, 10, seed=42))
    b = flatten_parameters(build_model(name, shape, 10, seed=42))
    c = flatten_parameters(build_model(name, shape, 10, seed=43))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    # the global random state is left alone
    assert torch.equal(torch.random.get_rng_state(), state)


def test_build_model_errors() -> None:
    with pytest.raises(ParameterError) as info:
        build_model("resnet", (3, 32, 32), 10, seed=0)
    assert info.value.name == "model"
    for name, shape in [
        ("mnist-cnn", (3, 32, 32)),
        ("mnist-cnn", (1, 32, 32)),
        ("lenet", (1, 28, 28)),
        ("vgg11", (3, 28, 28)),
    ]:
        with pytest.raises(ParameterError) as info:
            build_model(name, shape, 10, seed=0)
        assert info.value.name == "model"
    with pytest.raises(ParameterError, match="input_shape"):
        build_model("mlp", (8, 8), 10, seed=0)
    with pytest.raises(ParameterError, match="input_shape"):
        build_model("mlp", (1, 0, 8), 10, seed=0)
    with pytest.raises(ParameterError, match="num_classes"):
        build_model("mlp", (1, 8, 8), 1, seed=0)
    with pytest.raises(ParameterError, match="seed"):
        build_model("mlp", (1, 8, 8), 10, seed=-1)
