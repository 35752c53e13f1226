"""User samplers whose number of users varies: everyone, or Poisson sampling at a rate ``q``.

The :class:`~fedprivacy.participation.selectors.Selector` s choose exactly ``K`` users or skip
the round; ULDP-FL (Kato et al.) instead trains on every user, or samples each user
independently with probability ``q`` in every round (its ``-s`` variants). Both samplers here
fit the round loop (:class:`fedprivacy.pipeline.loop.FederatedRun`) as a selector does.

Examples
--------
>>> import numpy as np
>>> EveryUser(3).select(np.array([True, False, True]), np.zeros(3, np.int64), None).tolist()
[0, 2]
>>> s = PoissonSampler(1000, 0.1).select(np.ones(1000, bool), np.zeros(1000, np.int64),
...                                      np.random.default_rng(0))
>>> 60 < s.size < 140
True
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.errors import ParameterError

__all__ = ["EveryUser", "PoissonSampler"]


class EveryUser:
    """Every available user, every round; draws no randomness.

    Parameters
    ----------
    num_users : int
        Number of users (at least 1).
    """

    name: ClassVar[str] = "all"

    def __init__(self, num_users: int) -> None:
        self.num_users = require_int("num_users", num_users, minimum=1)

    def select(
        self,
        available: NDArray[np.bool_],
        frequency: NDArray[np.int64],
        rng: np.random.Generator | None,
    ) -> NDArray[np.intp]:
        """The available users (``rng`` is not used)."""
        return np.flatnonzero(np.asarray(available, dtype=bool)).astype(np.intp)


class PoissonSampler:
    """Each user independently with probability ``rate``: ``rng.random(num_users) < rate``.

    One uniform draw per user id in every round (available or not), then the unavailable users
    are dropped, so the sample of a user does not depend on the others' availability.

    Parameters
    ----------
    num_users : int
        Number of users (at least 1).
    rate : float
        Sampling probability ``q`` in ``(0, 1]``.
    """

    name: ClassVar[str] = "poisson"

    def __init__(self, num_users: int, rate: float) -> None:
        self.num_users = require_int("num_users", num_users, minimum=1)
        if not (isinstance(rate, (int, float)) and 0 < rate <= 1):
            raise ParameterError("sampling_rate", f"must lie in (0, 1], got {rate!r}")
        self.rate = float(rate)

    def select(
        self,
        available: NDArray[np.bool_],
        frequency: NDArray[np.int64],
        rng: np.random.Generator,
    ) -> NDArray[np.intp]:
        """The sampled available users."""
        sampled = rng.random(self.num_users) < self.rate
        return np.flatnonzero(sampled & np.asarray(available, dtype=bool)).astype(np.intp)
