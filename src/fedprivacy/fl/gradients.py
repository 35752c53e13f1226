"""How the vectorised trainer differentiates its stack of model copies: a registry of two.

* ``"vmap"``: :func:`torch.func.vmap` over :func:`torch.func.grad`
  (:func:`~fedprivacy.fl.stacked_grad.stacked_gradient`); any model without buffers. On a CPU
  the fastest (oneDNN's grouped convolutions).
* ``"bmm"``: the model's ``Linear`` and ``Conv2d`` layers as batched matrix products and one
  ``backward`` (:func:`~fedprivacy.fl.stacked_layers.bmm_gradient`); models whose other
  operations are row-wise. Meant for a GPU, where cuDNN's grouped convolutions are slow.

Both give the same gradients to float rounding (``tests/fl/test_stacked_layers.py``).

Examples
--------
>>> from torch import nn
>>> from fedprivacy.fl.losses import cross_entropy_loss
>>> sorted(GRADIENTS), default_gradient("cpu")
(['bmm', 'vmap'], 'vmap')
>>> grad_fn, num_params = gradient_function("bmm", nn.Linear(3, 2), cross_entropy_loss)
>>> num_params
8
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import torch
from torch import nn

from fedprivacy._validation import require_one_of
from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.stacked_grad import GradFn, stacked_gradient
from fedprivacy.fl.stacked_layers import bmm_gradient

__all__ = ["GRADIENTS", "GradientBuilder", "default_gradient", "gradient_function"]

GradientBuilder = Callable[[nn.Module, MaskedLoss, "int | None"], tuple[GradFn, int]]
"""``builder(model, loss, chunk_size) -> (grad_fn, num_params)``."""


def _vmap(model: nn.Module, loss: MaskedLoss, chunk_size: int | None) -> tuple[GradFn, int]:
    return stacked_gradient(model, loss, chunk_size=chunk_size)


def _bmm(model: nn.Module, loss: MaskedLoss, chunk_size: int | None) -> tuple[GradFn, int]:
    if chunk_size is not None:
        raise ParameterError("chunk_size", "applies to the vmap gradient only")
    return bmm_gradient(model, loss)


#: Every way to differentiate the stack, by name.
GRADIENTS: Mapping[str, GradientBuilder] = MappingProxyType({"vmap": _vmap, "bmm": _bmm})


def gradient_function(
    name: str, model: nn.Module, loss: MaskedLoss, chunk_size: int | None = None
) -> tuple[GradFn, int]:
    """The stacked gradient function ``name`` of :data:`GRADIENTS` for ``model`` and ``loss``.

    Parameters
    ----------
    name : {"vmap", "bmm"}
        Which way.
    model : torch.nn.Module
        The architecture.
    loss : MaskedLoss
        One copy's masked mean loss.
    chunk_size : int or None
        ``"vmap"`` only: copies per ``vmap`` call.

    Returns
    -------
    (GradFn, int)
        ``grad_fn(params (C, P), x, y, mask) -> (C, P)`` and ``P``.

    Raises
    ------
    ParameterError
        If ``name`` is unknown (listing the names), the model does not suit it, or a
        ``chunk_size`` is given to ``"bmm"``.
    """
    require_one_of("gradient", name, tuple(GRADIENTS))
    return GRADIENTS[name](model, loss, chunk_size)


def default_gradient(device: str | torch.device) -> str:
    """``"bmm"`` on a CUDA device, ``"vmap"`` elsewhere (see the module docstring)."""
    return "bmm" if torch.device(device).type == "cuda" else "vmap"
