"""Flat parameter vectors of a model: flatten, unflatten (views), load."""

from __future__ import annotations

import pytest
import torch

from fedprivacy.errors import ParameterError
from fedprivacy.fl.params import flatten_parameters, load_flat_, parameter_shapes, unflatten
from fedprivacy.models.registry import build_model


def test_flatten_unflatten_load_roundtrip() -> None:
    model = build_model("lenet", (3, 32, 32), 10, seed=0)
    shapes = parameter_shapes(model)
    assert [name for name, _ in shapes] == [name for name, _ in model.named_parameters()]
    flat = flatten_parameters(model)
    assert flat.shape == (62_006,) and flat.dtype == torch.float32
    # a copy, not a view
    next(model.parameters()).data.add_(1.0)
    assert not torch.equal(flatten_parameters(model), flat)
    load_flat_(model, flat)
    assert torch.equal(flatten_parameters(model), flat)
    views = unflatten(flat, shapes)
    for name, p in model.named_parameters():
        assert torch.equal(views[name], p)
    # views share memory with flat
    views["conv1.bias"].zero_()
    assert torch.equal(flat[150 * 3 : 150 * 3 + 6], torch.zeros(6))


def test_unflatten_batched() -> None:
    model = build_model("mlp", (1, 8, 8), 10, seed=0)
    shapes = parameter_shapes(model)
    flat = flatten_parameters(model)
    stack = torch.stack([flat, 2 * flat, 3 * flat])
    views = unflatten(stack, shapes)
    for name, p in model.named_parameters():
        assert views[name].shape == (3, *p.shape)
        torch.testing.assert_close(views[name][2], 3 * p.detach())
    views["fc2.bias"][1].fill_(7.0)
    assert torch.all(stack[1, -10:] == 7.0)


def test_flat_helper_errors() -> None:
    model = build_model("mlp", (1, 8, 8), 10, seed=0)
    shapes = parameter_shapes(model)
    with pytest.raises(ParameterError, match="flat"):
        unflatten(torch.zeros(5), shapes)
    with pytest.raises(ParameterError, match="flat"):
        unflatten(torch.zeros(1, 1, 9_610), shapes)
    with pytest.raises(ParameterError, match="flat"):
        load_flat_(model, torch.zeros(9_609))
