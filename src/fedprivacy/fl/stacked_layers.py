"""Per-copy gradients without ``vmap``: a model's layers as batched matrix products.

:func:`~fedprivacy.fl.stacked_grad.stacked_gradient` differentiates ``C`` copies of a model with
:func:`torch.func.vmap`, which turns a convolution with per-copy weights into a *grouped*
convolution (one group per copy). On a GPU, cuDNN's weight gradient of such a convolution, with
one to twenty channels per group, is slow: a whole ULDP-AVG round of MNIST ran at 0.6 % of an
H100's FP32 peak (``benchmarks/RESULTS.md``). :func:`bmm_gradient` computes the same gradients
another way:

* the model is traced once with :mod:`torch.fx`; the activations of all the copies' records are
  kept as one ``(C * B, ...)`` batch, so that every layer without parameters (ReLU, pooling,
  flattening) runs once on the whole batch, as in ordinary training;
* a layer with parameters gets the copies' weights as ``(C, *shape)`` tensors: a
  :class:`~torch.nn.Linear` is one batched matrix product (``baddbmm``) and a
  :class:`~torch.nn.Conv2d` is ``unfold`` (im2col) followed by one batched matrix product per
  copy, so its weight gradient is a batched matrix product too (tensor cores on a GPU);
* the copies' losses are independent, so one ``backward`` of their sum gives every copy's own
  gradient.

The model's graph must treat records independently (row-wise layers; no batch statistics): a
probe of two copies and two records is checked against the model itself when the gradient
function is built, and a model that fails it, or has a layer with parameters other than
``Linear``, ``GroupNorm`` and ``Conv2d`` (``groups=1``, zero padding), is refused with
:class:`~fedprivacy.errors.ParameterError` (the ``vmap`` path takes any model).

Examples
--------
>>> import torch
>>> from fedprivacy.fl.losses import cross_entropy_loss
>>> from fedprivacy.fl.stacked_grad import stacked_gradient
>>> from fedprivacy.models.images import PaperMnistCNN
>>> model = PaperMnistCNN()
>>> bmm, num_params = bmm_gradient(model, cross_entropy_loss)
>>> via_vmap, _ = stacked_gradient(model, cross_entropy_loss)
>>> params = 0.1 * torch.randn(3, num_params)     # three copies of the model
>>> x, y = torch.randn(3, 4, 1, 28, 28), torch.randint(0, 10, (3, 4))
>>> mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]])
>>> bool(torch.allclose(bmm(params, x, y, mask), via_vmap(params, x, y, mask), atol=1e-5))
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch import nn
from torch.func import vmap
from torch.nn import functional as F

from fedprivacy.errors import ParameterError
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.params import parameter_shapes, unflatten
from fedprivacy.fl.stacked_grad import GradFn

__all__ = ["STACKED_LAYERS", "bmm_gradient", "stacked_forward"]

Weights = dict[str, torch.Tensor]
StackedLayer = Callable[[nn.Module, Weights, torch.Tensor, int], torch.Tensor]


def _linear(layer: nn.Module, w: Weights, x: torch.Tensor, copies: int) -> torch.Tensor:
    """``x @ W_c^T + b_c`` for the rows of every copy ``c`` (``x``: ``(C * B, ..., in)``)."""
    rows = x.reshape(copies, -1, x.shape[-1])
    weight = w["weight"].transpose(1, 2)
    out = (
        torch.bmm(rows, weight)
        if "bias" not in w
        else torch.baddbmm(w["bias"].unsqueeze(1), rows, weight)
    )
    return out.reshape(*x.shape[:-1], out.shape[-1])


def _patches(x: torch.Tensor, layer: nn.Conv2d) -> torch.Tensor:
    """im2col: ``(N, C_in * kh * kw, out_h, out_w)``, the windows of ``layer`` over ``x``.

    Built from strided views and one copy (``Tensor.unfold``), which ran twice as fast as
    :func:`torch.nn.functional.unfold` (``im2col``) forward and backward on a 2-core CPU.
    """
    (kh, kw), (sh, sw), (dh, dw) = layer.kernel_size, layer.stride, layer.dilation
    padding = layer.padding
    assert isinstance(padding, tuple)
    if any(padding):
        x = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    windows = x.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)[..., ::dh, ::dw]
    n, c, out_h, out_w = windows.shape[:4]
    return windows.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, out_h, out_w)


def _conv2d(layer: nn.Module, w: Weights, x: torch.Tensor, copies: int) -> torch.Tensor:
    """A 2-D convolution with per-copy weights: im2col and one matrix product per record."""
    assert isinstance(layer, nn.Conv2d)
    patches = _patches(x, layer)
    n, k, out_h, out_w = patches.shape
    per_copy = patches.reshape(copies, n // copies, k, out_h * out_w)
    weight = w["weight"].reshape(copies, 1, layer.out_channels, k)
    out = torch.matmul(weight, per_copy)  # (C, B, out, positions)
    if "bias" in w:
        out = out + w["bias"][:, None, :, None]
    return out.reshape(n, layer.out_channels, out_h, out_w)


def _group_norm(layer: nn.Module, w: Weights, x: torch.Tensor, copies: int) -> torch.Tensor:
    """Group normalisation of every record, then each copy's own scale and shift."""
    assert isinstance(layer, nn.GroupNorm)
    out = F.group_norm(x, layer.num_groups, eps=layer.eps)
    if not layer.affine:
        return out
    per_copy = out.reshape(copies, -1, *x.shape[1:])
    spread = (copies, 1, x.shape[1]) + (1,) * (x.dim() - 2)
    scaled = per_copy * w["weight"].reshape(spread) + w["bias"].reshape(spread)
    return scaled.reshape(x.shape)


