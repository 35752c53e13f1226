"""Reference per-user training loops: the oracles of the vectorised per-user trainer.

:func:`train_groups_loop` and :func:`group_gradients_loop` train or differentiate every group
of rows (every user of a silo) the way the authors' code does: one deep copy of the model and one
:class:`torch.optim.SGD` per group, one ``backward()`` per batch. They take the same groups
(``offsets``), minibatch orders (:func:`~fedprivacy.uldp.per_user_training.epoch_orders`) and
:class:`~fedprivacy.fl.local_training.LocalTrainingSpec` settings as
:class:`~fedprivacy.uldp.per_user_training.PerUserTrainer`, which reproduces them to float
rounding (``tests/uldp/test_per_user_training.py``).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from torch import nn

from fedprivacy.fl.local_training import LocalTrainingSpec
from fedprivacy.fl.losses import MaskedLoss
from fedprivacy.fl.params import flatten_parameters, load_flat_
from fedprivacy.uldp.per_user_training import _check_offsets, require_plain_sgd

__all__ = [
    "group_gradients_loop",
    "train_groups_loop",
]

_I64 = NDArray[np.int64]


def train_groups_loop(
    model: nn.Module,
    loss: MaskedLoss,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: ArrayLike,
    orders: _I64,
    spec: LocalTrainingSpec,
) -> torch.Tensor:
    """Reference per-group local SGD: a model copy and an optimiser per group (the oracle).

    For every group in order: :func:`copy.deepcopy` of ``model`` loaded with ``global_flat``, a
    fresh ``torch.optim.SGD(lr=spec.lr)``, and for each epoch and batch (as fixed by ``orders``,
    see :mod:`fedprivacy.uldp.per_user_training`) ``zero_grad``, the mean loss of the batch,
    ``backward``, ``step``.

    Parameters
    ----------
    model, loss, global_flat, x, y, offsets, orders, spec
        As in :meth:`~fedprivacy.uldp.per_user_training.PerUserTrainer.iter_deltas`.

    Returns
    -------
    torch.Tensor
        Float32 ``(k, P)``: each group's delta ``x_g - x_t`` (zero for an empty group).
    """
    require_plain_sgd(spec)
    off = _check_offsets(offsets, int(x.shape[0]))
    counts = np.diff(off)
    out = torch.zeros(
        (len(counts), global_flat.numel()), dtype=global_flat.dtype, device=global_flat.device
    )
    for g in range(len(counts)):
        n = int(counts[g])
        if n == 0:
            continue
        local = copy.deepcopy(model)
        load_flat_(local, global_flat)
        opt = torch.optim.SGD(local.parameters(), lr=spec.lr)
        for e in range(spec.epochs):
            for j in range(-(-n // spec.batch_size)):
                lo, hi = j * spec.batch_size, min((j + 1) * spec.batch_size, n)
                rows = torch.from_numpy(orders[e, off[g] + lo : off[g] + hi].copy())
                xb, yb = x[rows], y[rows]
                opt.zero_grad()
                value = loss(local(xb), yb, torch.ones(len(rows), dtype=x.dtype, device=x.device))
                torch.autograd.backward(value)
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

    Returns
    -------
    torch.Tensor
        Float32 ``(k, P)``: the gradient of each group's mean loss at ``global_flat`` (zero for
        an empty group).
    """
    off = _check_offsets(offsets, int(x.shape[0]))
    counts = np.diff(off)
    out = torch.zeros(
        (len(counts), global_flat.numel()), dtype=global_flat.dtype, device=global_flat.device
    )
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
