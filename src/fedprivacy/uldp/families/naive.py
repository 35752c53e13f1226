"""ULDP-NAIVE (Algorithm 1 of Kato et al.): each silo clips its delta to ``C`` and adds noise.

The paper adds ``N(0, sigma^2 C^2 |S|)`` per silo for a user-level sensitivity of ``|S| C``;
the true sensitivity is ``2 |S| C`` (see :mod:`fedprivacy.uldp.methods`), so with
``naive_noise="corrected"`` each silo adds ``N(0, (2 sigma C)^2 |S|)`` and the accounting uses
noise multiplier ``sigma``; with ``naive_noise="paper"`` it adds the paper's noise and the
accounting uses ``sigma / 2``.

Examples
--------
>>> from fedprivacy.uldp.families import FAMILIES
>>> isinstance(FAMILIES["naive"], NaiveFamily)
True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fedprivacy.uldp.families.silo_level import SiloLevelFamily

if TYPE_CHECKING:
    from fedprivacy.uldp.families.base import Runner

__all__ = ["NaiveFamily"]


class NaiveFamily(SiloLevelFamily):
    """ULDP-NAIVE: clipped silo deltas, Gaussian noise per silo."""

    name = "naive"

    def silo_noise_std(self, runner: Runner) -> float:
        """``2 sigma C sqrt(|S|)``, or ``sigma C sqrt(|S|)`` with the paper's noise."""
        h = runner.hyper
        scale = 2.0 if h.naive_noise == "corrected" else 1.0
        return scale * h.noise_multiplier * h.clip * math.sqrt(runner.fed.num_silos)

    def noise_multiplier(self, runner: Runner) -> float:
        """``sigma``, or ``sigma / 2`` with the paper's noise."""
        if runner.hyper.naive_noise == "paper":
            return runner.hyper.noise_multiplier / 2.0
        return super().noise_multiplier(runner)
