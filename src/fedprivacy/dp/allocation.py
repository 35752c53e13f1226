"""Epsilon against whoever sees only the models, when a user's batch is secret (random allocation).

Multi-RoundSecAgg partitions the users into ``B = N / T`` batches by randomness that no single
party chooses (the nodes' joint draw), and each round aggregates some of the batches. Whoever
sees only the released models (the public, a downstream user, an auditor) may know the schedule,
which batch ids ran in which round and each round's noise multiplier ``z_t``, but not which batch
holds a given user. User ``u``'s clipped update enters exactly the rounds of its batch, and its
batch is uniform among the ``B``. Against the replacement of ``u``'s update by a zero update, the
worst case over its direction and over the other users' data (which the observer is given) is the
Gaussian mixture

    P = (1/B) sum_b N(m_b, I_R)  against  Q = N(0, I_R),   (m_b)_t = [b runs in round t] / z_t

(random allocation, or balls in bins, over the batch schedule; Feldman and Shenfeld 2025, Chua et
al. 2025). Its privacy loss ``L(y) = log mean_b exp(<m_b, y> - |m_b|^2 / 2)`` depends on ``y``
only through ``X_b = <m_b, y>``, whose covariance is the schedule's Gram matrix
``G[b, b'] = sum_t [b and b' run in t] / z_t^2``.

:func:`allocation_epsilon` estimates ``delta(eps) = max(E_P[(1 - e^(eps - L))+],
E_Q[(1 - e^(eps + L))+])`` (both directions of the adjacency) by Monte Carlo with defensive
importance sampling (the draws come in equal parts from the mixture and from versions shifted
further into its tail, which sets ``delta`` near 1e-5; the weights stay below 4) and returns the
epsilon at which the estimate plus :data:`SIGMAS` standard errors reaches ``delta``: an upper
confidence bound, with the point estimate and the standard error beside it. With ``B = 1`` the
mixture is one Gaussian and the result is the closed form of
:func:`~fedprivacy.dp.gaussian_pld.gaussian_epsilon`; the test suite checks that, and checks the
estimate against :func:`simulated_delta`, an independent Monte Carlo of the same mechanism
(random partitions of users into batches, densities round by round, no reduction, no weights).

The number never holds against the server or the parties, who know the batches.

Examples
--------
>>> runs = np.eye(4, dtype=bool)  # four batches, each aggregated in one of four rounds
>>> est = allocation_epsilon(AllocationSchedule(runs, np.full(4, 1.0)), 1e-5, seed=0)
>>> bool(est.epsilon < float(gaussian_epsilon(1.0, 1e-5)))  # below the known batch's epsilon
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import logsumexp

from fedprivacy.dp._checks import require_delta
from fedprivacy.dp.gaussian_pld import gaussian_epsilon
from fedprivacy.errors import ParameterError

__all__ = [
    "SIGMAS",
    "AllocationEstimate",
    "AllocationSchedule",
    "allocation_epsilon",
    "simulated_delta",
]

#: Standard errors added to the estimated delta before epsilon is read off it.
SIGMAS = 3.0
_LEVELS = 4  # distributions the importance sampler draws from, in equal parts
_CHUNK = 50_000  # draws per vectorised step


@dataclass(frozen=True)
class AllocationSchedule:
    """Which batches each released round aggregated, and each round's noise multiplier.

    Parameters
    ----------
    runs : array_like of bool, shape (R, B)
        ``runs[t, b]``: batch ``b`` was aggregated in round ``t``.
    noise : array_like of float, shape (R,)
        ``z_t``, the noise multiplier of round ``t`` (noise std over a user's sensitivity).
    """

    runs: NDArray[np.bool_]
    noise: NDArray[np.float64]

    def __post_init__(self) -> None:
        runs = np.asarray(self.runs, dtype=bool)
        noise = np.asarray(self.noise, dtype=np.float64)
        if runs.ndim != 2 or runs.shape[1] < 1 or noise.shape != (runs.shape[0],):
            raise ParameterError("runs", "must be (rounds, batches) with one noise per round")
        if not np.all(np.isfinite(noise) & (noise > 0)):
            raise ParameterError("noise", "every round's noise multiplier must be finite and > 0")
        object.__setattr__(self, "runs", runs)
        object.__setattr__(self, "noise", noise)

    @property
    def batches(self) -> int:
        """``B``."""
        return int(self.runs.shape[1])

    def means(self) -> NDArray[np.float64]:
        """``(B, R)``: row ``b`` is ``m_b``, batch ``b``'s rounds over their noise multipliers."""
        return (self.runs / self.noise[:, None]).T

    def server_mu(self) -> float:
        """``mu`` of the most-used batch: what the server, which knows the batches, composes."""
        return math.sqrt(float(np.max(np.diag(self.gram()))))

    def gram(self) -> NDArray[np.float64]:
        """``G[b, b'] = <m_b, m_b'>``."""
        m = self.means()
        return np.asarray(m @ m.T, dtype=np.float64)


@dataclass(frozen=True)
class AllocationEstimate:
    """Epsilon at ``delta`` for the users of a batch schedule, by Monte Carlo.

    Attributes
    ----------
    epsilon : float
        The upper confidence bound (``delta`` estimate plus ``SIGMAS`` standard errors); what a
        report states.
    point : float
        The point estimate (``delta`` estimate equal to ``delta``).
    delta : float
        The target delta.
    samples : int
        Draws per direction.
    relative_error : float
        The standard error of the ``delta`` estimate at ``point``, over ``delta``.
    """

    epsilon: float
    point: float
    delta: float
    samples: int
    relative_error: float


def _log_ratio(x: NDArray[np.float64], half: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log mean_b exp(x_b - half_b)`` per row: the log density ratio of a mixture."""
    return np.asarray(logsumexp(x - half, axis=1) - math.log(x.shape[1]), dtype=np.float64)


def _draws(
    schedule: AllocationSchedule, samples: int, sign: float, rng: np.random.Generator
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Privacy losses ``L`` and importance weights for one direction (``sign`` +1: P vs Q).

    The draws come in equal parts from :data:`_LEVELS` distributions that reach further and
    further into the direction's tail: for P (losses above epsilon), the mixtures whose means are
    ``c`` times the batches', ``c`` from 1 (P itself) to :func:`_reach`; for Q (losses below minus
    epsilon), ``N(-c m_avg, I)`` from ``c = 0`` (Q itself), every batch's statistic pushed down at
    once. A draw's weight is its own density over the even mixture of them (at most
    ``_LEVELS``), so no level can make the estimate worse than plain sampling by more than that.
    """
    m, g = schedule.means(), schedule.gram()
    half = np.diag(g) / 2.0
    avg = m.mean(axis=0)
    reach = _reach(schedule)
    levels = np.linspace(1.0, reach, _LEVELS) if sign > 0 else np.linspace(0.0, -reach, _LEVELS)
    losses, weights = [], []
    for start in range(0, samples, _CHUNK):
        n = min(_CHUNK, samples - start)
        c = levels[np.arange(n) % _LEVELS]
        noise = rng.standard_normal((n, m.shape[1]))
        if sign > 0:
            y = c[:, None] * m[rng.integers(schedule.batches, size=n)] + noise
        else:
            y = c[:, None] * avg[None, :] + noise
        x = y @ m.T
        loss = _log_ratio(x, half)
        if sign > 0:  # log (level / P) = log (level / Q) - L
            log_levels = [_log_ratio(k * x, k**2 * half) - loss for k in levels]
        else:  # log (level / Q)
            log_levels = [k * (y @ avg) - k**2 * float(avg @ avg) / 2.0 for k in levels]
        mix = logsumexp(np.stack(log_levels), axis=0) - math.log(_LEVELS)
        weights.append(np.exp(-mix))
        losses.append(loss)
    return np.concatenate(losses), np.concatenate(weights)


def _reach(schedule: AllocationSchedule) -> float:
    """How far the last level shifts: to where one batch alone gives the server's epsilon."""
    g = float(np.diag(schedule.gram()).max())
    server = float(gaussian_epsilon(schedule.server_mu(), 1e-9))
    return max(1.5, (server + math.log(schedule.batches)) / g + 0.5)


def _delta_at(
    eps: float, loss: NDArray[np.float64], weight: NDArray[np.float64], sign: float
) -> tuple[float, float]:
    """The estimate of one direction's ``delta(eps)`` and its standard error."""
    f = weight * np.maximum(0.0, -np.expm1(eps - sign * loss))
    return float(f.mean()), float(f.std(ddof=1) / math.sqrt(f.size))


def _epsilon_where(target: float, delta_of: Callable[[float], float], high: float) -> float:
    """The smallest epsilon in ``[0, high]`` at which the decreasing ``delta_of`` is <= target."""
    if delta_of(0.0) <= target:
        return 0.0
    lo, hi = 0.0, high
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if delta_of(mid) <= target else (mid, hi)
    return hi


def allocation_epsilon(
    schedule: AllocationSchedule,
    delta: float,
    *,
    samples: int = 400_000,
    seed: int | None = None,
) -> AllocationEstimate:
    """Epsilon at ``delta`` for a user whose batch is secret (see the module docstring).

    Parameters
    ----------
    schedule : AllocationSchedule
        The released rounds: which batches ran, and their noise multipliers.
    delta : float
        The target delta.
    samples : int
        Monte Carlo draws per direction (the error shrinks as ``1 / sqrt(samples)``).
    seed : int, optional
        Seeds the draws (reproducible reports); None: fresh.

    Returns
    -------
    AllocationEstimate
        Never above the server's epsilon, the composed Gaussian of the most-used batch (with one
        batch the two are equal).
    """
    require_delta("delta", delta)
    if samples < 1000:
        raise ParameterError("samples", f"must be at least 1000, got {samples}")
    server = float(gaussian_epsilon(schedule.server_mu(), delta))
    if schedule.batches == 1:
        return AllocationEstimate(server, server, delta, 0, 0.0)
    rng = np.random.default_rng(seed)
    sides = [(*_draws(schedule, samples, sign, rng), sign) for sign in (1.0, -1.0)]

    def bound(eps: float, sigmas: float) -> float:
        return max(d + sigmas * s for d, s in (_delta_at(eps, *side) for side in sides))

    upper = _epsilon_where(delta, lambda e: bound(e, SIGMAS), max(server, 1.0) * 2)
    point = _epsilon_where(delta, lambda e: bound(e, 0.0), max(server, 1.0) * 2)
    errors = [_delta_at(point, *side) for side in sides]
    relative = max(s / max(d, delta) for d, s in errors)
    return AllocationEstimate(min(upper, server), min(point, server), delta, samples, relative)


def simulated_delta(
    users: int,
    batch_size: int,
    runs: ArrayLike,
    noise: ArrayLike,
    epsilon: float,
    *,
    samples: int = 200_000,
    seed: int | None = None,
) -> float:
    """``delta(epsilon)`` of the mechanism itself, simulated without reduction or weights.

    Each draw partitions ``users`` at random into batches of ``batch_size`` (a uniformly random
    permutation, as the nodes' joint draw), looks up user 0's batch, releases
    ``y_t = [its batch runs in t] + z_t g_t`` for every round, and computes the privacy loss
    from the per-round Gaussian densities of every batch user 0 could be in. The result is the
    larger of the two directions, plain averages: an independent check of
    :func:`allocation_epsilon` where ``delta`` is large enough for plain averages (1e-3, say).
    """
    runs_ = np.asarray(runs, dtype=bool)
    z = np.asarray(noise, dtype=np.float64)
    batches = users // batch_size
    if batches * batch_size != users or runs_.shape[1] != batches:
        raise ParameterError("runs", "needs one column per batch of batch_size users")
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK * 4 // max(1, z.size * batches))  # (chunk, R, B) stays small
    out = []
    for present in (True, False):
        total = 0.0
        for start in range(0, samples, chunk):
            n = min(chunk, samples - start)
            order = np.argsort(rng.random((n, users)), axis=1)  # a random partition a draw
            where = (order == 0).argmax(axis=1) // batch_size  # user 0's batch
            signal = runs_[:, where].T.astype(np.float64) if present else 0.0
            y = signal + z * rng.standard_normal((n, z.size))
            # log N(y; 1, z^2) - log N(y; 0, z^2) in the rounds of batch b, summed
            per_round = (y[:, :, None] - 0.5) * runs_[None] / (z**2)[None, :, None]
            loss = _log_ratio(per_round.sum(axis=1), np.zeros(batches))
            sign = 1.0 if present else -1.0
            total += float(np.maximum(0.0, -np.expm1(epsilon - sign * loss)).sum())
        out.append(total / samples)
    return max(out)
