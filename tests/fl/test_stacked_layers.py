"""The batched-matrix gradient (``gradient="bmm"``) against ``vmap``, and what it refuses."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedprivacy.errors import ParameterError
from fedprivacy.fl.gradients import GRADIENTS, default_gradient, gradient_function
from fedprivacy.fl.losses import cross_entropy_loss
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.stacked_layers import bmm_gradient


class Strided(nn.Module):
    """Convolutions with stride, padding, dilation and no bias; a GroupNorm without affine."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(2, 4, 3, stride=2, padding=1, bias=False)
        self.b = nn.Conv2d(4, 3, (3, 2), padding=(2, 1), dilation=2)
        self.norm = nn.GroupNorm(1, 3, affine=False)
        self.head = nn.Linear(3 * 6 * 6, 5, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(torch.relu(self.b(torch.tanh(self.a(x)))))
        out: torch.Tensor = self.head(h.flatten(1))
        return out


def _stack(model: nn.Module, copies: int) -> torch.Tensor:
    flat = flatten_parameters(model)
    gen = torch.Generator().manual_seed(1)
    return flat + 0.05 * torch.randn(copies, flat.numel(), generator=gen)


def test_bmm_equals_vmap_on_strided_padded_dilated_layers() -> None:
    torch.manual_seed(0)
    model = Strided()
    params = _stack(model, 3)
    x, y = torch.randn(3, 4, 2, 11, 12), torch.randint(0, 5, (3, 4))
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
    got = gradient_function("bmm", model, cross_entropy_loss)[0](params, x, y, mask)
    want = gradient_function("vmap", model, cross_entropy_loss)[0](params, x, y, mask)
    assert float(want.abs().max()) > 1e-3
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    # each copy gets its own gradient: the third copy's loss ignores the other copies' records
    alone = gradient_function("bmm", model, cross_entropy_loss)[0](
        params[2:], x[2:, :1], y[2:, :1], mask[2:, :1]
    )
    torch.testing.assert_close(got[2:], alone, rtol=1e-4, atol=1e-6)


class MixesRecords(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        return h - h.mean(0)  # batch statistics: a record's output depends on the others


class Branches(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) if x.sum() > 0 else -self.fc(x)


class OwnWeight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w


REFUSED = [
    (nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)), "no buffers"),
    (nn.Sequential(nn.Conv1d(1, 2, 3), nn.Flatten()), "Conv1d.*no batched-matrix form"),
    (nn.Sequential(nn.Conv2d(2, 4, 3, groups=2)), "groups=1"),
    (nn.Sequential(nn.Conv2d(2, 4, 3, padding="same")), "numeric zero padding"),
    (Branches(), "cannot be traced"),
    (OwnWeight(), "reads 'w' directly"),
]


@pytest.mark.parametrize(("model", "match"), REFUSED)
def test_models_without_a_batched_form_are_refused(model: nn.Module, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        bmm_gradient(model, cross_entropy_loss)


def test_a_model_mixing_its_records_is_refused_by_the_probe() -> None:
    grad_fn, num_params = bmm_gradient(MixesRecords(), cross_entropy_loss)
    params = torch.zeros(2, num_params)
    x, y, mask = torch.randn(2, 3, 3), torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3)
    with pytest.raises(ParameterError, match="mixes the records"):
        grad_fn(params, x, y, mask)
    with pytest.raises(ParameterError, match="mixes the records"):  # or at once, given a shape
        bmm_gradient(MixesRecords(), cross_entropy_loss, input_shape=torch.Size([3]))


def test_registry_names_and_device_defaults() -> None:
    assert set(GRADIENTS) == {"vmap", "bmm"}
    assert default_gradient("cpu") == "vmap" and default_gradient("cuda:1") == "bmm"
    with pytest.raises(ParameterError, match="gradient: must be one of vmap, bmm"):
        gradient_function("loop", nn.Linear(3, 2), cross_entropy_loss)
    with pytest.raises(ParameterError, match="chunk_size: applies to the vmap gradient only"):
        gradient_function("bmm", nn.Linear(3, 2), cross_entropy_loss, chunk_size=4)