#: The layers with parameters that :func:`stacked_forward` runs with per-copy weights.
STACKED_LAYERS: dict[type[nn.Module], StackedLayer] = {
    nn.Linear: _linear,
    nn.Conv2d: _conv2d,
    nn.GroupNorm: _group_norm,
}


def _check_layer(name: str, layer: nn.Module) -> None:
    """Raise unless ``layer`` has no parameters of its own or is a supported stacked layer."""
    if not any(True for _ in layer.parameters(recurse=False)):
        return
    if type(layer) not in STACKED_LAYERS:
        raise ParameterError(
            "model", f"layer {name!r} ({type(layer).__name__}) has no batched-matrix form"
        )
    if isinstance(layer, nn.Conv2d) and (
        layer.groups != 1 or layer.padding_mode != "zeros" or isinstance(layer.padding, str)
    ):
        raise ParameterError(
            "model", f"layer {name!r}: only groups=1, numeric zero padding has a batched form"
        )


class _Stacked(torch.fx.Interpreter):
    """Runs a traced model on ``(C * B, ...)`` activations with ``(C, ...)`` weights."""

    def __init__(self, graph: torch.fx.GraphModule, weights: Weights, copies: int) -> None:
        super().__init__(graph)
        self.weights = weights
        self.copies = copies

    def call_module(self, target: Any, args: Any, kwargs: Any) -> Any:
        layer = self.fetch_attr(target)
        rule = STACKED_LAYERS.get(type(layer))
        if rule is None:
            return super().call_module(target, args, kwargs)
        prefix = f"{target}."
        own = {k[len(prefix) :]: v for k, v in self.weights.items() if k.startswith(prefix)}
        return rule(layer, own, args[0], self.copies)


def _trace(model: nn.Module) -> torch.fx.GraphModule:
    """Trace ``model`` and check every layer and attribute the graph reads."""
    try:
        graph = torch.fx.symbolic_trace(model)
    except Exception as exc:  # torch.fx raises many types for untraceable code
        raise ParameterError("model", f"cannot be traced by torch.fx: {exc}") from exc
    for node in graph.graph.nodes:
        if node.op == "call_module":
            _check_layer(str(node.target), graph.get_submodule(str(node.target)))
        elif node.op == "get_attr":
            raise ParameterError("model", f"reads {node.target!r} directly, not through a layer")
    return graph


