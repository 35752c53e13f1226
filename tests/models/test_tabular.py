from __future__ import annotations

import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.models.images import PaperMnistCNN
from fedprivacy.models.registry import build_model, count_parameters
from fedprivacy.models.tabular import CoxLinear, FraudNet, LogisticRegression


def test_parameter_counts() -> None:
    # the authors' CNNMnist: 260 + 5020 + 16050 + 510 ("about 20K" in the paper)
    assert count_parameters(PaperMnistCNN()) == 21_840
    # PrivateFraudNet(30, 30, 3) without dropout ("about 4K"); the authors' 4 blocks: 5,012
    assert count_parameters(FraudNet()) == 4_022
    assert count_parameters(FraudNet(num_blocks=4)) == 5_012
    assert count_parameters(LogisticRegression()) == 14
    assert count_parameters(CoxLinear()) == 40


@pytest.mark.parametrize(
    ("name", "shape", "out"),
    [
        ("logistic", (5, 13), (5,)),
        ("cox-linear", (5, 39), (5,)),
        ("paper-mnist-cnn", (5, 1, 28, 28), (5, 10)),
        ("fraudnet", (5, 30), (5, 2)),
    ],
)
def test_models_pure_and_shapes(name: str, shape: tuple[int, ...], out: tuple[int, ...]) -> None:
    model = build_model(name, seed=3)
    assert not list(model.buffers())
    x = torch.randn(*shape)
    assert model(x).shape == out
    assert torch.equal(model(x), model(x))  # no dropout


def test_build_model_seeded_and_leaves_global_rng() -> None:
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = build_model("fraudnet", seed=7)
    after = torch.rand(3)
    b = build_model("fraudnet", seed=7)
    assert torch.equal(before, after)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q)
    with pytest.raises(ParameterError, match="model"):
        build_model("resnet")
