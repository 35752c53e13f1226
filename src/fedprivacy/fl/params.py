"""Flat-parameter helpers: a model's parameters as one float32 vector and back.

The order of the flat vector is always that of :meth:`torch.nn.Module.named_parameters`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from fedprivacy.errors import ParameterError


def parameter_shapes(model: nn.Module) -> list[tuple[str, torch.Size]]:
    """Return the name and shape of every parameter, in ``named_parameters`` order.

    Parameters
    ----------
    model : torch.nn.Module
        Any module.

    Returns
    -------
    list of (str, torch.Size)
        One entry per parameter tensor.

    """
    return [(name, p.shape) for name, p in model.named_parameters()]


def flatten_parameters(model: nn.Module) -> torch.Tensor:
    """Return a 1-D float32 copy of all the parameters of ``model``.

    Parameters
    ----------
    model : torch.nn.Module
        Any module (its parameters may live on any device; the copy stays there).

    Returns
    -------
    torch.Tensor
        Shape ``(P,)`` with ``P`` the number of scalar parameters, in ``named_parameters`` order,
        detached from autograd and sharing no memory with the model.

    """
    params = [p.detach().reshape(-1) for p in model.parameters()]
    if not params:
        return torch.zeros(0, dtype=torch.float32)
    return torch.cat(params).to(torch.float32)


def unflatten(flat: torch.Tensor, shapes: list[tuple[str, torch.Size]]) -> dict[str, torch.Tensor]:
    """Split a flat parameter vector (or a batch of them) into named tensors.

    Parameters
    ----------
    flat : torch.Tensor
        Shape ``(P,)``, or ``(C, P)`` for a batch of ``C`` parameter vectors.
    shapes : list of (str, torch.Size)
        As returned by :func:`parameter_shapes`; their sizes must add up to ``P``.

    Returns
    -------
    dict of str to torch.Tensor
        Name -> tensor of shape ``shape`` (or ``(C, *shape)``). The tensors are views of ``flat``
        (no copy), so writing into them writes into ``flat``.

    Raises
    ------
    ParameterError
        If ``flat`` is not 1-D or 2-D or its last dimension does not match ``shapes``.

    """
    if flat.dim() not in (1, 2):
        raise ParameterError("flat", f"must have shape (P,) or (C, P), got {tuple(flat.shape)}")
    sizes = [math.prod(shape) for _, shape in shapes]
    total = sum(sizes)
    if flat.shape[-1] != total:
        raise ParameterError(
            "flat", f"last dimension must be {total} (sum of the shapes), got {flat.shape[-1]}"
        )
    lead = tuple(flat.shape[:-1])
    out: dict[str, torch.Tensor] = {}
    for (name, shape), chunk in zip(shapes, torch.split(flat, sizes, dim=-1), strict=True):
        out[name] = chunk.view(*lead, *shape)
    return out


def load_flat_(model: nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat parameter vector into the parameters of ``model``, in place.

    Parameters
    ----------
    model : torch.nn.Module
        The module to overwrite.
    flat : torch.Tensor
        Shape ``(P,)`` with ``P`` the number of scalar parameters of ``model``, in
        ``named_parameters`` order (as made by :func:`flatten_parameters`).

    Raises
    ------
    ParameterError
        If ``flat`` does not have shape ``(P,)``.

    """
    shapes = parameter_shapes(model)
    total = sum(math.prod(shape) for _, shape in shapes)
    if flat.shape != (total,):
        raise ParameterError("flat", f"must have shape ({total},), got {tuple(flat.shape)}")
    views = unflatten(flat.detach(), shapes)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(views[name])
