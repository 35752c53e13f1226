"""The loop oracles of the vectorised trainer: one model copy and one optimiser per group.

:func:`train_groups_loop` and :func:`group_gradients_loop` train or differentiate every group
of rows (a FedAvg client, a ULDP-FL user of a silo) the way the papers' code does: a
:func:`copy.deepcopy` of the model and a :class:`torch.optim.SGD` per group, one ``backward()``
per batch. They take the same groups (``offsets``), minibatch orders
(:mod:`fedprivacy.fl.minibatches`) and :class:`~fedprivacy.fl.local_spec.LocalTrainingSpec`
as :class:`~fedprivacy.fl.local_training.VectorisedTrainer`, which reproduces them to float
rounding (``tests/fl/test_local_training.py``). FedAvg's deployed clients
(:meth:`fedprivacy.fl.engine.FederatedTraining.client_update`) train with
:func:`train_groups_loop` too.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn

from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.minibatches import check_offsets
from fedprivacy.fl.params import flatten_parameters, load_flat_

__all__ = [
    "group_gradients_loop",
    "train_groups_loop",
]


def _zeros(groups: int, like: torch.Tensor) -> torch.Tensor:
    """A zero ``(groups, P)`` tensor of ``like``'s dtype and device."""
    return torch.zeros((groups, like.numel()), dtype=like.dtype, device=like.device)


def train_groups_loop(
    model: nn.Module,
    loss: MaskedLoss,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: ArrayLike,
    orders: ArrayLike,
    spec: LocalTrainingSpec,
) -> torch.Tensor:
    """Reference per-group local SGD: a model copy and an optimiser per group (the oracle).

    For every group in order: :func:`copy.deepcopy` of ``model`` loaded with ``global_flat``,
    in training mode, a fresh :class:`torch.optim.SGD` (``lr``, ``momentum``,
    ``weight_decay``), and for each epoch and batch (as fixed by ``orders``, see
    :mod:`fedprivacy.fl.minibatches`) ``zero_grad``, the mean loss of the batch, ``backward``,
    ``step``.

    Parameters
    ----------
    model, loss, global_flat, x, y, offsets, orders, spec
        As in :meth:`~fedprivacy.fl.local_training.VectorisedTrainer.iter_deltas`.

    Returns
    -------
    torch.Tensor
        Float32 ``(k, P)``: each group's delta ``x_g - x_t`` (zero for an empty group).

    Raises
    ------
    ParameterError
        If ``spec`` or ``offsets`` is invalid.
    """
    spec.validate()
    order = np.asarray(orders)
    off = check_offsets(offsets, int(order.shape[1]))
    counts = np.diff(off)
    out = _zeros(len(counts), global_flat)
    bsz = spec.batch_size
    for g in range(len(counts)):
        n = int(counts[g])
        if n == 0:
            continue
        local = copy.deepcopy(model)
        load_flat_(local, global_flat)
        local.train()
        opt = torch.optim.SGD(
            local.parameters(), lr=spec.lr, momentum=spec.momentum, weight_decay=spec.weight_decay
        )
        for e in range(spec.epochs):
            for j in range(-(-n // bsz)):
                lo, hi = off[g] + j * bsz, off[g] + min((j + 1) * bsz, n)
                rows = torch.from_numpy(order[e, lo:hi].copy()).to(x.device)
                ones = torch.ones(len(rows), dtype=x.dtype, device=x.device)
                opt.zero_grad()
                torch.autograd.backward(loss(local(x[rows]), y[rows], ones))
                opt.step()
        out[g] = flatten_parameters(local) - global_flat
    return out


def group_gradients_loop(
    model: nn.Module,
    loss: MaskedLoss,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: ArrayLike,
) -> torch.Tensor:
    """Reference per-group full-batch gradients: a model copy per group (the oracle).

    Group ``g`` owns the rows ``offsets[g]:offsets[g + 1]`` of ``x``.

    Returns
    -------
    torch.Tensor
        Float32 ``(k, P)``: the gradient of each group's mean loss at ``global_flat`` (zero for
        an empty group).
    """
    off = check_offsets(offsets, int(x.shape[0]))
    counts = np.diff(off)
    out = _zeros(len(counts), global_flat)
    for g in range(len(counts)):
        if counts[g] == 0:
            continue
        local = copy.deepcopy(model)
        load_flat_(local, global_flat)
        xb, yb = x[int(off[g]) : int(off[g + 1])], y[int(off[g]) : int(off[g + 1])]
        value = loss(local(xb), yb, torch.ones(len(xb), dtype=x.dtype, device=x.device))
        grads = torch.autograd.grad(value, list(local.parameters()))
        out[g] = torch.cat([gr.reshape(-1) for gr in grads])
    return out
