"""DEFAULT: FedAvg with two-sided learning rates (Reddi et al.); not private.

Each silo sends its unclipped delta and no noise is added, so epsilon is infinite and nothing
is composed.

Examples
--------
>>> from fedprivacy.uldp.families import FAMILIES
>>> isinstance(FAMILIES["default"], DefaultFamily)
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedprivacy.uldp.accounting import NotPrivate, UldpAccounting
from fedprivacy.uldp.families.silo_level import SiloLevelFamily

if TYPE_CHECKING:
    from fedprivacy.uldp.families.base import Runner

__all__ = ["DefaultFamily"]


class DefaultFamily(SiloLevelFamily):
    """DEFAULT: ``x_{t+1} = x_t + eta_g * mean_s Delta_s``."""

    name = "default"
    gaussian_per_round = False

    def clip_bound(self, runner: Runner) -> float | None:
        """``None``: the deltas are sent as they are."""
        return None

    def silo_noise_std(self, runner: Runner) -> float:
        """``0``: no noise."""
        return 0.0

    def accounting(self, runner: Runner) -> UldpAccounting:
        """Not private: epsilon infinite, nothing to compose."""
        return NotPrivate()
