"""The (clipped, noisy) federated gradient-descent engine, vectorised over replications.

One iteration of NA-FGD (the paper's updating formula (2), with clipping) is
``theta_{t+1} = theta_t - alpha_t (sum_k pi_k clip(g_k(theta_t)) + xi_t)`` with the local
gradients ``g_k(theta) = S_k theta - s_k`` and the aggregated noise ``xi_t = sum_k pi_k xi_{k,t}``.
Without clipping the update is linear,
``theta_{t+1} - theta_ols = (I - alpha_t Sigma_hat)(theta_t - theta_ols) - alpha_t xi_t``, which is
diagonal in the eigenbasis of the pooled ``Sigma_hat = sum_k pi_k S_k`` and costs ``O(p)`` per
replication and iteration there.

The engine exploits this *speculatively* and stays exact: for a block of ``L`` iterations it
runs the linear recursion in the eigenbasis, maps the ``L`` states back, and computes every
client's gradient at every state with one batched matrix product (BLAS-3, float32). A replication
keeps the block up to its first iteration at which some client's gradient norm exceeds ``C``;
that iteration is done exactly (clipped gradients, the same noise draw), and the replication
continues from there in the next block. The block length adapts (halved when most replications
clip inside a block, doubled when few do), so the engine does exact clipped steps one at a time
when clipping is frequent and ``L = 64`` iterations per product when it is rare. The noise of an
iteration is a fixed function of (replication, iteration), so the result does not depend on the
blocking (up to float32 rounding in the clipping tests).

ANA-FGD's average ``T^{-1} sum_{t=1}^T theta_t`` is accumulated along the way.

Several runs on the same designs (other privacy budgets, other true parameters: other noise and
moments ``s_k``, the same ``S_k``) are advanced together by :func:`noisy_gradient_descent_runs`:
their states are stacked as extra columns of the same matrix products, so the Gram matrices are
read once for all of them (what makes exact clipped steps, which are memory bound, cheaper).
The state carried between steps and the two kinds of step (exact bursts, speculative blocks)
are in :mod:`fedprivacy.regression.engine_steps`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.regression.data import RegressionData
from fedprivacy.regression.engine_steps import (
    Outputs,
    Pace,
    StepSettings,
    WorkingSet,
    exact_burst,
    speculative_block,
)

__all__ = [
    "GDRun",
    "Spectral",
    "noisy_gradient_descent",
    "noisy_gradient_descent_runs",
    "spectral",
]

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]

_MAX_BLOCK = 64


@dataclass(frozen=True)
class Spectral:
    """Eigen-decomposition of the pooled ``Sigma_hat`` and the pooled OLS estimate.

    Attributes
    ----------
    eigenvalues : ndarray, shape (R, p)
        Ascending eigenvalues of ``Sigma_hat`` per replication.
    eigenvectors : ndarray, shape (R, p, p)
        Columns are the eigenvectors.
    ols : ndarray, shape (R, p)
        The pooled least-squares estimate (minimum-norm when ``Sigma_hat`` is singular).
    """

    eigenvalues: F64
    eigenvectors: F64
    ols: F64


def spectral(data: RegressionData, reuse: Spectral | None = None) -> Spectral:
    """Eigen-decompose every replication's ``Sigma_hat`` and solve the pooled least squares.

    ``reuse``: a decomposition of the same Gram matrices (e.g. before
    :meth:`~fedprivacy.regression.data.RegressionData.with_theta`); only OLS is recomputed.
    """
    if reuse is None:
        lam, vec = np.linalg.eigh(data.gram)
    else:
        lam, vec = reuse.eigenvalues, reuse.eigenvectors
    coords = np.einsum("rpq,rp->rq", vec, data.moment_pooled)
    tol = 1e-10 * np.maximum(lam[:, -1:], 1e-300)
    inv = np.divide(1.0, lam, out=np.zeros_like(lam), where=lam > tol)
    ols = np.einsum("rpq,rq->rp", vec, coords * inv)
    return Spectral(np.asarray(lam), np.asarray(vec), np.asarray(ols))


@dataclass(frozen=True)
class GDRun:
    """Outcome of :func:`noisy_gradient_descent`.

    Attributes
    ----------
    final : ndarray, shape (R, p)
        ``theta_T`` (NA-FGD; FGD when noise-free and unclipped).
    average : ndarray, shape (R, p)
        ``T^{-1} sum_{t=1}^T theta_t`` (ANA-FGD).
    clipped_steps : ndarray of int64, shape (R,)
        Iterations in which at least one client clipped.
    clip_events : ndarray of int64, shape (R,)
        Clipped (client, iteration) pairs.
    steps : int
        ``T``.
    """

    final: F64
    average: F64
    clipped_steps: NDArray[np.int64]
    clip_events: NDArray[np.int64]
    steps: int

    def clip_fraction(self, clients: int) -> F64:
        """Fraction of (client, iteration) pairs that were clipped, per replication."""
        return np.asarray(self.clip_events / (clients * self.steps), dtype=np.float64)


def noisy_gradient_descent(
    data: RegressionData,
    lr: F64,
    *,
    noise: F32 | F64 | None = None,
    clip: float | None = None,
    norm: int = 2,
    theta0: F64 | None = None,
    spec: Spectral | None = None,
    max_block: int = _MAX_BLOCK,
) -> GDRun:
    """Run federated gradient descent for every replication at once (module docstring).

    Parameters
    ----------
    data : RegressionData
        The clients' statistics, ``R`` replications.
    lr : ndarray, shape (T,)
        ``alpha_1 .. alpha_T``.
    noise : ndarray, shape (R, T, p), optional
        The aggregated noise ``xi_t = sum_k pi_k xi_{k,t}`` of every replication and iteration
        (``None``: no noise).
    clip : float, optional
        Clipping norm ``C`` of the local gradients (``None``: no clipping, plain FGD).
    norm : {2, 1}
        Norm used for clipping (1 for the Laplace variant).
    theta0 : ndarray, shape (p,), optional
        Starting point (zeros by default).
    spec : Spectral, optional
        Precomputed :func:`spectral` of ``data``.
    max_block : int
        Largest speculative block (iterations per batched product).

    Returns
    -------
    GDRun
        Final iterates, averaged iterates and clipping statistics.
    """
    sp = spectral(data) if spec is None else spec
    return noisy_gradient_descent_runs(
        data,
        lr,
        [data.moment],
        [sp.ols],
        [noise],
        clip=clip,
        norm=norm,
        theta0=theta0,
        spec=sp,
        max_block=max_block,
    )[0]


def noisy_gradient_descent_runs(
    data: RegressionData,
    lr: F64,
    moments: Sequence[F64],
    ols: Sequence[F64],
    noises: Sequence[F32 | F64 | None],
    *,
    clip: float | None = None,
    norm: int = 2,
    theta0: F64 | None = None,
    spec: Spectral | None = None,
    max_block: int = _MAX_BLOCK,
) -> list[GDRun]:
    """Advance ``M`` runs that share the designs of ``data`` together (module docstring).

    Parameters
    ----------
    data : RegressionData
        Supplies the Gram matrices ``S_k`` (and, through ``spec``, the eigenvectors).
    lr : ndarray, shape (T,)
        Learning rates (the same for every run).
    moments : sequence of M arrays, shape (R, K, p)
        Each run's ``s_k``.
    ols : sequence of M arrays, shape (R, p)
        Each run's pooled least-squares solution.
    noises : sequence of M arrays of shape (R, T, p), or None
        Each run's aggregated noise (all ``None`` or none ``None``).
    clip, norm, theta0, spec, max_block
        As in :func:`noisy_gradient_descent`; ``max_block`` is divided by ``M`` (memory).

    Returns
    -------
    list of GDRun
        One per run.
    """
    lrs = _checked_rates(lr)
    _check_runs(moments, ols, noises, norm=norm, clip=clip)
    big_r, p = data.replications, data.dimension
    total_steps = lrs.size
    for nz in noises:
        if nz is not None and nz.shape != (big_r, total_steps, p):
            raise ParameterError(
                "noise", f"must have shape {(big_r, total_steps, p)}, got {nz.shape}"
            )
    sp = spectral(data) if spec is None else spec
    start = np.zeros(p) if theta0 is None else np.asarray(theta0, dtype=np.float64)
    ws = _working_set(data, sp, moments, ols, noises, start)
    settings = StepSettings(
        lrs=lrs,
        weights=data.weights,
        weights32=data.weights.astype(np.float32),
        clip=clip,
        norm=norm,
        total_steps=total_steps,
    )
    m_runs = len(moments)
    cap = max(1, max_block // m_runs) if clip is not None else max_block
    pace = Pace(block=1 if clip is not None else cap, cap=cap)
    out = Outputs.empty(big_r, m_runs, p)
    while ws.ids.size:
        if pace.block == 1 and clip is not None:
            exact_burst(ws, settings, pace)
        else:
            speculative_block(ws, settings, pace)
        done = np.all(ws.t >= total_steps, axis=1)
        if np.any(done):
            out.store(ws, done)
            if done.sum() * 2 >= ws.ids.size:
                ws.keep(~done)
    return _collect_runs(out, ols, sp, total_steps)


def _checked_rates(lr: F64) -> F64:
    """``lr`` as a float64 vector, refused unless non-empty, finite and positive."""
    lrs = np.asarray(lr, dtype=np.float64)
    if lrs.ndim != 1 or lrs.size == 0 or not np.all(np.isfinite(lrs)) or np.any(lrs <= 0):
        raise ParameterError("lr", "must be a non-empty vector of positive learning rates")
    return lrs


def _check_runs(
    moments: Sequence[F64],
    ols: Sequence[F64],
    noises: Sequence[F32 | F64 | None],
    *,
    norm: int,
    clip: float | None,
) -> None:
    """Refuse a bad ``norm`` or ``clip``, and runs without one entry each or mixed noise."""
    if norm not in (1, 2):
        raise ParameterError("norm", f"must be 1 or 2, got {norm!r}")
    if clip is not None and not clip > 0:
        raise ParameterError("clip", f"must be > 0, got {clip!r}")
    m_runs = len(moments)
    if not (m_runs >= 1 and len(ols) == m_runs and len(noises) == m_runs):
        raise ParameterError("moments", "need one moment, OLS and noise entry per run")
    has_noise = noises[0] is not None
    if any((nz is not None) != has_noise for nz in noises):
        raise ParameterError("noises", "either every run has noise or none has")


def _working_set(
    data: RegressionData,
    sp: Spectral,
    moments: Sequence[F64],
    ols: Sequence[F64],
    noises: Sequence[F32 | F64 | None],
    start: F64,
) -> WorkingSet:
    """Every replication of the runs at ``start``; the runs stacked along axis 1."""
    ols_w = np.stack([np.asarray(o, dtype=np.float64) for o in ols], axis=1)  # (R, M, p)
    mom32 = np.stack([np.asarray(mo, dtype=np.float32) for mo in moments], axis=1)  # (R,M,K,p)
    noise = None
    if noises[0] is not None:
        noise = np.stack([np.asarray(n) for n in noises], axis=1)  # (R, M, T, p)
    return WorkingSet.start(
        sp.eigenvalues, sp.eigenvectors, data.gram32, ols_w, mom32, noise, start
    )


def _collect_runs(out: Outputs, ols: Sequence[F64], sp: Spectral, total_steps: int) -> list[GDRun]:
    """One :class:`GDRun` per run; ANA-FGD's average from the sums of the two kinds of step."""
    runs = []
    for m in range(len(ols)):
        base = np.asarray(ols[m], dtype=np.float64)
        # sum over t of theta_t - base: eigenbasis steps (zsum), then exact ones (thsum)
        lin = np.einsum("rpq,rq->rp", sp.eigenvectors, out.zsum[:, m])
        offsets = lin + out.thsum[:, m] - out.nexact[:, m, None] * base
        average = base + offsets / total_steps
        run = GDRun(out.final[:, m], average, out.csteps[:, m], out.cevents[:, m], total_steps)
        runs.append(run)
    return runs
