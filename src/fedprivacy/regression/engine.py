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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from fedprivacy.errors import ParameterError
from fedprivacy.regression.data import RegressionData

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
        data, lr, [data.moment], [sp.ols], [noise], clip=clip, norm=norm, theta0=theta0,
        spec=sp, max_block=max_block,
    )[0]  # fmt: skip


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
    lrs = np.asarray(lr, dtype=np.float64)
    if lrs.ndim != 1 or lrs.size == 0 or not np.all(np.isfinite(lrs)) or np.any(lrs <= 0):
        raise ParameterError("lr", "must be a non-empty vector of positive learning rates")
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
    total_steps = lrs.size
    sp = spectral(data) if spec is None else spec
    big_r, p, k = data.replications, data.dimension, data.clients
    for nz in noises:
        if nz is not None and nz.shape != (big_r, total_steps, p):
            raise ParameterError(
                "noise", f"must have shape {(big_r, total_steps, p)}, got {nz.shape}"
            )
    start = np.zeros(p) if theta0 is None else np.asarray(theta0, dtype=np.float64)
    weights = data.weights
    weights32 = weights.astype(np.float32)
    cap = max(1, max_block // m_runs) if clip is not None else max_block

    # per replication (shared by the runs) and per (replication, run) arrays
    ids = np.arange(big_r)
    lam, vec = sp.eigenvalues, sp.eigenvectors
    gram32 = data.gram32
    ols_w = np.stack([np.asarray(o, dtype=np.float64) for o in ols], axis=1)  # (R, M, p)
    mom32 = np.stack([np.asarray(mo, dtype=np.float32) for mo in moments], axis=1)  # (R,M,K,p)
    nz_w = np.stack([np.asarray(n) for n in noises], axis=1) if has_noise else None  # (R,M,T,p)
    z = np.einsum("rpq,rmp->rmq", vec, start[None, None, :] - ols_w)
    zsum = np.zeros((big_r, m_runs, p))
    thsum = np.zeros((big_r, m_runs, p))
    nexact = np.zeros((big_r, m_runs))
    t = np.zeros((big_r, m_runs), dtype=np.int64)
    csteps = np.zeros((big_r, m_runs), dtype=np.int64)
    cevents = np.zeros((big_r, m_runs), dtype=np.int64)

    final = np.empty((big_r, m_runs, p))
    zsum_out = np.empty((big_r, m_runs, p))
    thsum_out = np.empty((big_r, m_runs, p))
    nexact_out = np.empty((big_r, m_runs))
    csteps_out = np.empty((big_r, m_runs), dtype=np.int64)
    cevents_out = np.empty((big_r, m_runs), dtype=np.int64)

    block = 1 if clip is not None else cap
    burst = 8
    while ids.size:
        w_n = ids.size
        wi = np.arange(w_n)[:, None]
        mi = np.arange(m_runs)[None, :]
        rem = total_steps - t
        act = rem > 0
        if block == 1 and clip is not None:
            # clipping is frequent: exact steps in original coordinates for a burst
            n_steps = int(min(burst, rem[act].min()))
            g32 = gram32.reshape(w_n, k * p, p)
            th = ols_w + np.einsum("rpq,rmq->rmp", vec, z)
            over_n = np.zeros((w_n, m_runs), dtype=np.int64)
            step_n = np.zeros((w_n, m_runs), dtype=np.int64)
            live = act.astype(np.float64)
            for i in range(n_steps):
                tc = np.minimum(t + i, total_steps - 1)
                cols = np.swapaxes(th.astype(np.float32), 1, 2)  # (W, p, M)
                g = np.moveaxis((g32 @ cols).reshape(w_n, k, p, m_runs), 3, 1) - mom32
                if norm == 2:
                    nrm = np.sqrt(np.einsum("rmkp,rmkp->rmk", g, g))
                else:
                    nrm = np.abs(g).sum(axis=3)
                over = (nrm > clip) & act[:, :, None]
                coef = weights32 * np.minimum(
                    np.float32(1.0), np.float32(clip) / np.maximum(nrm, np.float32(1e-30))
                )
                upd = np.einsum("rmk,rmkp->rmp", coef, g).astype(np.float64)
                if nz_w is not None:
                    upd += nz_w[wi, mi, tc]
                th -= (lrs[tc] * live)[:, :, None] * upd
                thsum += th * live[:, :, None]
                cnt = over.sum(axis=2)
                over_n += cnt
                step_n += cnt > 0
            nexact += n_steps * live
            csteps += step_n
            cevents += over_n
            t = t + n_steps * act
            z = np.einsum("rpq,rmp->rmq", vec, th - ols_w)
            block, burst = 2, min(2 * burst, 1024)
        else:
            width = int(min(block, rem[act].max()))
            j = np.arange(width)
            steps = t[:, :, None] + j
            valid = (steps < total_steps) & act[:, :, None]
            steps_c = np.minimum(steps, total_steps - 1)
            a = np.where(valid, lrs[steps_c], 0.0)  # (W, M, L)
            if nz_w is not None:
                e = nz_w[wi[:, :, None], mi[:, :, None], steps_c].astype(np.float64)
                e *= valid[..., None]
                zeta = e @ vec[:, None]  # (W, M, L, p)
            states = np.empty((w_n, m_runs, width + 1, p))
            states[:, :, 0] = z
            lam_b = lam[:, None, :]
            for i in range(width):
                ai = a[:, :, i, None]
                nxt = (1.0 - ai * lam_b) * states[:, :, i]
                if nz_w is not None:
                    nxt -= ai * zeta[:, :, i]
                states[:, :, i + 1] = nxt
            nvalid = valid.sum(axis=2)
            has = np.zeros((w_n, m_runs), dtype=bool)
            first = nvalid
            if clip is not None:
                # theta: (W, M, p, L); gradients of every run, state and client: one product
                theta = ols_w[..., None] + vec[:, None] @ np.swapaxes(states[:, :, :width], 2, 3)
                cols = np.moveaxis(theta.astype(np.float32), 1, 2).reshape(w_n, p, -1)
                prod = gram32.reshape(w_n, k * p, p) @ cols  # (W, K p, M L)
                grads = np.moveaxis(prod.reshape(w_n, k, p, m_runs, width), 3, 1)
                grads = grads - mom32[..., None]  # (W, M, K, p, L)
                if norm == 2:
                    norms = np.sqrt(np.einsum("rmkpl,rmkpl->rmkl", grads, grads))
                else:
                    norms = np.abs(grads).sum(axis=3)
                over_b = (norms > clip) & valid[:, :, None, :]
                anyover = over_b.any(axis=2)  # (W, M, L)
                has = anyover.any(axis=2)
                first = np.where(has, np.argmax(anyover, axis=2), nvalid)
            # accept the linear steps before the first clipping
            cums = np.cumsum(states[:, :, 1:], axis=2)
            took = first > 0
            wt, mt = np.nonzero(took)
            zsum[wt, mt] += cums[wt, mt, first[wt, mt] - 1]
            z = states[wi, mi, first].copy()
            t = t + first
            if clip is not None and np.any(has):
                wc, mc = np.nonzero(has)
                jc = first[wc, mc]
                th = theta[wc, mc, :, jc]
                g64 = grads[wc, mc, :, :, jc].astype(np.float64)
                nrm64 = norms[wc, mc, :, jc].astype(np.float64)
                fac64 = np.minimum(1.0, clip / np.maximum(nrm64, 1e-300))
                upd64 = np.einsum("k,ck,ckp->cp", weights, fac64, g64)
                if nz_w is not None:
                    upd64 += e[wc, mc, jc]
                th_new = th - a[wc, mc, jc][:, None] * upd64
                z_new = np.einsum("cpq,cp->cq", vec[wc], th_new - ols_w[wc, mc])
                z[wc, mc] = z_new
                zsum[wc, mc] += z_new
                t[wc, mc] += 1
                csteps[wc, mc] += 1
                cevents[wc, mc] += over_b[wc, mc, :, jc].sum(axis=1)
            frac = float(has.sum()) / max(1, int(act.sum()))
            if frac > 0.5:
                block = max(1, block // 2)
            elif frac < 0.1:
                block = min(2 * block, cap)
                burst = 8
        done = (t >= total_steps).all(axis=1)
        if np.any(done):
            rows = ids[done]
            final[rows] = ols_w[done] + np.einsum("rpq,rmq->rmp", vec[done], z[done])
            zsum_out[rows], thsum_out[rows], nexact_out[rows] = (
                zsum[done],
                thsum[done],
                nexact[done],
            )
            csteps_out[rows], cevents_out[rows] = csteps[done], cevents[done]
            if done.sum() * 2 >= ids.size:
                keep = ~done
                ids, lam, vec, gram32 = ids[keep], lam[keep], vec[keep], gram32[keep]
                ols_w, mom32, z, t = ols_w[keep], mom32[keep], z[keep], t[keep]
                zsum, thsum, nexact = zsum[keep], thsum[keep], nexact[keep]
                csteps, cevents = csteps[keep], cevents[keep]
                nz_w = None if nz_w is None else nz_w[keep]
    runs = []
    for m in range(m_runs):
        base = np.asarray(ols[m], dtype=np.float64)
        lin = np.einsum("rpq,rq->rp", sp.eigenvectors, zsum_out[:, m])
        average = base + (lin + thsum_out[:, m] - nexact_out[:, m, None] * base) / total_steps
        runs.append(GDRun(final[:, m], average, csteps_out[:, m], cevents_out[:, m], total_steps))
    return runs
