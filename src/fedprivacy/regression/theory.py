"""Conditional covariances of NA-FGD and ANA-FGD given the data (Theorems 2 and 3).

Without clipping, ``theta_t - E(theta_t | D) = -alpha sum_{s<=t} Delta^{t-s} xi_s`` with
``Delta = I - alpha Sigma_hat`` and i.i.d. aggregated noise ``xi_s`` of covariance
``sigma^2 I`` (``sigma^2 = sum_k pi_k^2 sigma_k^2``). In the eigenbasis of ``Sigma_hat``
(eigenvalue ``lambda``, ``mu = 1 - alpha lambda``) every covariance below is diagonal:

Theorem 2 (NA-FGD, ``theta_T``)
    exact: ``alpha^2 sigma^2 (1 - mu^{2T}) / (1 - mu^2)``;
    paper (Appendix A.2, the stationary bound ``cov(E_T^inf)``):
    ``alpha^2 sigma^2 (I - Delta^2)^{-1} = alpha sigma^2 Sigma^{-1} (2I - alpha Sigma)^{-1}``,
    which with the paper's sigma_k is
    ``alpha c_MA^2 C^2 K T log(1/delta) / (epsilon^2 N^2) Sigma^{-1} (2I - alpha Sigma)^{-1}``.

Theorem 3 (ANA-FGD, ``T^{-1} sum_{t=1}^T theta_t``)
    exact: ``sum_t E_t = alpha sum_s (I - Delta^{T-s+1})(I - Delta)^{-1} xi_s``, so the
    covariance is ``sigma^2 / (T^2 lambda^2) sum_{j=1}^T (1 - mu^j)^2`` (about
    ``sigma^2 / (T lambda^2)`` for large ``alpha T lambda``);
    paper (Appendix A.3, final display): ``2 alpha sigma^2 / T Sigma^{-1} (2I - alpha Sigma)^{-1}``,
    i.e. ``2 alpha c_MA^2 C^2 K log(1/delta) / (epsilon^2 N^2) Sigma^{-1} (2I - alpha Sigma)^{-1}``.

The paper's ANA-FGD expression is **not** an upper bound: its step
``cov(theta_t, theta_s | D) = alpha^2 sigma^2 Delta^{|t-s|}`` drops the factor
``(I - Delta^2)^{-1}`` of the stationary covariance, so ``Q_2`` is under-estimated. For large
``alpha T lambda`` the exact covariance is ``(2 - alpha lambda) / (2 alpha lambda)`` times the
paper's along each eigen direction -- larger wherever ``alpha lambda < 2/3``: 1.5 for
``alpha lambda = 0.5`` (the simulations' rate with ``lambda ~ 1``), 3.5 for
``alpha lambda = 0.25`` and about 100 for Appendix C.2's ``alpha = 0.01``. The conclusion
survives: the trace is about
``sigma^2 / T tr(Sigma^{-2}) = O(p / N * log(1/delta) / (epsilon^2 n))`` (``alpha`` cancels),
negligible next to OLS's ``O(p / N)`` when ``n`` grows -- but the condition is ``n -> infinity``
rather than ``alpha / n -> 0``. :func:`theory_check` compares both with the empirical
covariance over replications that share one data set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_positive
from fedprivacy.errors import ParameterError
from fedprivacy.regression.data import RegressionData, simulate_data, true_parameter
from fedprivacy.regression.engine import Spectral, spectral
from fedprivacy.regression.estimators import na_fgd
from fedprivacy.regression.privacy import calibrate_client_noise
from fedprivacy.regression.schedule import iteration_count, learning_rates

__all__ = [
    "ConditionalCovariance",
    "TheoryCheck",
    "conditional_covariance",
    "theory_check",
]

F64 = NDArray[np.float64]


@dataclass(frozen=True)
class ConditionalCovariance:
    """Closed-form conditional covariances, as variances along the eigenvectors of Sigma_hat.

    Attributes
    ----------
    eigenvalues : ndarray, shape (p,)
        ``lambda`` (ascending).
    eigenvectors : ndarray, shape (p, p)
        Columns ``v_i``.
    na_exact, na_paper, ana_exact, ana_paper : ndarray, shape (p,)
        Variance of ``v_i^T theta_hat`` for each formula (module docstring).
    """

    eigenvalues: F64
    eigenvectors: F64
    na_exact: F64
    na_paper: F64
    ana_exact: F64
    ana_paper: F64

    def matrix(self, name: str) -> F64:
        """The covariance matrix ``V diag(variances) V^T`` of one formula."""
        var = getattr(self, name)
        return np.asarray((self.eigenvectors * var) @ self.eigenvectors.T, dtype=np.float64)


def conditional_covariance(
    eigenvalues: F64, eigenvectors: F64, lr: float, steps: int, noise_var: float
) -> ConditionalCovariance:
    """Closed forms of Theorems 2 and 3 (module docstring) for a constant learning rate.

    Parameters
    ----------
    eigenvalues : ndarray, shape (p,)
        Eigenvalues of ``Sigma_hat``.
    eigenvectors : ndarray, shape (p, p)
        Its eigenvectors (columns).
    lr : float
        ``alpha``.
    steps : int
        ``T``.
    noise_var : float
        ``sigma^2``, the per-coordinate variance of the aggregated noise.

    Returns
    -------
    ConditionalCovariance
        Exact and paper variances per eigen direction.
    """
    lam = np.asarray(eigenvalues, dtype=np.float64)
    a = require_positive("lr", lr)
    t = require_int("steps", steps, minimum=1)
    s2 = require_positive("noise_var", noise_var)
    mu = 1.0 - a * lam
    if np.any(np.abs(mu) >= 1.0):
        raise ParameterError("lr", "the closed forms need 0 < alpha lambda < 2 for every lambda")
    na_exact = a**2 * s2 * (1.0 - mu ** (2 * t)) / (1.0 - mu**2)
    na_paper = a * s2 / (lam * (2.0 - a * lam))
    total = (
        t - 2.0 * mu * (1.0 - mu**t) / (1.0 - mu) + mu**2 * (1.0 - mu ** (2 * t)) / (1.0 - mu**2)
    )
    ana_exact = s2 * total / (t**2 * lam**2)
    ana_paper = 2.0 * a * s2 / (t * lam * (2.0 - a * lam))
    return ConditionalCovariance(
        lam, np.asarray(eigenvectors, dtype=np.float64), na_exact, na_paper, ana_exact, ana_paper
    )


@dataclass(frozen=True)
class TheoryCheck:
    """Empirical conditional covariance over replications against the closed forms.

    Attributes
    ----------
    settings : dict
        The setting.
    closed : ConditionalCovariance
        The closed forms.
    na_empirical, ana_empirical : ndarray, shape (p,)
        Empirical variances along the eigenvectors.
    na_cov, ana_cov : ndarray, shape (p, p)
        Empirical covariance matrices.
    clip_fraction : float
        Clipped client-iterations (0 means the closed forms apply exactly).
    replications : int
        ``B``.
    """

    settings: dict[str, Any]
    closed: ConditionalCovariance
    na_empirical: F64
    ana_empirical: F64
    na_cov: F64
    ana_cov: F64
    clip_fraction: float
    replications: int
    notes: tuple[str, ...] = field(default=())

    def summary(self) -> dict[str, Any]:
        """Traces, their Monte-Carlo standard errors and relative Frobenius errors."""
        out: dict[str, Any] = {
            "settings": self.settings,
            "replications": self.replications,
            "clip_fraction": self.clip_fraction,
        }
        b = self.replications
        for name, emp in (("na_fgd", self.na_cov), ("ana_fgd", self.ana_cov)):
            prefix = "na" if name == "na_fgd" else "ana"
            exact = self.closed.matrix(f"{prefix}_exact")
            paper = self.closed.matrix(f"{prefix}_paper")
            te, tx, tp = float(np.trace(emp)), float(np.trace(exact)), float(np.trace(paper))
            se = math.sqrt(2.0 * float(np.sum(exact * exact)) / (b - 1))
            out[name] = {
                "trace_empirical": te,
                "trace_exact": tx,
                "trace_paper": tp,
                "trace_se": se,
                "z_exact": (te - tx) / se,
                "ratio_empirical_to_paper": te / tp,
                "ratio_exact_to_paper": tx / tp,
                "frobenius_rel_error_exact": float(
                    np.linalg.norm(emp - exact) / np.linalg.norm(exact)
                ),
                "frobenius_rel_error_paper": float(
                    np.linalg.norm(emp - paper) / np.linalg.norm(paper)
                ),
            }
        out["notes"] = list(self.notes)
        return out


def _tile(data: RegressionData, reps: int) -> RegressionData:
    def rep(a: NDArray[Any]) -> NDArray[Any]:
        return np.ascontiguousarray(np.broadcast_to(a[:1], (reps, *a.shape[1:])))

    return RegressionData(
        gram32=rep(data.gram32),
        moment=rep(data.moment),
        sizes=data.sizes,
        gram=rep(data.gram),
        moment_pooled=rep(data.moment_pooled),
        theta=data.theta,
    )


def theory_check(
    *,
    clients: int = 5,
    n: int = 200,
    p: int = 20,
    epsilon: float = 0.8,
    delta: float = 1e-5,
    lr: float = 0.5,
    c: float = 0.25,
    steps: int | None = None,
    replications: int = 2000,
    seed: int = 0,
    noise_sd: float = 0.5,
    truth: str = "sparse",
    theta_norm: float = 1.0,
    clip: float = 1.0,
    chunk: int = 250,
) -> TheoryCheck:
    """Draw one data set, run NA-FGD ``replications`` times on it, compare covariances.

    The replications differ only in the privacy noise (the conditional covariance given ``D``);
    the noise is the paper's (``paper`` calibration, Gaussian), the learning rate constant.

    Parameters
    ----------
    clients, n, p : int
        ``K``, local size and dimension.
    epsilon, delta : float
        Budget of the paper's noise formula.
    lr, c : float
        ``alpha`` and the constant of ``T = c N^(3/4) / alpha``.
    steps : int, optional
        ``T`` overriding the formula.
    replications : int
        ``B`` (>= 3).
    seed : int
        Seed (data from replication 0's stream).
    noise_sd, truth, theta_norm : see :func:`~fedprivacy.regression.data.simulate_data`.
    clip : float
        ``C``.
    chunk : int
        Replications per batch.

    Returns
    -------
    TheoryCheck
        Empirical and closed-form covariances.
    """
    b = require_int("replications", replications, minimum=3)
    theta = true_parameter(p, truth, theta_norm)
    sizes = np.full(require_int("clients", clients, minimum=1), require_int("n", n, minimum=1))
    base = simulate_data([0], sizes, theta, noise_sd=noise_sd, seed=seed)
    total = int(sizes.sum())
    t = steps or iteration_count(total, lr, c)
    rates = learning_rates(t, lr)
    cal = calibrate_client_noise(epsilon, delta, t, sizes, clip=clip)
    sp1 = spectral(base)
    finals, avgs, clipped = [], [], []
    for s0 in range(0, b, chunk):
        m = min(chunk, b - s0)
        data = _tile(base, m)
        spec = Spectral(
            np.repeat(sp1.eigenvalues, m, axis=0),
            np.repeat(sp1.eigenvectors, m, axis=0),
            np.repeat(sp1.ols, m, axis=0),
        )
        res = na_fgd(
            data,
            rates,
            epsilon=epsilon,
            delta=delta,
            seed=seed + 1,
            reps=np.arange(s0, s0 + m),
            spec=spec,
            noise_scale=cal,
        )
        finals.append(res.final)
        avgs.append(res.average)
        clipped.append(res.run.clip_fraction(int(sizes.size)))
    lam, vec = sp1.eigenvalues[0], sp1.eigenvectors[0]
    closed = conditional_covariance(lam, vec, lr, t, cal.aggregate_variance(base.weights))
    na_cov = np.cov(np.concatenate(finals), rowvar=False)
    ana_cov = np.cov(np.concatenate(avgs), rowvar=False)
    settings = {
        "clients": int(sizes.size),
        "n": int(n),
        "p": int(p),
        "epsilon": float(epsilon),
        "delta": float(delta),
        "lr": float(lr),
        "c": float(c),
        "iterations": int(t),
        "noise_var": cal.aggregate_variance(base.weights),
        "seed": int(seed),
    }
    frac = float(np.mean(np.concatenate(clipped)))
    notes = () if frac == 0 else (f"{frac:.2e} of the client-iterations were clipped",)
    return TheoryCheck(
        settings,
        closed,
        np.einsum("pi,pq,qi->i", vec, na_cov, vec),
        np.einsum("pi,pq,qi->i", vec, ana_cov, vec),
        na_cov,
        ana_cov,
        frac,
        b,
        notes,
    )
