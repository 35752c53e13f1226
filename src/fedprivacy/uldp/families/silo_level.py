"""The round shared by DEFAULT and ULDP-NAIVE: every silo trains one model on its records.

Each silo runs ``Q`` epochs of minibatch SGD from ``x_t`` on all its records (one vectorised
call for all silos) and clips its delta to the family's bound
(:meth:`SiloLevelFamily.clip_bound`); ``x_{t+1} = x_t + eta_g * (sum_s Delta_s + noise) / |S|``
with the family's noise per silo (:meth:`SiloLevelFamily.silo_noise_std`). Randomness: the
minibatch keys from ``rng``, then one ``noise_rng.normal`` vector per silo.
"""

from __future__ import annotations

from abc import abstractmethod

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.fl.mechanism import l2_clip_factors
from fedprivacy.fl.minibatches import epoch_orders
from fedprivacy.uldp.families.base import MethodFamily, Runner, epoch_keys, gaussian_noise, silo_sum
from fedprivacy.uldp.rounds import RoundOutput

__all__ = ["SiloLevelFamily"]


class SiloLevelFamily(MethodFamily):
    """A family whose silos each send one (possibly clipped and noised) model delta."""

    def clip_bound(self, runner: Runner) -> float | None:
        """The L2 norm each silo clips its delta to: ``C`` (``None``: deltas sent unclipped)."""
        return runner.hyper.clip

    @abstractmethod
    def silo_noise_std(self, runner: Runner) -> float:
        """The standard deviation of each silo's noise per coordinate (``0``: no noise drawn)."""

    def contributions(
        self, runner: Runner, deltas: torch.Tensor
    ) -> tuple[torch.Tensor, float, int, float]:
        """From the ``(|S|, P)`` silo deltas: ``(contributions, noise std, clipped, mean norm)``.

        The contributions are the deltas clipped to :meth:`clip_bound`; the norms are those
        before clipping.
        """
        bound = self.clip_bound(runner)
        norms = torch.linalg.vector_norm(deltas, dim=1)
        if bound is None:
            return deltas, self.silo_noise_std(runner), 0, float(norms.mean())
        contrib = deltas * l2_clip_factors(norms, bound)[:, None]
        clipped = int((norms > bound).sum())
        return contrib, self.silo_noise_std(runner), clipped, float(norms.mean())

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