def stacked_forward(graph: torch.fx.GraphModule, weights: Weights, x: torch.Tensor) -> torch.Tensor:
    """Outputs ``(C, B, ...)`` of ``C`` copies on their inputs ``x`` ``(C, B, ...)``.

    Parameters
    ----------
    graph : torch.fx.GraphModule
        The traced model.
    weights : dict of str to torch.Tensor
        Every parameter of the model by name, with a leading copy dimension ``C``.
    x : torch.Tensor
        Each copy's inputs.

    Returns
    -------
    torch.Tensor
        Each copy's outputs.
    """
    copies, batch = x.shape[0], x.shape[1]
    out = _Stacked(graph, weights, copies).run(x.reshape(copies * batch, *x.shape[2:]))
    assert isinstance(out, torch.Tensor)
    return out.reshape(copies, batch, *out.shape[1:])


def _probe(
    model: nn.Module, graph: torch.fx.GraphModule, input_shape: torch.Size, device: torch.device
) -> None:
    """Raise unless the stacked forward of two perturbed copies equals the model's own."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 2, *input_shape, generator=gen).to(device)
    shapes = parameter_shapes(model)
    flat = torch.cat([p.detach().reshape(-1).float().cpu() for p in model.parameters()])
    spread = 0.01 * float(flat.abs().mean()) + 1e-3  # copies close to the model, yet distinct
    params = (flat + spread * torch.randn(2, flat.numel(), generator=gen)).to(device)
    with torch.no_grad():
        got = stacked_forward(graph, unflatten(params, shapes), x)
        want = [
            torch.func.functional_call(model, unflatten(params[c], shapes), (x[c],))
            for c in range(2)
        ]
    want_t = torch.stack(want)
    scale = float(want_t.abs().max()) + 1.0
    if not torch.allclose(got, want_t, rtol=1e-3, atol=1e-4 * scale):
        raise ParameterError("model", "mixes the records of a batch: it has no batched form")


def bmm_gradient(
    model: nn.Module, loss: MaskedLoss, *, input_shape: torch.Size | None = None
) -> tuple[GradFn, int]:
    """Per-copy gradients of ``loss`` by batched matrix products (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        The architecture; only its structure is used. Its layers with parameters must be
        :data:`STACKED_LAYERS`, every other operation row-wise.
    loss : MaskedLoss
        ``loss(output, target, mask) -> scalar``, one copy's masked mean loss.
    input_shape : torch.Size or None
        One record's shape, to check the model on a probe now; ``None``: checked on the first
        call's records.

    Returns
    -------
    (GradFn, int)
        The batched gradient function, the same as
        :func:`~fedprivacy.fl.stacked_grad.stacked_gradient`'s to float rounding, and ``P``.

    Raises
    ------
    ParameterError
        If the model has buffers, cannot be traced, has a layer without a batched form or mixes
        the records of a batch.
    """
    if any(True for _ in model.buffers()):
        raise ParameterError("model", "must have no buffers (no BatchNorm)")
    if type(model) in STACKED_LAYERS:  # one layer (nn.Linear(3, 2)): traced as a call of it
        model = nn.Sequential(model)  # same parameters, in the same order, named 0.weight ...
    graph = _trace(model)
    shapes = parameter_shapes(model)
    per_copy_loss = vmap(loss)
    checked: list[torch.Size] = []

    def check(shape: torch.Size, device: torch.device) -> None:
        if shape not in checked:
            _probe(model, graph, shape, device)
            checked.append(shape)

    if input_shape is not None:
        check(torch.Size(input_shape), torch.device("cpu"))

    def grad_fn(
        params: torch.Tensor, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        check(x.shape[2:], x.device)
        with torch.enable_grad():
            flat = params.detach().requires_grad_(True)
            out = stacked_forward(graph, unflatten(flat, shapes), x)
            (grads,) = torch.autograd.grad(per_copy_loss(out, y, mask).sum(), flat)
        return grads

    return grad_fn, sum(math.prod(shape) for _, shape in shapes)
