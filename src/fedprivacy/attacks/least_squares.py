"""Least-squares reconstruction of individual updates from secure aggregates (Appendix G.2).

Once training has converged the local updates barely change, so the aggregates the server sees
over rounds ``t0 .. t1-1`` follow eq. (33), ``Delta_global = P Delta_individual + Z``. The server
estimates the individual updates by least squares (eq. (34)) and the attack is scored with the
relative error of eq. (35).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_binary_matrix
from fedprivacy.errors import ParameterError
from fedprivacy.participation.metrics import exposed_users

__all__ = ["ReconstructionResult", "least_squares_reconstruction", "simulate_aggregates"]


@dataclass(frozen=True)
class ReconstructionResult:
    """Outcome of :func:`least_squares_reconstruction`.

    Attributes
    ----------
    estimates : ndarray of float64, shape (N, d)
        Row ``i`` is the server's estimate of the update of user ``i``.
    errors : ndarray of float64, shape (N,)
        ``e_i = ||delta_i - hat delta_i||^2 / ||delta_i||^2`` (eq. (35)); NaN where the true update
        is zero or was not given.
    identifiable : ndarray of bool, shape (N,)
        Users whose update is uniquely determined by the aggregates, i.e. the exposed users of
        ``P`` (:func:`fedprivacy.participation.metrics.exposed_users`).

    """

    estimates: NDArray[np.float64]
    errors: NDArray[np.float64]
    identifiable: NDArray[np.bool_]

    @property
    def mean_error(self) -> float:
        """Average of :attr:`errors` over the users where it is defined (NaN if none)."""
        finite = self.errors[~np.isnan(self.errors)]
        return float(finite.mean()) if finite.size else float("nan")


def _float_matrix(name: str, value: ArrayLike) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(name, f"must be a matrix of numbers ({exc})") from exc
    if arr.ndim != 2:
        raise ParameterError(name, f"must be a 2-D matrix, got {arr.ndim} dimension(s)")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, "entries must be finite")
    return arr


def _participation(value: ArrayLike) -> NDArray[np.uint8]:
    p = require_binary_matrix("participation", value)
    if p.shape[0] == 0 or p.shape[1] == 0:
        raise ParameterError(
            "participation", f"needs at least one round and one user, got shape {p.shape}"
        )
    return p


def least_squares_reconstruction(
    participation: ArrayLike, aggregates: ArrayLike, true_updates: ArrayLike | None = None
) -> ReconstructionResult:
    """Estimate every user's update from the aggregates by minimum-norm least squares.

    Solves ``min ||P X - Delta_global||_F`` (eq. (34)) with :func:`numpy.linalg.lstsq` and keeps the
    solution of minimum norm. When ``P`` has full column rank this is eq. (34) itself,
    ``(P^T P)^{-1} P^T Delta_global``, and without noise it recovers every update exactly.

    When ``P`` is rank deficient the minimum-norm solution lies in the row space of ``P``, on which
    users with identical participation columns take identical values: each user of a class (a
    batch of Multi-RoundSecAgg) receives exactly the estimated sum of its class divided by the
    class size. When the class sums are themselves determined (the matrix of distinct columns has
    full column rank, as for batch partitioning after enough rounds) this is the true batch sum
    divided by ``T``, the "best the server can do" of Appendix G.2.

    Parameters
    ----------
    participation : array_like of 0/1, shape (t1 - t0, N)
        The participation matrix ``P^(t0; t1)``.
    aggregates : array_like of float, shape (t1 - t0, d)
        The observed aggregates ``Delta_global^(t0; t1)``, one row per round (a skipped round
        is a zero row of ``P``; its aggregate should be zero).
    true_updates : array_like of float, shape (N, d), optional
        The (weighted) individual updates ``Delta_individual``, used only to score the attack.

    Returns
    -------
    ReconstructionResult

    Raises
    ------
    ParameterError
        If a shape does not match ``P`` or an entry is not finite.

    Examples
    --------
    The three-round example of Section 3.2:

    >>> P = [[1, 1, 0], [0, 1, 1], [1, 0, 1]]
    >>> X = np.array([[1.0], [2.0], [4.0]])
    >>> res = least_squares_reconstruction(P, simulate_aggregates(P, X), X)
    >>> np.round(res.estimates.ravel(), 12).tolist(), res.identifiable.tolist()
    ([1.0, 2.0, 4.0], [True, True, True])

    """
    p = _participation(participation)
    rounds, n = p.shape
    agg = _float_matrix("aggregates", aggregates)
    if agg.shape[0] != rounds:
        raise ParameterError(
            "aggregates", f"needs one row per round ({rounds}), got shape {agg.shape}"
        )
    d = agg.shape[1]
    solution = np.linalg.lstsq(p.astype(np.float64), agg, rcond=None)[0]
    estimates = np.asarray(solution, dtype=np.float64)
    errors = np.full(n, np.nan)
    if true_updates is not None:
        truth = _float_matrix("true_updates", true_updates)
        if truth.shape != (n, d):
            raise ParameterError("true_updates", f"must have shape ({n}, {d}), got {truth.shape}")
        norms = np.einsum("ij,ij->i", truth, truth)
        diff = truth - estimates
        sq = np.einsum("ij,ij->i", diff, diff)
        nonzero = norms > 0
        errors[nonzero] = sq[nonzero] / norms[nonzero]
    identifiable = np.zeros(n, dtype=np.bool_)
    identifiable[exposed_users(p)] = True
    return ReconstructionResult(estimates=estimates, errors=errors, identifiable=identifiable)


def simulate_aggregates(
    participation: ArrayLike,
    updates: ArrayLike,
    noise_std: float = 0.0,
    rng: np.random.Generator | int | None = None,
) -> NDArray[np.float64]:
    """Simulate the aggregates ``P @ updates + Z`` seen by the server (eq. (33)).

    Parameters
    ----------
    participation : array_like of 0/1, shape (rounds, N)
        The participation matrix.
    updates : array_like of float, shape (N, d)
        The (weighted) individual updates, fixed over the rounds.
    noise_std : float
        Standard deviation of the i.i.d. Gaussian perturbation ``Z`` (0 for none).
    rng : numpy.random.Generator or int or None
        Random generator or seed for ``Z``; unused when ``noise_std == 0``.

    Returns
    -------
    ndarray of float64, shape (rounds, d)

    Raises
    ------
    ParameterError
        If ``updates`` does not have one row per user or ``noise_std`` is negative or not finite.

    Examples
    --------
    >>> simulate_aggregates([[1, 1, 0], [0, 1, 1]], [[1.0], [2.0], [4.0]]).ravel().tolist()
    [3.0, 6.0]

    """
    p = _participation(participation)
    x = _float_matrix("updates", updates)
    if x.shape[0] != p.shape[1]:
        raise ParameterError(
            "updates", f"needs one row per user ({p.shape[1]}), got shape {x.shape}"
        )
    if isinstance(noise_std, bool) or not isinstance(noise_std, numbers.Real):
        raise ParameterError("noise_std", f"must be a real number >= 0, got {noise_std!r}")
    sigma = float(noise_std)
    if not (np.isfinite(sigma) and sigma >= 0):
        raise ParameterError("noise_std", f"must be a finite number >= 0, got {sigma!r}")
    out: NDArray[np.float64] = p.astype(np.float64) @ x
    if sigma > 0:
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        out = out + sigma * gen.standard_normal(out.shape)
    return out
