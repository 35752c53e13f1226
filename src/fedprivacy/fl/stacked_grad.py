"""The gradient core of the vectorised trainer: one masked loss, many flat parameter vectors.

:class:`~fedprivacy.fl.local_training.VectorisedTrainer` trains many copies of one model at
once (FedAvg's clients, ULDP-FL's users within a silo): the copies' parameters are the rows of a
``(C, P)`` tensor, and :func:`stacked_gradient` returns ``vmap(grad(loss))`` over those rows,
where ``loss(flat, x, y, mask)`` calls the model through :func:`torch.func.functional_call` and
reduces with a :data:`~fedprivacy.fl.losses.MaskedLoss` (the mean over the real rows of a
padded batch).

Examples
--------
>>> import torch
>>> from torch import nn
>>> from fedprivacy.fl.losses import cross_entropy_loss
>>> model = nn.Linear(3, 2)
>>> grad_fn, num_params = stacked_gradient(model, cross_entropy_loss)
>>> params = torch.zeros(4, num_params)              # four copies of the model
>>> x, y = torch.randn(4, 5, 3), torch.zeros(4, 5, dtype=torch.long)
>>> tuple(grad_fn(params, x, y, torch.ones(4, 5)).shape)
(4, 8)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.params import parameter_shapes, unflatten

__all__ = ["GradFn", "stacked_gradient"]

GradFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``grad_fn(params (C, P), x (C, B, ...), y (C, B), mask (C, B)) -> gradients (C, P)``."""


def stacked_gradient(
    model: nn.Module, loss: MaskedLoss, *, chunk_size: int | None = None
) -> tuple[GradFn, int]:
    """Per-copy gradients of ``loss`` for a stack of flat parameter vectors of ``model``.

    Parameters
    ----------
    model : torch.nn.Module
        The architecture; only its structure is used (it is not modified). It must be a pure
        function of its parameters: no buffers (no BatchNorm).
    loss : MaskedLoss
        ``loss(output, target, mask) -> scalar``.
    chunk_size : int or None
        Copies differentiated per ``vmap`` call (:func:`torch.func.vmap`'s ``chunk_size``);
        ``None``: all at once.

    Returns
    -------
    (GradFn, int)
        The batched gradient function and the number of parameters ``P``.

    Raises
    ------
    ParameterError
        If the model has buffers.
    """
    if any(True for _ in model.buffers()):
        raise ParameterError(
            "model",
            "must have no buffers (no BatchNorm): it must be a pure function of its parameters",
        )
    shapes = parameter_shapes(model)

    def flat_loss(
        flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        return loss(functional_call(model, unflatten(flat, shapes), (x,)), y, mask)

    grad_fn: GradFn = vmap(grad(flat_loss), chunk_size=chunk_size)
    return grad_fn, sum(math.prod(shape) for _, shape in shapes)
