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

import math
from typing import TYPE_CHECKING

from fedprivacy.fl.mechanism import Mechanism, NoMechanism
from fedprivacy.uldp.accounting import NotPrivate, UldpAccounting
from fedprivacy.uldp.families.silo_level import SiloLevelFamily

if TYPE_CHECKING:
    from fedprivacy.uldp.families.base import Runner
    from fedprivacy.uldp.rounds import RoundHyper

__all__ = ["DefaultFamily"]


class DefaultFamily(SiloLevelFamily):
    """DEFAULT: ``x_{t+1} = x_t + eta_g * mean_s Delta_s`` (the ``none`` mechanism)."""

    name = "default"
    gaussian_per_round = False

    def default_mechanism(self, hyper: RoundHyper) -> Mechanism:
        """``none``: the deltas are sent as they are, without noise."""
        return NoMechanism()

    def sensitivity(self, runner: Runner) -> float:
        """Unbounded: nothing clips the deltas."""
        return math.inf

    def accounting(self, runner: Runner) -> UldpAccounting:
        """Not private: epsilon infinite, nothing to compose."""
        return NotPrivate()
