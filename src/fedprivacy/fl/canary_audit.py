"""Does a mechanism do what its accountant says? Canaries through its real clip, noise and sum.

:func:`audit_mechanism` runs FedAvg's round without models: ``users`` users, of which the first
``canaries`` send a fixed random unit direction scaled by ``update_norm`` (the clip by default)
whenever they are selected, the others a fresh random direction at the clip; each round the
registered selector picks who is aggregated, the mechanism prepares the updates
(:meth:`~fedprivacy.fl.mechanism.Mechanism.prepare`: its clipping), the registered aggregator
sums them (plaintext, or the real SecAgg protocol with the parties' discrete Gaussian noise), the
mechanism releases the mean (:meth:`~fedprivacy.fl.mechanism.Mechanism.release`: central noise)
and the "model" moves by it. At the end, :func:`~fedprivacy.dp.canaries.epsilon_hat` of the total
change is set against the accountant's epsilon of the most-used canary, composed over the rounds
it was aggregated in at the noise multiplier the mechanism says it released
(:meth:`~fedprivacy.fl.mechanism.Mechanism.accounted_noise`).

A mechanism whose noise is smaller than it claims, or which does not clip, shows an
``epsilon_hat`` above that epsilon (``tests/fl/test_canary_audit.py`` breaks three on
purpose); an honest one stays below it.

Examples
--------
>>> from fedprivacy.fl.mechanism import CentralGaussian
>>> audit = audit_mechanism(CentralGaussian(2.0, 1.0), users=40, per_round=10, rounds=20,
...                         canaries=10, dimension=200, seed=0)
>>> round(audit.epsilon, 2), audit.estimate.canaries  # the claim; the estimate is random
(6.07, 10)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.dp.canaries import CanaryEstimate, canary_directions, epsilon_hat
from fedprivacy.dp.per_user import per_user_epsilons_by_round
from fedprivacy.fl.aggregators import make_aggregator
from fedprivacy.fl.mechanism import Mechanism
from fedprivacy.fl.secure_aggregation import SecureAggregator
from fedprivacy.participation.selectors import make_selector

__all__ = ["CanaryAudit", "audit_mechanism"]


@dataclass(frozen=True)
class CanaryAudit:
    """The empirical estimate beside the accountant's epsilon.

    Attributes
    ----------
    estimate : CanaryEstimate
        ``epsilon_hat`` and its interval.
    epsilon : float
        The accountant's epsilon of the most-used canary (against the server: no amplification).
    """

    estimate: CanaryEstimate
    epsilon: float

    @property
    def passed(self) -> bool:
        """Whether the estimate's interval reaches down to the claim (no evidence of a leak)."""
        return self.estimate.low <= self.epsilon


def audit_mechanism(
    mechanism: Mechanism,
    *,
    users: int,
    per_round: int,
    rounds: int,
    canaries: int,
    dimension: int,
    secagg: bool = False,
    update_norm: float | None = None,
    delta: float = 1e-5,
    seed: int = 0,
) -> CanaryAudit:
    """Audit ``mechanism`` with ``canaries`` canary users (see the module docstring).

    ``secagg`` sums with the real secure aggregation protocol (needed by a mechanism whose
    parties add the noise); random selection of ``per_round`` users a round.
    """
    rng = np.random.default_rng(seed)
    clip = 1.0 if mechanism.clip is None else mechanism.clip
    norm = clip if update_norm is None else update_norm
    inserted, held_out = canary_directions(2, canaries, dimension, rng)
    selector = make_selector("random", users, per_round)
    aggregator = make_aggregator(
        secagg,
        clip=max(clip, norm),
        per_round=per_round,
        bits=32,
        seed=seed,
        party_noise=mechanism.party_noise,
    )
    if isinstance(aggregator, SecureAggregator):
        aggregator.check_dimension(dimension)
    change = np.zeros(dimension)
    participation = np.zeros((rounds, users), dtype=bool)
    noise = np.full(rounds, np.nan)
    frequency = np.zeros(users, dtype=np.int64)
    for r in range(rounds):
        chosen = selector.select(np.ones(users, dtype=bool), frequency, rng)
        deltas = {int(u): _update(int(u), inserted, norm, clip, rng) for u in chosen}
        deltas, weights = mechanism.prepare(deltas, dict.fromkeys(deltas, 1.0))
        outcome = aggregator.aggregate(r, deltas, weights, rng=np.random.default_rng([seed, r]))
        if outcome.mean_update is None:
            continue
        aggregated = np.asarray(outcome.aggregated, dtype=np.intp)
        participation[r, aggregated] = True
        frequency[aggregated] += 1
        noise[r] = mechanism.accounted_noise(outcome)
        change += mechanism.release(outcome.mean_update, aggregated.size)
    claimed = per_user_epsilons_by_round(participation[:, :canaries], noise, delta, "pld")
    estimate = epsilon_hat(change, inserted, held_out, delta, seed=seed)
    return CanaryAudit(estimate, float(claimed.max()))


def _update(
    user: int, inserted: NDArray[np.float64], norm: float, clip: float, rng: np.random.Generator
) -> NDArray[np.float32]:
    """A canary's direction at ``norm``, or a fresh random direction at the clip."""
    if user < inserted.shape[0]:
        v = norm * inserted[user]
    else:
        v = rng.standard_normal(inserted.shape[1])
        v = clip * v / np.linalg.norm(v)
    return np.asarray(v, dtype=np.float32)
