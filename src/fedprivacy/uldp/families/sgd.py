"""ULDP-SGD, -w, -s, -ws (Algorithm 3 of Kato et al., SGD client): per-user gradients.

Each user's gradient of its mean loss over its records in the silo, at ``x_t`` (full batch,
:meth:`~fedprivacy.fl.local_training.VectorisedTrainer.iter_gradients`), is clipped and
weighted, and the model takes a *descent* step for every variant (the authors' ULDP-SGD-ws
adds the gradient). No minibatch keys are drawn.

Examples
--------
>>> from fedprivacy.uldp.families import FAMILIES
>>> FAMILIES["sgd"].sign
-1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.fl.training_loops import group_gradients_loop
from fedprivacy.uldp.families.user_level import Chunks, SiloData, UserLevelFamily

if TYPE_CHECKING:
    from fedprivacy.fl.local_spec import LocalTrainingSpec
    from fedprivacy.fl.local_training import VectorisedTrainer
    from fedprivacy.fl.losses import MaskedLoss
    from fedprivacy.uldp.federation import Federation
    from fedprivacy.uldp.rounds import RoundHyper

__all__ = ["SgdFamily"]


class SgdFamily(UserLevelFamily):
    """ULDP-SGD: clipped per-user full-batch gradients, a descent step."""

    name = "sgd"
    sign = -1.0

    def draw_keys(
        self, hyper: RoundHyper, fed: Federation, rng: np.random.Generator
    ) -> NDArray[np.float64] | None:
        """``None``: full-batch gradients need no minibatch keys (nothing is drawn)."""
        return None

    def vectors(
        self,
        trainer: VectorisedTrainer,
        hyper: RoundHyper,
        global_flat: torch.Tensor,
        silo_data: SiloData,
        keys: NDArray[np.float64] | None,
        live: NDArray[np.int64],
    ) -> Chunks:
        """The live users' gradients at ``x_t``, vectorised."""
        x, y, off = silo_data
        return trainer.iter_gradients(global_flat, x, y, off, live)

    def loop_vectors(
        self,
        model: nn.Module,
        loss: MaskedLoss,
        global_flat: torch.Tensor,
        silo_data: SiloData,
        keys: NDArray[np.float64] | None,
        local: LocalTrainingSpec,
    ) -> torch.Tensor:
        """Every user's gradient, one model copy per user."""
        x, y, off = silo_data
        return group_gradients_loop(model, loss, global_flat, x, y, off)
