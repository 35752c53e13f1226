"""The round shared by DEFAULT and ULDP-NAIVE: every silo trains one model on its records.

Each silo runs ``Q`` epochs of minibatch SGD from ``x_t`` on all its records (one vectorised
call for all silos) and clips its delta by the run's mechanism;
``x_{t+1} = x_t + eta_g * (sum_s Delta_s + noise) / |S|`` with the mechanism's party noise at the
family's sensitivity (:meth:`SiloLevelFamily.contributions`). Randomness: the
minibatch keys from ``rng``, then one ``noise_rng.normal`` vector per silo.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.fl.minibatches import epoch_orders
from fedprivacy.uldp.families.base import MethodFamily, Runner, epoch_keys, gaussian_noise, silo_sum
from fedprivacy.uldp.rounds import RoundOutput

__all__ = ["SiloLevelFamily"]


class SiloLevelFamily(MethodFamily):
    """A family whose silos each send one model delta, clipped and noised by the mechanism."""

    @abstractmethod
    def sensitivity(self, runner: Runner) -> float:
        """A user's reach into the sum over silos, in units of the mechanism's clip."""

    def contributions(
        self, runner: Runner, deltas: torch.Tensor
    ) -> tuple[torch.Tensor, float, int, float]:
        """From the ``(|S|, P)`` silo deltas: ``(contributions, noise std, clipped, mean norm)``.

        The contributions are the deltas scaled by the mechanism's
        :meth:`~fedprivacy.fl.mechanism.Mechanism.clip_factors`; each silo's noise is the
        mechanism's party noise (:meth:`~fedprivacy.dp.party_noise.PartyNoise.std`) for ``|S|``
        parties times :meth:`sensitivity`. The norms are those before clipping.
        """
        mechanism = runner.mechanism
        assert mechanism is not None  # a MethodRunner gives every silo-level family one
        norms = torch.linalg.vector_norm(deltas, dim=1)
        factors = mechanism.clip_factors(norms)
        noise = mechanism.party_noise
        std = 0.0 if noise is None else noise.std(runner.fed.num_silos) * self.sensitivity(runner)
        clipped = int((factors < 1).sum())
        return deltas * factors[:, None], std, clipped, float(norms.mean())

    def round(
        self,
        runner: Runner,
        global_flat: torch.Tensor,
        rng: np.random.Generator,
        noise_rng: np.random.Generator,
        *,
        noise: bool = True,
        sampled: NDArray[np.bool_] | None = None,
    ) -> RoundOutput:
        """One round of silo-level training (see the module docstring)."""
        fed, h = runner.fed, runner.hyper
        keys = epoch_keys(h, fed, rng)
        orders = epoch_orders(keys[:, fed.record_index], fed.silo_offsets, h.local.epochs)
        deltas = runner.trainer.train(global_flat, fed.x, fed.y, fed.silo_offsets, orders, h.local)
        s = fed.num_silos
        contrib, std, clipped, mean_norm = self.contributions(runner, deltas)
        presum = silo_sum(list(contrib))
        if noise and std > 0:
            noisy = runner.sum_silos([c + gaussian_noise(noise_rng, std, c) for c in contrib])
        else:
            noisy = runner.sum_silos(list(contrib))
        flat = global_flat + h.global_lr * noisy / s
        return RoundOutput(flat, presum, noisy, None, s, clipped, mean_norm)
