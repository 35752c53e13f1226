"""Pooled OLS, FGD, NA-FGD, ANA-FGD and the Laplace variant, vectorised over replications.

* **OLS** -- the pooled least-squares estimate (the efficiency benchmark).
* **FGD** -- full-batch federated gradient descent: the server averages the local gradients with
  weights ``pi_k = n_k / N``; no clipping, no noise (it converges to OLS, Theorem 1).
* **NA-FGD** -- every client clips its local gradient to norm ``C`` and adds noise calibrated by
  :func:`~fedprivacy.regression.privacy.calibrate_client_noise`; the estimate is the last iterate
  ``theta_T`` (Theorem 2).
* **ANA-FGD** -- the average ``T^{-1} sum_{t=1}^T theta_t`` of the same NA-FGD iterates
  (Polyak-Ruppert averaging, Theorem 3); it costs nothing extra.
* **Laplace variant** -- ``mechanism="laplace"``: L1 clipping and Laplace noise (Appendix B.2).

Learning rates may be constant (Theorems 1-3) or diminishing, ``alpha_t = alpha_0 t^(-gamma)``
(Appendix B.3); local sample sizes may differ (Appendix B.4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.regression.data import STREAM_NA_FGD, RegressionData
from fedprivacy.regression.engine import GDRun, Spectral, noisy_gradient_descent, spectral
from fedprivacy.regression.noise import aggregated_noise
from fedprivacy.regression.privacy import ClientNoise, calibrate_client_noise

__all__ = ["NAFGDResult", "ana_fgd", "fgd", "na_fgd", "ols"]

F64 = NDArray[np.float64]


def ols(data: RegressionData, *, spec: Spectral | None = None) -> F64:
    """Pooled least squares for every replication, shape ``(R, p)``."""
    return (spectral(data) if spec is None else spec).ols


def fgd(
    data: RegressionData,
    lr: F64,
    *,
    theta0: F64 | None = None,
    spec: Spectral | None = None,
) -> F64:
    """Federated gradient descent without privacy noise or clipping.

    Parameters
    ----------
    data : RegressionData
        ``R`` replications of the clients' statistics.
    lr : ndarray, shape (T,)
        Learning rates ``alpha_1 .. alpha_T``
        (:func:`~fedprivacy.regression.schedule.learning_rates`).
    theta0 : ndarray, shape (p,), optional
        Start (zeros).
    spec : Spectral, optional
        Precomputed eigen-decomposition.

    Returns
    -------
    ndarray, shape (R, p)
        ``theta_T``.
    """
    return noisy_gradient_descent(data, lr, theta0=theta0, spec=spec).final


@dataclass(frozen=True)
class NAFGDResult:
    """NA-FGD and ANA-FGD estimates from one run of noisy federated gradient descent.

    Attributes
    ----------
    final : ndarray, shape (R, p)
        NA-FGD, the last iterate.
    average : ndarray, shape (R, p)
        ANA-FGD, the average of the iterates ``theta_1 .. theta_T``.
    noise : ClientNoise
        The clients' noise and the accountant's epsilon for it.
    run : GDRun
        Clipping statistics.
    """

    final: F64
    average: F64
    noise: ClientNoise
    run: GDRun

    @property
    def epsilon(self) -> float:
        """The accountant's epsilon (at the target delta) for the noise actually used."""
        return self.noise.epsilon_accountant


def na_fgd(
    data: RegressionData,
    lr: F64,
    *,
    epsilon: float,
    delta: float = 1e-5,
    mechanism: str = "gaussian",
    calibration: str = "paper",
    clip: float = 1.0,
    neighbouring: str = "add-remove",
    seed: int = 0,
    reps: NDArray[np.int64] | None = None,
    theta0: F64 | None = None,
    spec: Spectral | None = None,
    noise_scale: ClientNoise | None = None,
) -> NAFGDResult:
    """Noise-added federated gradient descent (and its average, ANA-FGD).

    Iteration ``t``: client ``k`` sends ``clip(g_k(theta_t)) + xi_{k,t}``, the server updates
    ``theta_{t+1} = theta_t - alpha_t sum_k pi_k (clip(g_k(theta_t)) + xi_{k,t})``. The noise is
    calibrated for ``T = len(lr)`` releases per client.

    Parameters
    ----------
    data : RegressionData
        ``R`` replications of the clients' statistics.
    lr : ndarray, shape (T,)
        Learning rates.
    epsilon, delta : float
        Privacy budget.
    mechanism : {"gaussian", "laplace"}
        Gaussian noise with L2 clipping, or Laplace noise with L1 clipping.
    calibration : {"paper", "accountant"}
        See :func:`~fedprivacy.regression.privacy.calibrate_client_noise`.
    clip : float
        ``C``.
    neighbouring : {"add-remove", "replace"}
        Neighbouring relation of the reported epsilon.
    seed : int
        Base seed of the noise.
    reps : ndarray of int, optional
        Global replication indices (``arange(R)``): replication ``b``'s noise depends on ``b``
        only.
    theta0 : ndarray, shape (p,), optional
        Start (zeros).
    spec : Spectral, optional
        Precomputed eigen-decomposition.
    noise_scale : ClientNoise, optional
        Precomputed calibration (must match ``T`` and the sizes).

    Returns
    -------
    NAFGDResult
        NA-FGD (``final``), ANA-FGD (``average``), the noise and the clipping statistics.
    """
    lrs = np.asarray(lr, dtype=np.float64)
    steps = int(lrs.size)
    cal = noise_scale or calibrate_client_noise(
        epsilon,
        delta,
        steps,
        data.sizes,
        mechanism=mechanism,
        calibration=calibration,
        clip=clip,
        neighbouring=neighbouring,
    )
    ids = np.arange(data.replications) if reps is None else np.asarray(reps, dtype=np.int64)
    xi = aggregated_noise(
        ids, steps, data.dimension, cal, data.weights, seed=seed, stream=STREAM_NA_FGD
    )
    run = noisy_gradient_descent(
        data,
        lrs,
        noise=xi,
        clip=cal.clip,
        norm=1 if cal.mechanism == "laplace" else 2,
        theta0=theta0,
        spec=spec,
    )
    return NAFGDResult(run.final, run.average, cal, run)


def ana_fgd(
    data: RegressionData,
    lr: F64,
    *,
    epsilon: float,
    delta: float = 1e-5,
    mechanism: str = "gaussian",
    calibration: str = "paper",
    clip: float = 1.0,
    seed: int = 0,
    reps: NDArray[np.int64] | None = None,
) -> F64:
    """ANA-FGD alone: the averaged iterates of :func:`na_fgd` (same arguments), ``(R, p)``."""
    return na_fgd(
        data,
        lr,
        epsilon=epsilon,
        delta=delta,
        mechanism=mechanism,
        calibration=calibration,
        clip=clip,
        seed=seed,
        reps=reps,
    ).average
