"""Per-user epsilon from a participation ledger: each user composes only the rounds it was in.

With add/remove-one-user adjacency, a user whose clipped update (L2 norm at most ``C``) entered
``n`` aggregates, each released with Gaussian noise of standard deviation ``z C`` on the sum, has
been through ``n`` Gaussian mechanisms of noise multiplier ``z``; rounds it was not aggregated in
do not depend on its data. No amplification by sub-sampling is claimed: the server chooses who
participates (or knows it), so the sample is not secret.

When the noise differs between rounds (distributed DP, where it depends on how many parties were
really aggregated), :func:`per_user_epsilons_by_round` composes each user's rounds exactly: ``k``
Gaussian mechanisms of noise multipliers ``z_1 .. z_k`` compose to one Gaussian mechanism of
noise multiplier ``(sum_i z_i^-2)^(-1/2)`` (their Renyi divergences add up order by order, and
so do their Gaussian-DP parameters ``mu_i^2 = z_i^-2``; Dong, Roth and Su 2019).

Both functions reduce every user to ``sum z_t^-2`` over its rounds and convert it by the
registered accountant kind ``accountant`` (:data:`~fedprivacy.dp.accountants.ACCOUNTANTS`,
:meth:`~fedprivacy.dp.accountants.AccountantBackend.user_epsilons`): ``"rdp"`` (Lemma 2 of the
ULDP-FL paper) or ``"pld"``, the exact privacy profile of the composed Gaussian
(:mod:`fedprivacy.dp.gaussian_pld`), never above the RDP value; a newly registered kind converts
through its own composition. ``"pld"`` is
exact only for continuous Gaussian noise; a sum of discrete Gaussians (distributed DP) is
bounded in RDP only (Kairouz et al. 2021, Prop. 14).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy.dp._checks import require_delta, require_positive
from fedprivacy.dp.accountants import ACCOUNTANTS
from fedprivacy.dp.accounting import AccountantKind, epsilon_for
from fedprivacy.errors import ParameterError

__all__ = [
    "epsilons_of_mu2",
    "mu2_budget",
    "per_user_epsilons",
    "per_user_epsilons_by_round",
    "spread",
]


def epsilons_of_mu2(
    mu2: ArrayLike, delta: float, accountant: AccountantKind = "rdp"
) -> NDArray[np.float64]:
    """Epsilon at ``delta`` of users whose rounds sum to ``mu2 = sum z_t^-2`` (0: none).

    Examples
    --------
    >>> e = epsilons_of_mu2([0.0, 0.25, 0.25], 1e-5, "pld")
    >>> bool(e[0] == 0.0 and e[1] == e[2] < epsilons_of_mu2([0.25], 1e-5, "rdp")[0])
    True
    """
    m = np.asarray(mu2, dtype=np.float64).ravel()
    if np.any(~np.isfinite(m)) or np.any(m < 0):
        raise ParameterError("mu2", "must be finite and >= 0")
    kind = ACCOUNTANTS.lookup(accountant, parameter="accountant")
    return kind.user_epsilons(m, require_delta("delta", delta))


def mu2_budget(budget: float, delta: float, accountant: AccountantKind = "rdp") -> float:
    """The largest ``sum z_t^-2`` whose epsilon at ``delta`` stays within ``budget``.

    In closed form per accountant, rounded down by a relative 1e-9 (so that sums of the same
    rounds in another order, and the conversion's own rounding, stay within).

    Examples
    --------
    >>> m = mu2_budget(2.0, 1e-5, "pld")
    >>> e = epsilons_of_mu2([m, m * 1.001], 1e-5, "pld")
    >>> bool(e[0] <= 2.0 < e[1])
    True
    """
    e = require_positive("epsilon_budget", budget)
    d = require_delta("delta", delta)
    kind = ACCOUNTANTS.lookup(accountant, parameter="accountant")
    return kind.mu2_budget(e, d) * (1.0 - 1e-9)


def per_user_epsilons(
    counts: ArrayLike,
    noise_multiplier: float,
    delta: float,
    accountant: AccountantKind = "rdp",
) -> NDArray[np.float64]:
    """Epsilon at ``delta`` of every user, from how many aggregates it was in.

    Parameters
    ----------
    counts : array_like of int, shape (users,)
        Participation counts (the ledger's ``frequency``).
    noise_multiplier : float
        Noise standard deviation over the clipping norm, > 0.
    delta : float
        Target delta in (0, 1), per user.
    accountant : {"rdp", "pld"}
        Which dp-accounting accountant composes the rounds.

    Returns
    -------
    ndarray of float64, shape (users,)
        0 for users never aggregated.

    Examples
    --------
    >>> eps = per_user_epsilons([0, 1, 10], noise_multiplier=2.0, delta=1e-5)
    >>> bool(eps[0] == 0.0 and eps[1] < eps[2])
    True
    """
    n = np.asarray(counts)
    if n.ndim != 1 or not np.issubdtype(n.dtype, np.integer) or np.any(n < 0):
        raise ParameterError("counts", "must be a 1-D array of non-negative integers")
    z = require_positive("noise_multiplier", noise_multiplier)
    if accountant != "rdp":
        return epsilons_of_mu2(n / z**2, delta, accountant)
    d = require_delta("delta", delta)
    out = np.zeros(n.size, dtype=np.float64)
    for count in np.unique(n[n > 0]):  # as a run's own accountant composes them: bit for bit
        out[n == count] = epsilon_for(z, int(count), d, accountant="rdp")
    return out


def per_user_epsilons_by_round(
    participation: ArrayLike,
    noise_multipliers: ArrayLike,
    delta: float,
    accountant: AccountantKind = "rdp",
) -> NDArray[np.float64]:
    """Epsilon at ``delta`` of every user, from the rounds it was in and each round's noise.

    Parameters
    ----------
    participation : array_like of bool, shape (rounds, users)
        Whether each user was in each round's aggregate (the ledger's matrix).
    noise_multipliers : array_like of float, shape (rounds,)
        The noise multiplier of each round's released aggregate; NaN for rounds that released
        nothing (no user of such a round may be marked as aggregated).
    delta : float
        Target delta in (0, 1), per user.
    accountant : {"rdp", "pld"}
        Which dp-accounting accountant evaluates the composed mechanism.

    Returns
    -------
    ndarray of float64, shape (users,)
        0 for users never aggregated.

    Examples
    --------
    >>> p = np.array([[1, 1], [1, 0]], dtype=bool)
    >>> eps = per_user_epsilons_by_round(p, [2.0, 2.0], 1e-5)
    >>> bool(eps[0] == per_user_epsilons([2], 2.0, 1e-5)[0] and eps[1] < eps[0])
    True
    """
    m = np.asarray(participation)
    z = np.asarray(noise_multipliers, dtype=np.float64)
    if m.ndim != 2 or m.dtype != np.bool_:
        raise ParameterError("participation", "must be a 2-D boolean array (rounds, users)")
    if z.shape != (m.shape[0],):
        raise ParameterError("noise_multipliers", f"must have one entry per round ({m.shape[0]})")
    used = m.any(axis=1)
    if np.any(~np.isfinite(z[used])) or np.any(z[used] <= 0):
        raise ParameterError(
            "noise_multipliers", "every round with aggregated users needs a positive noise"
        )
    inverse = np.where(used, 1.0 / np.where(used, z, 1.0) ** 2, 0.0)
    return epsilons_of_mu2(inverse @ m, delta, accountant)  # sum of each user's z_t^-2


def spread(values: NDArray[np.float64]) -> dict[str, float]:
    """``{"min", "median", "max"}`` of per-user values (zeros included: unaggregated users).

    Examples
    --------
    >>> spread(np.array([0.0, 1.0, 3.0]))
    {'min': 0.0, 'median': 1.0, 'max': 3.0}
    """
    if values.size == 0:
        return {"min": 0.0, "median": 0.0, "max": 0.0}
    return {
        "min": float(values.min()),
        "median": float(np.median(values)),
        "max": float(values.max()),
    }
