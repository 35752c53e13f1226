from __future__ import annotations

import math

import pytest
import torch

from fedprivacy.fl.losses import (
    binary_logistic_loss,
    cox_loss,
    cross_entropy_loss,
)


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
