"""Noise calibration and privacy accounting of NA-FGD, its Laplace variant, DP-SGD and NbAFL.

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
    n_k``. The accountant is the RDP of the Laplace mechanism (Mironov 2017, Prop. 6; the RDP of
    a p-dimensional Laplace mechanism with L1-bounded shift is at most the one-dimensional value,
    because the per-coordinate RDP is a convex function of the shift that vanishes at 0),
    composed over ``T`` iterations and converted by the DP core's :func:`rdp_to_epsilon`.

DP-SGD (record-level, Opacus-style baseline)
    Per-sample clipping to ``C``, Poisson sampling with rate ``q``, Gaussian noise ``z C`` on
    each client's sum: a Poisson-sub-sampled Gaussian mechanism per record, composed over the
    steps. ``paper`` calibration: Abadi et al.'s ``z = c_MA q sqrt(T log(1/delta)) / epsilon``;
    ``accountant``: :func:`fedprivacy.dp.calibration.noise_multiplier_for`. Both search and
    report on :data:`SUBSAMPLED_ORDERS` (63 of the DP core's orders) for speed.

NbAFL (Wei et al. 2020)
    Uplink standard deviation ``c L Delta_U / epsilon`` with ``c = sqrt(2 ln(1.25/delta))``,
    ``Delta_U = 2 W / m_k`` (``W`` the parameter clipping norm, ``m_k`` the local size) and ``L``
    exposures; downlink noise ``2 c W sqrt(T^2 - L^2 K) / (m K epsilon)`` (``m = min m_k``) only
    when ``T > L sqrt(K)``, ``K`` the number of clients (Wei et al.'s ``N``). Every client
    uploads in every round, so ``L = T`` by default and there is no downlink noise. The accountant
    epsilon composes the uplink Gaussian mechanism (noise multiplier ``sigma_U / Delta_U``) over
    the ``L`` exposures (the downlink noise is not counted). ``accountant`` calibration: the
    uplink multiplier from :func:`noise_multiplier_for` over ``L`` exposures, no downlink noise
    (the broadcast is post-processing of private uploads).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import brentq

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_delta, require_positive, require_sampling_rate
from fedprivacy.dp.accounting import (
    DEFAULT_ORDERS,
    PrivacyAccountant,
    epsilon_for,
    quiet_accounting,
    rdp_to_epsilon,
)
from fedprivacy.dp.calibration import noise_multiplier_for
from fedprivacy.errors import ParameterError

__all__ = [
    "CALIBRATIONS",
    "C_MA",
    "MECHANISMS",
    "NEIGHBOURINGS",
    "SUBSAMPLED_ORDERS",
    "Calibration",
    "ClientNoise",
    "Mechanism",
    "NbAFLNoise",
    "Neighbouring",
    "calibrate_client_noise",
    "dp_sgd_epsilon",
    "dp_sgd_noise_multiplier",
    "gaussian_epsilon",
    "laplace_epsilon",
    "laplace_noise_multiplier_for",
    "laplace_rdp",
    "nbafl_constant",
    "nbafl_noise",
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

#: RDP orders for sub-sampled Gaussian accounting (DP-SGD): 63 of the DP core's DEFAULT_ORDERS.
#: The sub-sampled RDP costs about 10 ms per order, so the full 485-order grid would cost seconds
#: per (noise, rate) pair; this subset gives epsilons at most a few percent above the full grid's.
SUBSAMPLED_ORDERS: Final = tuple(
    [1.1 + 0.1 * i for i in range(9)]
    + [2.0 + 0.5 * i for i in range(13)]
    + [float(v) for v in range(9, 33)]
    + [float(v) for v in range(36, 65, 4)]
    + [80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 256.0, 512.0, 1024.0]
)


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ParameterError(name, f"must be one of {', '.join(allowed)}; got {value!r}")
    return value


def _sizes(sizes: ArrayLike) -> NDArray[np.int64]:
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
    rel = _choice("neighbouring", neighbouring, NEIGHBOURINGS)
    factor = 1.0 if rel == "add-remove" else 2.0
    return factor * c / _sizes(sizes).astype(np.float64)


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
    e = require_positive("epsilon", epsilon)
    d = require_delta("delta", delta)
    t = require_int("steps", steps, minimum=1)
    c = require_positive("clip", clip)
    n = _sizes(sizes).astype(np.float64)
    return C_MA * c * math.sqrt(t * math.log(1.0 / d)) / (e * n)


@functools.lru_cache(maxsize=1024)
def gaussian_epsilon(
    noise_multiplier: float, steps: int, delta: float, sampling_rate: float = 1.0
) -> float:
    """RDP-accountant epsilon of ``steps`` (sub-sampled) Gaussian releases (cached).

    :func:`fedprivacy.dp.accounting.epsilon_for` for sampling rate 1; with sub-sampling the DP
    core's accountant on the orders :data:`SUBSAMPLED_ORDERS`.
    """
    if sampling_rate == 1.0:
        return float(epsilon_for(noise_multiplier, steps, delta))
    acc = PrivacyAccountant("rdp", SUBSAMPLED_ORDERS)
    with quiet_accounting():
        return float(acc.compose_gaussian(noise_multiplier, steps, sampling_rate).epsilon(delta))


def laplace_rdp(noise_multiplier: float, orders: ArrayLike | None = None) -> NDArray[np.float64]:
    """RDP of one Laplace release with scale ``b = noise_multiplier * sensitivity``.

    Mironov (2017), Proposition 6: for ``alpha > 1``,
    ``eps(alpha) = log(alpha/(2 alpha - 1) e^{(alpha-1)/z} + (alpha-1)/(2 alpha-1) e^{-alpha/z})
    / (alpha - 1)`` with ``z = b / sensitivity``.

    Parameters
    ----------
    noise_multiplier : float
        ``z = b / Delta_1`` (> 0).
    orders : array_like, optional
        RDP orders (> 1); the DP core's ``DEFAULT_ORDERS`` when omitted.

    Returns
    -------
    ndarray of float64
        ``eps(alpha)`` per order.
    """
    z = require_positive("noise_multiplier", noise_multiplier)
    a = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=np.float64)
    if np.any(a <= 1.0):
        raise ParameterError("orders", "every RDP order must be > 1")
    first = np.log(a / (2 * a - 1)) + (a - 1) / z
    second = np.log((a - 1) / (2 * a - 1)) - a / z
    return np.asarray(np.logaddexp(first, second) / (a - 1), dtype=np.float64)


@functools.lru_cache(maxsize=1024)
def laplace_epsilon(noise_multiplier: float, steps: int, delta: float) -> float:
    """RDP-accountant epsilon of ``steps`` Laplace releases with multiplier ``b / Delta_1``.

    The per-release RDP of :func:`laplace_rdp`, times ``steps``, converted at ``delta`` by the DP
    core's :func:`~fedprivacy.dp.accounting.rdp_to_epsilon` (never above the pure-DP bound
    ``steps / noise_multiplier``, which is also returned when smaller).
    """
    t = require_int("steps", steps, minimum=1)
    rdp = t * laplace_rdp(noise_multiplier)
    eps, _ = rdp_to_epsilon(DEFAULT_ORDERS, rdp, delta)
    return float(min(eps, t / noise_multiplier))


def _solve_decreasing(fn: Any, target: float, what: str) -> float:
    """Smallest ``z`` in [1e-4, 1e7] with ``fn(z) <= target`` for a decreasing ``fn``."""
    lo, hi = 1e-4, 1e7
    if fn(hi) > target:
        raise ParameterError("epsilon", f"{what}: target {target:g} unreachable")
    if fn(lo) <= target:
        return lo
    root = float(brentq(lambda u: fn(math.exp(u)) - target, math.log(lo), math.log(hi), xtol=1e-9))
    z = math.exp(root)
    while fn(z) > target:
        z *= 1.0 + 1e-9
    return z


@functools.lru_cache(maxsize=256)
def laplace_noise_multiplier_for(epsilon: float, delta: float, steps: int) -> float:
    """Smallest ``b / Delta_1`` whose ``steps``-fold Laplace composition meets the target.

    Parameters
    ----------
    epsilon : float
        Target epsilon (> 0).
    delta : float
        Target delta in (0, 1).
    steps : int
        Number of releases (>= 1).

    Returns
    -------
    float
        The multiplier ``z`` with ``laplace_epsilon(z, steps, delta) <= epsilon``.
    """
    e = require_positive("epsilon", epsilon)
    d = require_delta("delta", delta)
    t = require_int("steps", steps, minimum=1)
    return _solve_decreasing(lambda z: laplace_epsilon(z, t, d), e, "Laplace calibration")


@functools.lru_cache(maxsize=256)
def _gaussian_multiplier(epsilon: float, delta: float, steps: int, rate: float) -> float:
    if rate == 1.0:
        return float(noise_multiplier_for(epsilon, delta, steps, lower=1e-3, upper=1e7))
    with quiet_accounting():
        return float(
            noise_multiplier_for(
                epsilon, delta, steps, rate, orders=SUBSAMPLED_ORDERS, lower=1e-2, upper=1e3,
                rtol=1e-3,
            )
        )  # fmt: skip


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
    e = require_positive("epsilon", epsilon)
    d = require_delta("delta", delta)
    t = require_int("steps", steps, minimum=1)
    mech = _choice("mechanism", mechanism, MECHANISMS)
    cal = _choice("calibration", calibration, CALIBRATIONS)
    n = _sizes(sizes)
    sens = record_sensitivity(clip, n, neighbouring)
    if cal == "paper":
        scales = paper_noise_scale(e, d, t, clip, n)
    elif mech == "gaussian":
        scales = _gaussian_multiplier(e, d, t, 1.0) * sens
    else:
        scales = laplace_noise_multiplier_for(e, d, t) * sens
    mult = scales / sens
    eps = [
        gaussian_epsilon(float(z), t, d) if mech == "gaussian" else laplace_epsilon(float(z), t, d)
        for z in np.unique(np.round(mult, 12))
    ]
    return ClientNoise(
        mechanism=mech,
        calibration=cal,
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
        DP core's :func:`noise_multiplier_for` (searched on a coarse order grid).

    Returns
    -------
    float
        The noise multiplier ``z`` (noise standard deviation over ``C``).
    """
    e = require_positive("epsilon", epsilon)
    d = require_delta("delta", delta)
    t = require_int("steps", steps, minimum=1)
    q = require_sampling_rate("sampling_rate", sampling_rate)
    if _choice("calibration", calibration, CALIBRATIONS) == "paper":
        return C_MA * q * math.sqrt(t * math.log(1.0 / d)) / e
    return _gaussian_multiplier(e, d, t, q)


def dp_sgd_epsilon(
    noise_multiplier: float, steps: int, delta: float, sampling_rate: float
) -> float:
    """RDP-accountant epsilon of DP-SGD: Poisson-sub-sampled Gaussian composed over steps."""
    return gaussian_epsilon(float(noise_multiplier), int(steps), float(delta), float(sampling_rate))


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
    e = require_positive("epsilon", epsilon)
    d = require_delta("delta", delta)
    t = require_int("rounds", rounds, minimum=1)
    w = require_positive("clip", clip)
    m = _sizes(sizes).astype(np.float64)
    big_l = t if exposures is None else require_int("exposures", exposures, minimum=1)
    cal = _choice("calibration", calibration, CALIBRATIONS)
    k = m.size
    sens = 2.0 * w / m
    c = nbafl_constant(d)
    if cal == "paper":
        up = c * big_l * sens / e
        down = 0.0
        if t > big_l * math.sqrt(k):
            down = 2.0 * c * w * math.sqrt(t**2 - big_l**2 * k) / (float(m.min()) * k * e)
    else:
        up = _gaussian_multiplier(e, d, big_l, 1.0) * sens
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
        calibration=cal,
        epsilon=e,
        delta=d,
        epsilon_accountant=float(eps),
    )
