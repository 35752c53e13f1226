"""Noise calibration and privacy accounting of the NbAFL baseline (Wei et al. 2020).

Uplink standard deviation ``c L Delta_U / epsilon`` with ``c = sqrt(2 ln(1.25/delta))``,
``Delta_U = 2 W / m_k`` (``W`` the parameter clipping norm, ``m_k`` the local size) and ``L``
exposures; downlink noise ``2 c W sqrt(T^2 - L^2 K) / (m K epsilon)`` (``m = min m_k``) only
when ``T > L sqrt(K)``, ``K`` the number of clients (Wei et al.'s ``N``). Every client
uploads in every round, so ``L = T`` by default and there is no downlink noise. The accountant
epsilon composes the uplink Gaussian mechanism (noise multiplier ``sigma_U / Delta_U``) over
the ``L`` exposures (the downlink noise is not counted). ``accountant`` calibration: the
uplink multiplier from :func:`~fedprivacy.dp.calibration.noise_multiplier_for` over ``L``
exposures, no downlink noise (the broadcast is post-processing of private uploads).

The baseline itself (training and clipping) is :func:`fedprivacy.regression.baselines.nbafl`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int, require_one_of
from fedprivacy.dp._checks import require_budget, require_delta, require_positive
from fedprivacy.regression.accounting import gaussian_epsilon, gaussian_multiplier
from fedprivacy.regression.privacy import CALIBRATIONS, check_sizes

__all__ = ["NbAFLNoise", "nbafl_constant", "nbafl_noise"]


def nbafl_constant(delta: float) -> float:
    """Wei et al.'s ``c = sqrt(2 ln(1.25 / delta))``."""
    return math.sqrt(2.0 * math.log(1.25 / require_delta("delta", delta)))


@dataclass(frozen=True)
class NbAFLNoise:
    """Uplink and downlink noise of NbAFL and the accountant's epsilon of the uplink.

    Attributes
    ----------
    uplink_std : ndarray, shape (K,)
        Standard deviation of every coordinate of client ``k``'s upload.
    downlink_std : float
        Standard deviation of the server's broadcast noise (0 when ``T <= L sqrt(K)``).
    sensitivities : ndarray, shape (K,)
        ``Delta_U = 2 W / m_k``.
    rounds, exposures : int
        ``T`` and ``L``.
    clip : float
        Parameter clipping norm ``W``.
    calibration : str
        ``paper`` (Wei et al.'s formulas) or ``accountant``.
    epsilon, delta : float
        Target budget.
    epsilon_accountant : float
        RDP epsilon of the uplink releases of a client over ``L`` exposures (largest over
        clients).
    """

    uplink_std: NDArray[np.float64]
    downlink_std: float
    sensitivities: NDArray[np.float64]
    rounds: int
    exposures: int
    clip: float
    calibration: str
    epsilon: float
    delta: float
    epsilon_accountant: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary."""
        z = self.uplink_std / self.sensitivities
        return {
            "calibration": self.calibration,
            "rounds": self.rounds,
            "exposures": self.exposures,
            "clip": self.clip,
            "uplink_noise_multiplier": float(z.min()),
            "uplink_std_max": float(self.uplink_std.max()),
            "downlink_std": self.downlink_std,
            "target_epsilon": self.epsilon,
            "delta": self.delta,
            "epsilon_accountant": self.epsilon_accountant,
        }


def nbafl_noise(
    epsilon: float,
    delta: float,
    rounds: int,
    sizes: ArrayLike,
    *,
    clip: float = 1.0,
    exposures: int | None = None,
    calibration: str = "paper",
) -> NbAFLNoise:
    """NbAFL's noise (Wei et al. 2020, Theorems 1-2) for ``K = len(sizes)`` clients.

    Parameters
    ----------
    epsilon, delta : float
        Target budget.
    rounds : int
        Aggregation rounds ``T`` (>= 1).
    sizes : array_like of int
        Local sample sizes ``m_k``.
    clip : float
        Parameter clipping norm ``W`` (Wei et al.'s ``C``).
    exposures : int, optional
        ``L``, the number of uploads of each client; ``T`` (every client uploads every round)
        when omitted.
    calibration : {"paper", "accountant"}
        See the module docstring.

    Returns
    -------
    NbAFLNoise
        Uplink and downlink standard deviations and the accountant's epsilon.
    """
    e, d, t = require_budget(epsilon, delta, rounds, "rounds")
    w = require_positive("clip", clip)
    m = check_sizes(sizes).astype(np.float64)
    big_l = t if exposures is None else require_int("exposures", exposures, minimum=1)
    require_one_of("calibration", calibration, CALIBRATIONS)
    k = m.size
    sens = 2.0 * w / m
    c = nbafl_constant(d)
    if calibration == "paper":
        up = c * big_l * sens / e
        down = 0.0
        if t > big_l * math.sqrt(k):
            down = 2.0 * c * w * math.sqrt(t**2 - big_l**2 * k) / (float(m.min()) * k * e)
    else:
        up = gaussian_multiplier(e, d, big_l, 1.0) * sens
        down = 0.0
    z = up / sens
    eps = max(gaussian_epsilon(float(v), big_l, d) for v in np.unique(np.round(z, 12)))
    return NbAFLNoise(
        uplink_std=up,
        downlink_std=float(down),
        sensitivities=sens,
        rounds=t,
        exposures=big_l,
        clip=w,
        calibration=calibration,
        epsilon=e,
        delta=d,
        epsilon_accountant=float(eps),
    )
