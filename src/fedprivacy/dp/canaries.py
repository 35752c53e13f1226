"""An empirical epsilon from canaries: what the final model reveals of users who were inserted.

One-shot empirical privacy estimation (Andrew, Kairouz, Oh, Oprea, McMahan, Suriyakumar, ICLR
2024): a few canary users, each sending a fixed random unit direction scaled to the clip whenever
it is selected, take part in a run like any user. The cosines of the run's final model change
with the inserted directions are compared with its cosines with directions that were never
inserted (in high dimension, nearly ``N(0, 1/d)``): if the two samples look like ``N(mu, s^2)``
and ``N(0, s^2)``, the run behaves like a ``mu / s``-GDP mechanism for a canary, and
``epsilon_hat`` is that mechanism's epsilon at delta
(:func:`~fedprivacy.dp.gaussian_pld.gaussian_epsilon`). It costs no extra training and assumes
nothing of the model; it measures what the *code* does, so a mechanism that adds less noise than
it claims, or clips nothing, shows an ``epsilon_hat`` above its accountant's epsilon
(:mod:`fedprivacy.fl.canary_audit`). A bootstrap over the canaries gives an interval.

``epsilon_hat`` is an estimate for the final model only (not every round's release), so an honest
mechanism's is expected well below the accountant's bound.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> inserted, held_out = canary_directions(2, 50, 1000, rng)
>>> change = 0.02 * inserted.sum(axis=0) + rng.normal(0, 0.01, 1000)  # a strong signal
>>> est = epsilon_hat(change, inserted, held_out, 1e-5, seed=0)
>>> bool(est.epsilon > 5 and est.low <= est.epsilon <= est.high)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_delta
from fedprivacy.dp.gaussian_pld import gaussian_epsilon
from fedprivacy.errors import ParameterError

__all__ = ["CanaryEstimate", "canary_directions", "epsilon_hat"]

_BOOTSTRAP = 1000  # resamples of the canaries for the interval


@dataclass(frozen=True)
class CanaryEstimate:
    """``epsilon_hat`` with its bootstrap interval and the cosines' statistics.

    Attributes
    ----------
    epsilon : float
        The point estimate at ``delta``.
    low, high : float
        The bootstrap interval (``confidence``, percentile).
    mu : float
        The GDP parameter ``(mean inserted - mean held-out) / sd held-out`` of the cosines.
    canaries : int
        Inserted directions (as many held out).
    """

    epsilon: float
    low: float
    high: float
    mu: float
    canaries: int

    def fields(self) -> dict[str, float]:
        """``epsilon``, ``low``, ``high`` and ``canaries``: a report's ``epsilon_hat``."""
        return {
            "epsilon": self.epsilon,
            "low": self.low,
            "high": self.high,
            "canaries": self.canaries,
        }


def canary_directions(
    count: int, canaries: int, dimension: int, rng: np.random.Generator
) -> tuple[NDArray[np.float64], ...]:
    """``count`` sets of ``canaries`` independent uniform unit vectors in ``R^dimension``.

    The first set is inserted, the others held out (never sent): each set is ``(canaries,
    dimension)``.
    """
    require_int("canaries", canaries, minimum=2)
    require_int("dimension", dimension, minimum=1)
    out = []
    for _ in range(require_int("count", count, minimum=1)):
        v = rng.standard_normal((canaries, dimension))
        out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return tuple(out)


def _cosines(change: NDArray[np.float64], directions: NDArray[np.float64]) -> NDArray[np.float64]:
    norm = float(np.linalg.norm(change))
    if norm == 0.0:
        raise ParameterError("change", "the model did not change: nothing to measure")
    return np.asarray(directions @ change / norm, dtype=np.float64)


def _mu(inserted: NDArray[np.float64], held_out: NDArray[np.float64]) -> float:
    spread = float(held_out.std(ddof=1))
    return max(0.0, float(inserted.mean() - held_out.mean()) / spread) if spread > 0 else math.inf


def epsilon_hat(
    change: NDArray[np.floating],
    inserted: NDArray[np.float64],
    held_out: NDArray[np.float64],
    delta: float,
    *,
    confidence: float = 0.95,
    seed: int | None = None,
) -> CanaryEstimate:
    """The empirical epsilon of a run whose final model change is ``change``.

    Parameters
    ----------
    change : numpy.ndarray
        The final model minus the initial one (flat).
    inserted, held_out : numpy.ndarray
        ``(canaries, dimension)`` unit directions: those the canaries sent, and those never sent.
    delta : float
        The delta of the estimate (the report's).
    confidence : float
        Of the bootstrap interval.
    seed : int, optional
        Seeds the bootstrap.
    """
    require_delta("delta", delta)
    if not 0 < confidence < 1:
        raise ParameterError("confidence", f"must lie in (0, 1), got {confidence!r}")
    flat = np.asarray(change, dtype=np.float64).ravel()
    a, b = _cosines(flat, inserted), _cosines(flat, held_out)
    mu = _mu(a, b)
    rng = np.random.default_rng(seed)
    picks = rng.integers(a.size, size=(_BOOTSTRAP, a.size))
    held = rng.integers(b.size, size=(_BOOTSTRAP, b.size))
    mus = np.array([_mu(a[i], b[j]) for i, j in zip(picks, held, strict=True)])
    tail = (1 - confidence) / 2 * 100
    # a resample of held-out cosines without spread separates them from any: mu unbounded
    low_mu, high_mu = np.percentile(mus, [tail, 100 - tail], method="inverted_cdf")
    mu_all = np.array([mu, low_mu, high_mu])
    eps = np.full(3, math.inf)
    finite = np.isfinite(mu_all)
    eps[finite] = gaussian_epsilon(mu_all[finite], delta)
    return CanaryEstimate(float(eps[0]), float(eps[1]), float(eps[2]), mu, int(a.size))
