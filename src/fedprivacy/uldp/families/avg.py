"""ULDP-AVG, -w, -s, -ws (Algorithm 4 of Kato et al.): per-user local training.

Every user trains its own copy of ``x_t`` on its records in the silo (``Q`` epochs of
minibatch SGD, :meth:`~fedprivacy.fl.local_training.VectorisedTrainer.iter_deltas`); the
clipped, weighted deltas are added to the model (:mod:`fedprivacy.uldp.families.user_level`).

Examples
--------
>>> from fedprivacy.uldp.families import FAMILIES
>>> FAMILIES["avg"].sign
1.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from fedprivacy.fl.local_spec import require_plain_sgd
from fedprivacy.fl.minibatches import epoch_orders
from fedprivacy.fl.training_loops import train_groups_loop
from fedprivacy.uldp.families.base import epoch_keys
from fedprivacy.uldp.families.user_level import Chunks, SiloData, UserLevelFamily

if TYPE_CHECKING:
    from fedprivacy.fl.local_spec import LocalTrainingSpec
    from fedprivacy.fl.local_training import VectorisedTrainer
    from fedprivacy.fl.losses import MaskedLoss
    from fedprivacy.uldp.federation import Federation
    from fedprivacy.uldp.rounds import RoundHyper

__all__ = ["AvgFamily"]


class AvgFamily(UserLevelFamily):
    """ULDP-AVG: clipped per-user model deltas after local SGD."""

    name = "avg"
    sign = 1.0

    def draw_keys(
        self, hyper: RoundHyper, fed: Federation, rng: np.random.Generator
    ) -> NDArray[np.float64] | None:
        """The keys that shuffle every user's local minibatches."""
        return epoch_keys(hyper, fed, rng)

    def vectors(
        self,
        trainer: VectorisedTrainer,
        hyper: RoundHyper,
        global_flat: torch.Tensor,
        silo_data: SiloData,
        keys: NDArray[np.float64] | None,
        live: NDArray[np.int64],
    ) -> Chunks:
        """The live users' local-training deltas, vectorised."""
        assert keys is not None
        x, y, off = silo_data
        orders = epoch_orders(keys, off, hyper.local.epochs)
        return trainer.iter_deltas(global_flat, x, y, off, orders, hyper.local, live)

    def loop_vectors(
        self,
        model: nn.Module,
        loss: MaskedLoss,
        global_flat: torch.Tensor,
        silo_data: SiloData,
        keys: NDArray[np.float64] | None,
        local: LocalTrainingSpec,
    ) -> torch.Tensor:
        """Every user's delta, one model copy and optimiser per user (plain SGD)."""
        assert keys is not None
        x, y, off = silo_data
        orders = epoch_orders(keys, off, local.epochs)
        return train_groups_loop(
            model, loss, global_flat, x, y, off, orders, require_plain_sgd(local)
        )
