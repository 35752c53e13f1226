import numpy as np
import pytest
import torch
from torch import nn

from fedprivacy.attacks.image_metrics import denormalise, mse, psnr
from fedprivacy.attacks.inversion import (
    InversionConfig,
    batch_gradient,
    cosine_distance,
    gradient_from_update,
    invert_gradient,
    recover_labels,
    total_variation,
)
from fedprivacy.errors import ParameterError


def _tiny_cnn(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.Sigmoid(),
        nn.Flatten(),
        nn.Linear(4 * 6 * 6, 5),
    )


def test_inversion_recovers_one_image_from_its_exact_gradient():
    model = _tiny_cnn()
    gen = torch.Generator().manual_seed(3)
    # a smooth image in [0, 1]: a gradient blob
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 6), torch.linspace(0, 1, 6), indexing="ij")
    image = (0.2 + 0.6 * xx * (1 - yy) + 0.05 * torch.rand(6, 6, generator=gen)).view(1, 1, 6, 6)
    target = batch_gradient(model, image, torch.tensor([3]))
    labels = recover_labels(target, 1)
    assert labels.tolist() == [3]
    out = invert_gradient(
        model,
        target,
        (1, 6, 6),
        labels,
        InversionConfig(iterations=800, restarts=2, tv_weight=1e-4, seed=0),
        bounds=(torch.zeros(1, 1, 1), torch.ones(1, 1, 1)),
    )
    score = psnr(image.numpy(), out.images.numpy())[0]
    assert score > 30, score
    assert out.loss < 1e-3
    # a random image is far from it: the PSNR is the attack's, not the metric's
    assert psnr(image.numpy(), torch.rand(1, 1, 6, 6, generator=gen).numpy())[0] < 15


def test_gradient_from_update_inverts_one_sgd_step():
    model = _tiny_cnn(1)
    x, y = torch.rand(2, 1, 6, 6), torch.tensor([0, 4])
    grads = batch_gradient(model, x, y)
    update = -0.05 * torch.cat([g.reshape(-1) for g in grads])
    back = gradient_from_update(model, update, lr=0.05)
    for a, b in zip(grads, back, strict=True):
        torch.testing.assert_close(a, b)
    assert float(cosine_distance(grads, back)) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ParameterError):
        gradient_from_update(model, update[:-1])


def test_label_recovery_for_batches_of_distinct_labels():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 10))
    for labels in ([7], [1, 8], [0, 4, 9], [2, 3, 5, 6]):
        x = torch.rand(len(labels), 1, 4, 4)
        grads = batch_gradient(model, x, torch.tensor(labels))
        assert recover_labels(grads, len(labels)).tolist() == sorted(labels)
    with pytest.raises(ParameterError):
        recover_labels(grads, 11)


def test_psnr_and_mse_by_hand():
    a = np.zeros((2, 3, 2, 2))
    b = a.copy()
    b[0] += 0.5  # every pixel off by 0.5: MSE 0.25, PSNR 10 log10(4)
    b[1, 0, 0, 0] = 1.0  # one pixel of 12 off by 1: MSE 1/12
    np.testing.assert_allclose(mse(a, b), [0.25, 1 / 12])
    np.testing.assert_allclose(psnr(a, b), [10 * np.log10(4), 10 * np.log10(12)])
    assert np.isinf(psnr(a, a)).all()
    with pytest.raises(ParameterError):
        mse(a, b[:1])


def test_denormalise_maps_back_and_clips():
    mean_std = ((0.5,), (0.25,))
    x = np.array([[[[0.0, 2.0, -2.0, 10.0]]]])
    np.testing.assert_allclose(denormalise(x, mean_std), [[[[0.5, 1.0, 0.0, 1.0]]]])


def test_total_variation_is_zero_on_flat_images():
    assert float(total_variation(torch.ones(1, 3, 4, 4))) == 0.0
    assert float(total_variation(torch.eye(4).view(1, 1, 4, 4))) > 0


def test_bad_settings_are_typed_errors():
    with pytest.raises(ParameterError):
        InversionConfig(iterations=0).validate()
    with pytest.raises(ParameterError):
        InversionConfig(lr=-1.0).validate()
