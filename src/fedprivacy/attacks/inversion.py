"""Gradient inversion: images from a model update (Geiping et al., "Inverting Gradients", 2020).

The server holds the global model ``x`` and (after the least-squares step of
:mod:`fedprivacy.attacks.least_squares`) an estimate of one user's update ``x_u - x``. For one
local SGD step on a batch, the update is ``-lr * g`` with ``g`` the gradient of the batch loss, so
its direction is known up to scale. The attack searches images ``z`` whose gradient
``g(z)`` points the same way:

    minimise  1 - cos(g(z), g_target) + tv_weight * TV(z)

(the cosine-similarity objective with a total-variation prior, eq. (4) of Geiping et al.),
with Adam on the sign of the gradient, a step decay at 3/8, 5/8 and 7/8 of the iterations,
the pixels kept in the data's range, from random noise, keeping the best of several restarts.
The labels come first, from the last layer (iDLG, Zhao et al. 2020): for a cross-entropy loss
the gradient row of the last linear layer of class ``c`` is ``sum_i (p_ic - y_ic) h_i``; with
non-negative features ``h`` (ReLU) it is negative exactly for the labels of the batch, so the
``B`` most negative row sums give the labels of a batch of ``B`` images of distinct labels.

Examples
--------
>>> import torch
>>> torch.manual_seed(0)  # doctest: +ELLIPSIS
<torch._C.Generator object at ...>
>>> model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 3))
>>> image = torch.rand(1, 1, 2, 2)
>>> target = batch_gradient(model, image, torch.tensor([2]))
>>> recover_labels(target, 1).tolist()
[2]
>>> result = invert_gradient(model, target, (1, 2, 2), torch.tensor([2]),
...                          InversionConfig(iterations=300, restarts=1, tv_weight=0.0))
>>> float(torch.mean((result.images - image) ** 2)) < 1e-3
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fedprivacy.errors import ParameterError


@dataclass(frozen=True)
class InversionConfig:
    """Settings of :func:`invert_gradient` (Geiping et al.'s defaults, fewer iterations).

    Attributes
    ----------
    iterations : int
        Adam steps per restart.
    lr : float
        Adam's step size (on signed gradients; decayed x0.1 at 3/8, 5/8 and 7/8).
    tv_weight : float
        Weight of the total-variation prior.
    restarts : int
        Independent starts from noise; the one with the lowest objective is kept.
    seed : int
        Seed of the starting noise.
    """

    iterations: int = 1000
    lr: float = 0.1
    tv_weight: float = 1e-4
    restarts: int = 2
    seed: int = 0

    def validate(self) -> InversionConfig:
        """Return ``self``; raise :class:`ParameterError` for a value out of range."""
        if self.iterations < 1 or self.restarts < 1:
            raise ParameterError("iterations", "iterations and restarts must be at least 1")
        if not self.lr > 0 or self.tv_weight < 0:
            raise ParameterError("lr", "lr must be positive and tv_weight non-negative")
        return self


@dataclass(frozen=True)
class InversionResult:
    """Reconstructed images and the final objective of the best restart."""

    images: torch.Tensor  # (B, C, H, W), in the data's (normalised) space
    labels: torch.Tensor  # (B,)
    loss: float  # 1 - cosine similarity (+ TV term) of the kept restart


def batch_gradient(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor
) -> list[torch.Tensor]:
    """The gradient of the mean cross-entropy of ``images`` w.r.t. every parameter (detached)."""
    params = [p for p in model.parameters() if p.requires_grad]
    loss = nn.functional.cross_entropy(model(images), labels)
    return [g.detach() for g in torch.autograd.grad(loss, params)]


def gradient_from_update(
    model: nn.Module, update: torch.Tensor, lr: float = 1.0
) -> list[torch.Tensor]:
    """Split a flat update ``x_u - x`` of one SGD step into per-parameter gradients ``-update/lr``.

    The order is that of ``model.parameters()`` (as :func:`fedprivacy.fl.params.flatten_parameters`
    flattens them).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    total = sum(p.numel() for p in params)
    if update.numel() != total:
        raise ParameterError("update", f"has {update.numel()} entries, the model {total}")
    out, start = [], 0
    flat = -update.detach().to(torch.float32).reshape(-1) / lr
    for p in params:
        out.append(flat[start : start + p.numel()].reshape(p.shape))
        start += p.numel()
    return out


def recover_labels(gradient: Sequence[torch.Tensor], batch_size: int) -> torch.Tensor:
    """The labels of a batch of ``batch_size`` distinct labels from the last layer (iDLG).

    ``gradient[-2]`` must be the last linear layer's weight gradient ``(classes, features)``
    (``gradient[-1]`` its bias). Returns the ``batch_size`` classes with the most negative row
    sums, in increasing class order.
    """
    weight = gradient[-2]
    if weight.ndim != 2 or not 1 <= batch_size <= weight.shape[0]:
        raise ParameterError("batch_size", "must lie between 1 and the number of classes")
    scores = weight.sum(dim=1)
    return torch.sort(torch.argsort(scores)[:batch_size]).values


def total_variation(images: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of neighbouring pixels (anisotropic TV), as Geiping et al."""
    dx = torch.mean(torch.abs(images[:, :, :, :-1] - images[:, :, :, 1:]))
    dy = torch.mean(torch.abs(images[:, :, :-1, :] - images[:, :, 1:, :]))
    return dx + dy


def cosine_distance(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> torch.Tensor:
    """``1 - cos(a, b)`` of two gradients given as lists of tensors."""
    dot = sum((x * y).sum() for x, y in zip(a, b, strict=True))
    na = sum(x.pow(2).sum() for x in a)
    nb = sum(y.pow(2).sum() for y in b)
    return 1 - dot / (torch.sqrt(torch.as_tensor(na)) * torch.sqrt(torch.as_tensor(nb)) + 1e-12)


def _objective(
    model: nn.Module,
    params: Sequence[torch.Tensor],
    z: torch.Tensor,
    labels: torch.Tensor,
    target: Sequence[torch.Tensor],
    tv_weight: float,
) -> torch.Tensor:
    """``1 - cos(g(z), target) + tv_weight * TV(z)``, differentiable in ``z``."""
    loss = nn.functional.cross_entropy(model(z), labels)
    grads = torch.autograd.grad(loss, list(params), create_graph=True)
    return cosine_distance(grads, target) + tv_weight * total_variation(z)


def invert_gradient(
    model: nn.Module,
    target: Sequence[torch.Tensor],
    image_shape: tuple[int, int, int],
    labels: torch.Tensor,
    config: InversionConfig | None = None,
    *,
    bounds: tuple[torch.Tensor, torch.Tensor] | None = None,
    progress: Callable[[int], None] | None = None,
) -> InversionResult:
    """Images whose gradient is most similar to ``target`` (Geiping et al.'s attack).

    Parameters
    ----------
    model : torch.nn.Module
        The model the gradient was computed on (its parameters are not changed).
    target : sequence of torch.Tensor
        The gradient, one tensor per parameter (:func:`batch_gradient`,
        :func:`gradient_from_update`).
    image_shape : tuple of int
        ``(C, H, W)`` of one image.
    labels : torch.Tensor
        The batch's labels (:func:`recover_labels`); the batch size is their number.
    config : InversionConfig, optional
        Iterations, step size, TV weight, restarts, seed.
    bounds : tuple of torch.Tensor, optional
        Per-channel lower and upper pixel bounds ``(C, 1, 1)`` in the data's space (the images
        are projected into them after each step); ``None``: unbounded.
    progress : callable, optional
        Called with 1 per step.

    Returns
    -------
    InversionResult
        The restart with the lowest objective.
    """
    cfg = (config or InversionConfig()).validate()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(True)
    params = [p for p in model.parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(cfg.seed)
    best: InversionResult | None = None
    milestones = [int(cfg.iterations * f) for f in (3 / 8, 5 / 8, 7 / 8)]
    for _ in range(cfg.restarts):
        start = torch.randn((len(labels), *image_shape), generator=gen)
        z = start.to(params[0].device).requires_grad_(True)
        opt = torch.optim.Adam([z], lr=cfg.lr)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=milestones, gamma=0.1)

        for _step in range(cfg.iterations):
            opt.zero_grad()
            value = _objective(model, params, z, labels, target, cfg.tv_weight)
            (grad_z,) = torch.autograd.grad(value, z)
            z.grad = grad_z.sign()
            opt.step()
            sched.step()
            if bounds is not None:
                with torch.no_grad():
                    z.copy_(torch.maximum(torch.minimum(z, bounds[1]), bounds[0]))
            if progress is not None:
                progress(1)
        final = float(_objective(model, params, z, labels, target, cfg.tv_weight).detach())
        if best is None or final < best.loss:
            best = InversionResult(z.detach().clone(), labels.clone(), final)
    assert best is not None
    return best
