"""The authors' whole per-user pipeline of a ULDP-AVG silo round: a baseline of ``uldp.py``.

Written from the description of their ``local_trainer.py`` (github.com/FumiyukiKato/uldp-fl);
see :func:`loop_authors`.
"""

from __future__ import annotations

import copy
from typing import cast

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.params import load_flat_
from fedprivacy.uldp.federation import Federation


def loop_authors(
    model: torch.nn.Module,
    fed: Federation,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: NDArray[np.int64],
    spec: LocalTrainingSpec,
    clip: float,
    weights: NDArray[np.float64],
    seed: int,
) -> torch.Tensor:
    """The authors' whole per-user pipeline of a ULDP-AVG silo round; return the weighted sum.

    Per user, as the authors' ``local_trainer.py`` does it: its records as a Python list of
    ``(image, label)`` pairs behind a ``DataLoader(shuffle=True)``; a deep copy of the model and
    a fresh SGD optimiser; per minibatch ``zero_grad``, forward, loss, a NaN check, ``backward``,
    ``step`` and ``loss.item()``; then the ``state_dict`` difference tensor by tensor, a NaN/Inf
    check, the global L2 norm from per-tensor norms, clipping and weighting tensor by tensor,
    appended to a list that is summed key by key at the end.
    """
    from collections import OrderedDict

    from torch.utils.data import DataLoader, Dataset

    gen = torch.Generator().manual_seed(seed)
    start = copy.deepcopy(model)
    load_flat_(start, global_flat)
    global_state = copy.deepcopy(start.state_dict())
    names = [name for name, _ in start.named_parameters()]
    updates: list[OrderedDict[str, torch.Tensor]] = []
    for g in range(len(offsets) - 1):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        if hi == lo:
            continue
        records = [(x[i], int(y[i])) for i in range(lo, hi)]
        dataset = cast("Dataset[tuple[torch.Tensor, int]]", records)  # a list, as theirs
        loader = DataLoader(dataset, batch_size=spec.batch_size, shuffle=True, generator=gen)
        local = copy.deepcopy(start)
        opt = torch.optim.SGD(local.parameters(), lr=spec.lr)
        for _ in range(spec.epochs):
            losses = []
            for xb, yb in loader:
                opt.zero_grad()
                value = fed.task.loss(
                    local(xb), yb, torch.ones(len(xb), dtype=xb.dtype, device=xb.device)
                )
                if torch.isnan(value):
                    continue
                torch.autograd.backward(value)
                opt.step()
                losses.append(value.item())
        state = local.state_dict()
        flat = torch.cat([p.detach().reshape(-1) for p in local.parameters()])
        if bool(torch.isnan(flat).any() or torch.isinf(flat).any()):
            continue
        diff = OrderedDict((k, state[k] - global_state[k]) for k in state)
        norm = torch.norm(torch.stack([torch.norm(diff[k], 2.0) for k in names]), 2.0)
        coef = torch.clamp(clip / (norm + 1e-6), max=1.0)
        updates.append(OrderedDict((k, float(weights[g]) * (diff[k] * coef)) for k in names))
    total = OrderedDict((k, torch.zeros_like(global_state[k])) for k in names)
    for update in updates:
        for k in names:
            total[k] += update[k]
    return torch.cat([total[k].reshape(-1) for k in names])
