from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.models import (
    CoxLinear,
    FraudNet,
    LogisticRegression,
    PaperMnistCNN,
    accuracy,
    binary_logistic_loss,
    build_model,
    concordance_index,
    count_parameters,
    cox_loss,
    cross_entropy_loss,
    roc_auc,
    task_for,
)


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


def test_cox_loss_hand_computed_with_ties() -> None:
    s = [0.5, -0.2, 1.0, 0.3]
    times = [5.0, 3.0, 3.0, 8.0]
    events = [1.0, 1.0, 0.0, 1.0]
    e = math.exp
    # Breslow risk sets: T=5 -> {0, 3}; T=3 -> everyone (the tied censored record 2 included);
    # T=8 -> {3}; record 2 is censored
    expected = (
        (math.log(e(0.5) + e(0.3)) - 0.5)
        + (math.log(e(0.5) + e(-0.2) + e(1.0) + e(0.3)) + 0.2)
        + (math.log(e(0.3)) - 0.3)
    ) / 4
    target = torch.tensor(list(zip(events, times, strict=True)))
    value = cox_loss(torch.tensor(s), target, torch.ones(4))
    assert float(value) == pytest.approx(expected, rel=1e-6)


def test_cox_loss_mask_padding_and_flamby_without_ties() -> None:
    g = torch.Generator().manual_seed(0)
    s = torch.randn(7, generator=g)
    times = torch.randperm(7, generator=g).float() + 1.0
    events = torch.tensor([1, 0, 1, 1, 0, 1, 1.0])
    target = torch.stack([events, times], 1)
    full = cox_loss(s, target, torch.ones(7))
    # padding rows (any values) are excluded from the risk sets and the mean
    s_pad = torch.cat([s, torch.tensor([9.0, -3.0])])
    t_pad = torch.cat([target, torch.tensor([[1.0, 100.0], [1.0, 0.5]])])
    mask = torch.cat([torch.ones(7), torch.zeros(2)])
    assert float(cox_loss(s_pad, t_pad, mask)) == pytest.approx(float(full), rel=1e-6)
    # FLamby's BaselineLoss (cumulative sum over decreasing times) agrees without ties
    order = torch.argsort(-times)
    ss, ee = s[order], events[order]
    flamby = (-(ss - torch.log(torch.exp(ss).cumsum(0))) * ee).mean()
    assert float(full) == pytest.approx(float(flamby), rel=1e-6)
    # one record: nothing to compare
    assert float(cox_loss(s[:1], target[:1], torch.ones(1))) == pytest.approx(0.0, abs=1e-7)


def _c_index_brute(t: np.ndarray, r: np.ndarray, e: np.ndarray) -> float:
    num = den = 0.0
    for i, j in itertools.permutations(range(len(t)), 2):
        if not e[i]:
            continue
        if t[i] < t[j] or (t[i] == t[j] and not e[j]):
            den += 1
            num += 1.0 if r[i] > r[j] else 0.5 if r[i] == r[j] else 0.0
    return num / den


def test_concordance_index_against_pair_count() -> None:
    assert concordance_index([1, 2, 3], [3, 2, 1], [1, 1, 1]) == 1.0
    assert concordance_index([1, 2, 3], [1, 2, 3], [1, 1, 1]) == 0.0
    assert concordance_index([1, 2, 3], [1, 1, 1], [1, 1, 1]) == 0.5
    assert math.isnan(concordance_index([1, 2], [0.1, 0.2], [0, 0]))
    rng = np.random.default_rng(0)
    for _ in range(5):
        n = 40
        t = rng.integers(1, 12, n).astype(float)  # many tied times
        r = np.round(rng.normal(size=n), 1)  # tied risks
        e = rng.random(n) < 0.6
        assert concordance_index(t, r, e) == pytest.approx(_c_index_brute(t, r, e), abs=1e-12)


def test_roc_auc_and_accuracy() -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 200)
    s = np.round(rng.normal(size=200) + y, 1)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert math.isnan(roc_auc([0.1, 0.2], [1, 1]))
    assert accuracy(np.array([1.0, -1.0, 2.0]), np.array([1, 0, 0])) == pytest.approx(2 / 3)
    logits = np.array([[0.1, 0.9], [2.0, 0.0]])
    assert accuracy(logits, np.array([1, 1])) == 0.5


def test_masked_losses_are_means_over_real_rows() -> None:
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(6, 3, generator=g)
    y = torch.tensor([0, 2, 1, 1, 0, 2])
    mask = torch.tensor([1, 1, 0, 1, 0, 0.0])
    real = mask.bool()
    assert float(cross_entropy_loss(logits, y, mask)) == pytest.approx(
        float(torch.nn.functional.cross_entropy(logits[real], y[real]))
    )
    z = torch.randn(6, generator=g)
    yb = torch.tensor([0, 1, 1, 0, 1, 0])
    assert float(binary_logistic_loss(z, yb, mask)) == pytest.approx(
        float(torch.nn.functional.binary_cross_entropy(torch.sigmoid(z[real]), yb[real].float())),
        rel=1e-5,
    )


def test_task_for() -> None:
    assert task_for("heart_disease", "binary", 13, 2).metric_name == "accuracy"
    assert task_for("tcga_brca", "survival", 39, 0).metric_name == "c_index"
    assert task_for("mnist", "multiclass", 784, 10).model_name == "paper-mnist-cnn"
    assert task_for("creditcard-synthetic", "binary", 30, 2).model_name == "fraudnet"
    with pytest.raises(ParameterError, match="dataset"):
        task_for("cifar10", "multiclass", 3072, 10)
    with pytest.raises(ParameterError, match="task"):
        task_for("tcga_brca", "binary", 39, 2)
