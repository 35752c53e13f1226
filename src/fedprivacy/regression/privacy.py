"""Noise calibration of NA-FGD, its Laplace variant and DP-SGD, with the accountant's epsilon.

NA-FGD (the paper's Algorithm 2)
    In every iteration client ``k`` releases its local gradient, clipped to norm ``C``, plus
    noise. The paper sets the Gaussian standard deviation to
    ``sigma_k = c_MA C sqrt(T log(1/delta)) / (epsilon n_k)`` with ``c_MA = 0.473`` (Appendix C.2,
    from the moments-accountant bound of Abadi et al. 2016, Theorem 1, at sampling rate 1).

Sensitivity (our derivation; the supplement does not state it)
    The formula is Abadi et al.'s noise multiplier ``z = c_MA sqrt(T log(1/delta)) / epsilon``
    applied to a *mean* of ``n_k`` per-record contributions of norm at most ``C``: a sum of such
    contributions changes by at most ``C`` when one record is added or removed, so the mean has
    L2 sensitivity ``Delta_k = C / n_k`` under **add/remove-one** neighbouring (the relation of
    Abadi et al., the default here), and ``2 C / n_k`` under **replace-one** neighbouring. Each
    release is then a Gaussian mechanism with noise multiplier ``z_k = sigma_k / Delta_k``,
    composed over the ``T`` iterations (sampling rate 1); the accountant's epsilon of a client is
    ``epsilon_for(z_k, T, delta)`` of :mod:`fedprivacy.dp.accounting`. Caveat: clipping the
    *aggregate* local gradient to norm ``C`` (as the paper does) bounds one record's influence by
    ``2 C`` only, not ``C / n_k``; the reported epsilon therefore assumes per-record gradient
    contributions bounded by ``C``, which is the paper's implicit assumption.

    With the paper's sigma, ``z_k`` does not depend on ``k`` or ``T`` enters only through
    ``sqrt(T)``; the RDP accountant then reports about 3 times the target epsilon (the c_MA
    formula is the asymptotic moments-accountant bound, which assumes a small sampling rate and is
    not valid at sampling rate 1). The ``accountant`` calibration instead solves for the smallest
    ``z`` whose ``T``-fold composition meets ``(epsilon, delta)`` and sets ``sigma_k = z Delta_k``.

Laplace variant (Appendix B.2)
    The local gradient is clipped to L1 norm ``C`` (L1 sensitivity ``Delta_k = C / n_k``,
    add/remove) and Laplace noise of scale ``b_k`` is added to every coordinate. The supplement
    only says "noise level proportional to the L1 sensitivity"; the ``paper`` calibration uses the
    Gaussian formula with the L1 sensitivity, ``b_k = c_MA sqrt(T log(1/delta)) / epsilon * C /
    n_k``. The accountant is the RDP of the Laplace mechanism composed over ``T`` iterations
    (:mod:`fedprivacy.regression.accounting`).

DP-SGD (record-level, Opacus-style baseline)
    Per-sample clipping to ``C``, Poisson sampling with rate ``q``, Gaussian noise ``z C`` on
    each client's sum: a Poisson-sub-sampled Gaussian mechanism per record, composed over the
    steps. ``paper`` calibration: Abadi et al.'s ``z = c_MA q sqrt(T log(1/delta)) / epsilon``;
    ``accountant``: :func:`fedprivacy.dp.calibration.noise_multiplier_for`. Both search and
    report on :data:`~fedprivacy.regression.accounting.SUBSAMPLED_ORDERS` (63 of the DP core's
    orders) for speed.

The accountants themselves (Gaussian and Laplace RDP, the ``accountant`` calibrations) are in
:mod:`fedprivacy.regression.accounting`; the NbAFL baseline's noise is in
:mod:`fedprivacy.regression.nbafl_calibration`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_one_of
from fedprivacy.dp._checks import require_budget, require_positive, require_sampling_rate
from fedprivacy.errors import ParameterError
from fedprivacy.regression.accounting import (
    gaussian_epsilon,
    gaussian_multiplier,
    laplace_epsilon,
    laplace_noise_multiplier_for,
)

__all__ = [
    "CALIBRATIONS",
    "C_MA",
    "MECHANISMS",
    "NEIGHBOURINGS",
    "Calibration",
    "ClientNoise",
    "Mechanism",
    "Neighbouring",
    "calibrate_client_noise",
    "dp_sgd_epsilon",
    "dp_sgd_noise_multiplier",
    "paper_noise_scale",
    "record_sensitivity",
]

#: Abadi et al.'s moments-accountant constant as used by the paper (Appendix C.2).
C_MA: Final = 0.473

Mechanism = Literal["gaussian", "laplace"]
Calibration = Literal["paper", "accountant"]
Neighbouring = Literal["add-remove", "replace"]
MECHANISMS: Final = ("gaussian", "laplace")
CALIBRATIONS: Final = ("paper", "accountant")
NEIGHBOURINGS: Final = ("add-remove", "replace")


def check_sizes(sizes: ArrayLike) -> NDArray[np.int64]:
    arr = np.asarray(sizes)
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError("sizes", "must be a non-empty 1-D sequence of local sample sizes")
    if not np.issubdtype(arr.dtype, np.integer) or np.any(arr < 1):
        raise ParameterError("sizes", "every local sample size must be an integer >= 1")
    return arr.astype(np.int64)


def record_sensitivity(
    clip: float, sizes: ArrayLike, neighbouring: str = "add-remove"
) -> NDArray[np.float64]:
    """Sensitivity of each client's clipped mean gradient: ``C / n_k`` or ``2 C / n_k``.

    Parameters
    ----------
    clip : float
        Clipping norm ``C`` (> 0).
    sizes : array_like of int
        Local sample sizes ``n_k``.
    neighbouring : {"add-remove", "replace"}
        Neighbouring relation (add/remove one record, or replace one record).

    Returns
    -------
    ndarray of float64, shape (K,)
        The per-client sensitivity (see the module docstring for the derivation).
    """
    c = require_positive("clip", clip)
    require_one_of("neighbouring", neighbouring, NEIGHBOURINGS)
    factor = 1.0 if neighbouring == "add-remove" else 2.0
    return factor * c / check_sizes(sizes).astype(np.float64)


def paper_noise_scale(
    epsilon: float, delta: float, steps: int, clip: float, sizes: ArrayLike
) -> NDArray[np.float64]:
    """The paper's ``sigma_k = c_MA C sqrt(T log(1/delta)) / (epsilon n_k)`` per client.

    Parameters
    ----------
    epsilon : float
        Privacy budget (> 0).
    delta : float
        Failure probability in (0, 1).
    steps : int
        Number of iterations ``T`` (>= 1).
    clip : float
        Clipping norm ``C`` (> 0).
    sizes : array_like of int
        Local sample sizes ``n_k``.

    Returns
    -------
    ndarray of float64, shape (K,)
        ``sigma_k`` (used as the Laplace scale by the Laplace variant).

    Examples
    --------
    >>> float(paper_noise_scale(1.0, math.exp(-1.0), 4, 1.0, [2])[0])  # 0.473 * 2 / 2
    0.473
    """
    e, d, t = require_budget(epsilon, delta, steps)
    c = require_positive("clip", clip)
    n = check_sizes(sizes).astype(np.float64)
    return C_MA * c * math.sqrt(t * math.log(1.0 / d)) / (e * n)


@dataclass(frozen=True)
class ClientNoise:
    """The per-client noise of NA-FGD (or its Laplace variant) and its privacy accounting.

    Attributes
    ----------
    mechanism, calibration, neighbouring : str
        See :func:`calibrate_client_noise`.
    epsilon, delta : float
        The target budget.
    steps : int
        Number of iterations ``T`` (releases per client).
    clip : float
        Clipping norm ``C`` (L2 for Gaussian, L1 for Laplace).
    sizes : tuple of int
        Local sample sizes ``n_k``.
    scales : ndarray, shape (K,)
        Gaussian standard deviation ``sigma_k`` or Laplace scale ``b_k`` of every coordinate.
    sensitivities : ndarray, shape (K,)
        ``Delta_k`` (L2 or L1).
    noise_multipliers : ndarray, shape (K,)
        ``scales / sensitivities``.
    epsilon_accountant : float
        The accountant's epsilon at ``delta`` for the noise actually used, the largest over the
        clients (RDP accountant of the DP core; Laplace RDP for the Laplace variant).
    """

    mechanism: str
    calibration: str
    neighbouring: str
    epsilon: float
    delta: float
    steps: int
    clip: float
    sizes: tuple[int, ...]
    scales: NDArray[np.float64]
    sensitivities: NDArray[np.float64]
    noise_multipliers: NDArray[np.float64]
    epsilon_accountant: float

    def aggregate_variance(self, weights: ArrayLike) -> float:
        """Per-coordinate variance of ``sum_k pi_k xi_k`` (``2 b^2`` per Laplace term)."""
        w = np.asarray(weights, dtype=np.float64)
        per = self.scales**2 * (2.0 if self.mechanism == "laplace" else 1.0)
        return float(np.sum(w**2 * per))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        z = np.unique(np.round(self.noise_multipliers, 12))
        return {
            "mechanism": self.mechanism,
            "calibration": self.calibration,
            "neighbouring": self.neighbouring,
            "target_epsilon": self.epsilon,
            "delta": self.delta,
            "steps": self.steps,
            "clip": self.clip,
            "noise_multiplier": float(z[0]) if z.size == 1 else [float(v) for v in z],
            "scale_min": float(self.scales.min()),
            "scale_max": float(self.scales.max()),
            "epsilon_accountant": self.epsilon_accountant,
        }


def calibrate_client_noise(
    epsilon: float,
    delta: float,
    steps: int,
    sizes: ArrayLike,
    *,
    mechanism: str = "gaussian",
    calibration: str = "paper",
    clip: float = 1.0,
    neighbouring: str = "add-remove",
) -> ClientNoise:
    """Per-client noise of NA-FGD for a target ``(epsilon, delta)`` over ``T`` iterations.

    Parameters
    ----------
    epsilon : float
        Target epsilon (> 0).
    delta : float
        Target delta in (0, 1).
    steps : int
        Iterations ``T`` (>= 1).
    sizes : array_like of int
        Local sample sizes ``n_k``.
    mechanism : {"gaussian", "laplace"}
        Gaussian noise after L2 clipping, or Laplace noise after L1 clipping.
    calibration : {"paper", "accountant"}
        ``paper``: ``c_MA C sqrt(T log(1/delta)) / (epsilon n_k)`` (also the Laplace scale);
        ``accountant``: the smallest multiplier that meets the target by the RDP accountant,
        times the sensitivity.
    clip : float
        Clipping norm ``C`` (> 0).
    neighbouring : {"add-remove", "replace"}
        Neighbouring relation for the sensitivity (module docstring).

    Returns
    -------
    ClientNoise
        Scales, sensitivities and the accountant's epsilon for the noise used.

    Raises
    ------
    ParameterError
        If an argument is out of range.
    """
    e, d, t = require_budget(epsilon, delta, steps)
    require_one_of("mechanism", mechanism, MECHANISMS)
    require_one_of("calibration", calibration, CALIBRATIONS)
    n = check_sizes(sizes)
    sens = record_sensitivity(clip, n, neighbouring)
    if calibration == "paper":
        scales = paper_noise_scale(e, d, t, clip, n)
    elif mechanism == "gaussian":
        scales = gaussian_multiplier(e, d, t, 1.0) * sens
    else:
        scales = laplace_noise_multiplier_for(e, d, t) * sens
    mult = scales / sens
    epsilon_of = gaussian_epsilon if mechanism == "gaussian" else laplace_epsilon
    eps = [epsilon_of(float(z), t, d) for z in np.unique(np.round(mult, 12))]
    return ClientNoise(
        mechanism=mechanism,
        calibration=calibration,
        neighbouring=neighbouring,
        epsilon=e,
        delta=d,
        steps=t,
        clip=float(clip),
        sizes=tuple(int(v) for v in n),
        scales=scales,
        sensitivities=sens,
        noise_multipliers=mult,
        epsilon_accountant=float(max(eps)),
    )


def dp_sgd_noise_multiplier(
    epsilon: float, delta: float, steps: int, sampling_rate: float, calibration: str = "paper"
) -> float:
    """Noise multiplier of record-level DP-SGD (per-sample clipping, Poisson rate ``q``).

    Parameters
    ----------
    epsilon, delta : float
        Target budget.
    steps : int
        Number of steps.
    sampling_rate : float
        Poisson sampling rate ``q`` in (0, 1].
    calibration : {"paper", "accountant"}
        ``paper``: Abadi et al.'s ``c_MA q sqrt(T log(1/delta)) / epsilon``; ``accountant``: the
        DP core's :func:`~fedprivacy.dp.calibration.noise_multiplier_for` (searched on a coarse
        order grid).

    Returns
    -------
    float
        The noise multiplier ``z`` (noise standard deviation over ``C``).
    """
    e, d, t = require_budget(epsilon, delta, steps)
    q = require_sampling_rate("sampling_rate", sampling_rate)
    require_one_of("calibration", calibration, CALIBRATIONS)
    if calibration == "paper":
        return C_MA * q * math.sqrt(t * math.log(1.0 / d)) / e
    return gaussian_multiplier(e, d, t, q)


def dp_sgd_epsilon(
    noise_multiplier: float, steps: int, delta: float, sampling_rate: float
) -> float:
    """RDP-accountant epsilon of DP-SGD: Poisson-sub-sampled Gaussian composed over steps."""
    return gaussian_epsilon(float(noise_multiplier), int(steps), float(delta), float(sampling_rate))
