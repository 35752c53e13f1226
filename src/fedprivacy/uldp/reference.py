"""The per-user loop oracle of a ULDP-AVG / ULDP-SGD round's pre-noise aggregate.

:func:`reference_presum` recomputes what :meth:`MethodRunner.presum
<fedprivacy.uldp.methods.MethodRunner.presum>` returns the authors' way: a model copy (and an
optimiser) per user, clipping, weighting and summing in float64. Tests compare the vectorised
engine against it; the user's updates come from the family's
:meth:`~fedprivacy.uldp.families.UserLevelFamily.loop_vectors`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedprivacy.errors import ParameterError
from fedprivacy.uldp.families import FAMILIES, UserLevelFamily
from fedprivacy.uldp.federation import Federation
from fedprivacy.uldp.method_specs import method_spec
from fedprivacy.uldp.rounds import RoundHyper

__all__ = ["reference_presum"]


def reference_presum(
    method: str,
    fed: Federation,
    global_flat: torch.Tensor,
    hyper: RoundHyper,
    rng: np.random.Generator,
    *,
    model: nn.Module | None = None,
) -> torch.Tensor:
    """The pre-noise aggregate of a ULDP-AVG / ULDP-SGD round, computed with per-user loops.

    Draws the same randomness as :meth:`MethodRunner.run_round
    <fedprivacy.uldp.methods.MethodRunner.run_round>` (sample, then keys) and, in every silo,
    trains each user with :func:`~fedprivacy.fl.training_loops.train_groups_loop` (a model
    copy and an optimiser per user, the authors' way) or takes its gradient with
    :func:`~fedprivacy.fl.training_loops.group_gradients_loop`, then clips, weights and
    sums in float64.

    Returns
    -------
    torch.Tensor
        Float32 ``(P,)``.

    Raises
    ------
    ParameterError
        For other methods.
    """
    spec = method_spec(method)
    family = FAMILIES[spec.family]
    if not isinstance(family, UserLevelFamily):
        raise ParameterError("method", "reference_presum covers ULDP-AVG and ULDP-SGD only")
    arch = model if model is not None else fed.task.build_model()
    loss = fed.task.loss
    h = hyper
    q = h.sampling_rate if spec.sampled else 1.0
    sampled = rng.random(fed.num_users) < q if spec.sampled else None
    keys = family.draw_keys(h, fed, rng)
    weights = fed.weights(spec.weighted)
    if sampled is not None:
        weights = weights * sampled[None, :]
    total = torch.zeros(global_flat.numel(), dtype=torch.float64)
    for silo in range(fed.num_silos):
        sl = fed.silo_slice(silo)
        x, y = fed.x[sl].cpu(), fed.y[sl].cpu()
        off, users = fed.user_offsets[silo], fed.silo_users[silo]
        g0 = global_flat.cpu()
        silo_keys = None if keys is None else keys[:, fed.record_index[sl]]
        vectors = family.loop_vectors(arch, loss, g0, (x, y, off), silo_keys, h.local)
        for j, u in enumerate(users):
            w = float(weights[silo, u])
            if w == 0:
                continue
            v = vectors[j].to(torch.float64)
            norm = float(torch.linalg.vector_norm(v))
            factor = h.clip / norm if norm > h.clip else 1.0
            total += w * factor * v
    return total.to(torch.float32)
