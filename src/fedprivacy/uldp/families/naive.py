"""ULDP-NAIVE (Algorithm 1 of Kato et al.): each silo clips its delta to ``C`` and adds noise.

The clip and the noise are the run's mechanism (``distributed`` at ``sigma`` and ``C`` by
default): each silo scales its delta by the mechanism's clip factor and adds the mechanism's
party noise for ``|S|`` parties (``sigma C / sqrt(|S|)``) times the user-level sensitivity. The
paper's noise, ``N(0, sigma^2 C^2 |S|)`` per silo, is for a sensitivity of ``|S| C``; the true
sensitivity is ``2 |S| C`` (see :mod:`fedprivacy.uldp.methods`), so with
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

from typing import TYPE_CHECKING

from fedprivacy.uldp.families.silo_level import SiloLevelFamily

if TYPE_CHECKING:
    from fedprivacy.uldp.families.base import Runner

__all__ = ["NaiveFamily"]


class NaiveFamily(SiloLevelFamily):
    """ULDP-NAIVE: clipped silo deltas, the mechanism's party noise at sensitivity ``2 |S|``."""

    name = "naive"

    def sensitivity(self, runner: Runner) -> float:
        """``2 |S|`` clips, or the paper's ``|S|``."""
        scale = 2.0 if runner.hyper.naive_noise == "corrected" else 1.0
        return scale * runner.fed.num_silos

    def noise_multiplier(self, runner: Runner) -> float:
        """The mechanism's ``sigma`` (0: none), or ``sigma / 2`` with the paper's noise."""
        assert runner.mechanism is not None
        z = runner.mechanism.noise_multiplier or 0.0
        return z / 2.0 if runner.hyper.naive_noise == "paper" else z

    def accounted_noise_multiplier(self, runner: Runner) -> float | None:
        """``None`` for a mechanism without noise (infinite epsilons)."""
        assert runner.mechanism is not None
        return None if runner.mechanism.noise_multiplier is None else self.noise_multiplier(runner)
