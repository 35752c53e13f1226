"""The working state of :mod:`fedprivacy.regression.engine` and the two ways it advances it.

:func:`~fedprivacy.regression.engine.noisy_gradient_descent_runs` keeps the replications that
are still running in a :class:`WorkingSet` (one row per replication, one column per run) and
advances them, until every run has done its ``T`` iterations, by either

* :func:`exact_burst`: a burst of exact (clipped, noisy) iterations in the original
  coordinates, when clipping is frequent; or
* :func:`speculative_block`: a block of ``L`` linear iterations in the eigenbasis, checked for
  clipping with one batched product of the clients' Gram matrices and every state; each
  (replication, run) keeps the block up to its first clipped iteration and does that one
  exactly.

:class:`Pace` carries the burst and block lengths between the steps (halved or doubled after
each block from the fraction of runs that clipped), and :class:`Outputs` receives the
replications whose runs are all done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Outputs",
    "Pace",
    "StepSettings",
    "WorkingSet",
    "exact_burst",
    "speculative_block",
]

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]
I64 = NDArray[np.int64]
Bools = NDArray[np.bool_]

#: Largest burst of exact iterations (the burst doubles after each one, from 8).
_MAX_BURST = 1024
_FIRST_BURST = 8


@dataclass(frozen=True)
class StepSettings:
    """What every iteration of the runs shares.

    Attributes
    ----------
    lrs : ndarray, shape (T,)
        Learning rates.
    weights : ndarray, shape (K,)
        The clients' weights ``pi_k`` (``weights32``: the same in float32).
    clip : float or None
        Clipping norm ``C`` (``None``: no clipping).
    norm : {2, 1}
        Norm of the clipping.
    total_steps : int
        ``T``.
    """

    lrs: F64
    weights: F64
    weights32: F32
    clip: float | None
    norm: int
    total_steps: int


@dataclass
class WorkingSet:
    """The replications still being advanced, with the state of each of their ``M`` runs.

    Attributes
    ----------
    ids : ndarray of int64, shape (W,)
        Their rows in the outputs.
    lam, vec : ndarray, shapes (W, p) and (W, p, p)
        Eigenvalues and eigenvectors of their ``Sigma_hat``.
    gram32 : ndarray of float32, shape (W, K, p, p)
        The clients' ``S_k``.
    ols : ndarray, shape (W, M, p)
        Each run's pooled least-squares solution.
    mom32 : ndarray of float32, shape (W, M, K, p)
        Each run's ``s_k``.
    noise : ndarray, shape (W, M, T, p), or None
        Each run's aggregated noise.
    z : ndarray, shape (W, M, p)
        The current ``theta_t - theta_ols`` in the eigenbasis.
    zsum : ndarray, shape (W, M, p)
        Sum of ``z`` over the iterations done in the eigenbasis (blocks and their clipped steps).
    thsum : ndarray, shape (W, M, p)
        Sum of ``theta`` over the exact iterations of bursts.
    nexact : ndarray, shape (W, M)
        Number of those exact iterations.
    t : ndarray of int64, shape (W, M)
        Iterations done.
    csteps, cevents : ndarray of int64, shape (W, M)
        Clipped iterations and clipped (client, iteration) pairs.
    """

    ids: I64
    lam: F64
    vec: F64
    gram32: F32
    ols: F64
    mom32: F32
    noise: NDArray[Any] | None
    z: F64
    zsum: F64
    thsum: F64
    nexact: F64
    t: I64
    csteps: I64
    cevents: I64

    @classmethod
    def start(
        cls,
        lam: F64,
        vec: F64,
        gram32: F32,
        ols: F64,
        mom32: F32,
        noise: NDArray[Any] | None,
        theta0: F64,
    ) -> WorkingSet:
        """Every replication at ``theta0``, nothing done (arrays as in the attributes)."""
        big_r, m_runs, p = ols.shape
        z = np.einsum("rpq,rmp->rmq", vec, theta0[None, None, :] - ols)
        return cls(
            ids=np.arange(big_r),
            lam=lam,
            vec=vec,
            gram32=gram32,
            ols=ols,
            mom32=mom32,
            noise=noise,
            z=z,
            zsum=np.zeros((big_r, m_runs, p)),
            thsum=np.zeros((big_r, m_runs, p)),
            nexact=np.zeros((big_r, m_runs)),
            t=np.zeros((big_r, m_runs), dtype=np.int64),
            csteps=np.zeros((big_r, m_runs), dtype=np.int64),
            cevents=np.zeros((big_r, m_runs), dtype=np.int64),
        )

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(W, M, K, p)``."""
        w_n, m_runs, k, p = self.mom32.shape
        return w_n, m_runs, k, p

    def index(self) -> tuple[I64, I64]:
        """Broadcastable row and run indices, shapes (W, 1) and (1, M)."""
        w_n, m_runs = self.t.shape
        return np.arange(w_n)[:, None], np.arange(m_runs)[None, :]

    def keep(self, rows: Bools) -> None:
        """Drop the replications outside ``rows`` (a mask of shape (W,))."""
        self.ids, self.lam, self.vec = self.ids[rows], self.lam[rows], self.vec[rows]
        self.gram32, self.ols, self.mom32 = self.gram32[rows], self.ols[rows], self.mom32[rows]
        self.noise = None if self.noise is None else self.noise[rows]
        self.z, self.t = self.z[rows], self.t[rows]
        self.zsum, self.thsum, self.nexact = self.zsum[rows], self.thsum[rows], self.nexact[rows]
        self.csteps, self.cevents = self.csteps[rows], self.cevents[rows]


@dataclass
class Outputs:
    """The state of every replication whose runs are all done (``R`` rows)."""

    final: F64
    zsum: F64
    thsum: F64
    nexact: F64
    csteps: I64
    cevents: I64

    @classmethod
    def empty(cls, big_r: int, m_runs: int, p: int) -> Outputs:
        """Room for ``R`` replications of ``M`` runs in dimension ``p``."""
        return cls(
            final=np.empty((big_r, m_runs, p)),
            zsum=np.empty((big_r, m_runs, p)),
            thsum=np.empty((big_r, m_runs, p)),
            nexact=np.empty((big_r, m_runs)),
            csteps=np.empty((big_r, m_runs), dtype=np.int64),
            cevents=np.empty((big_r, m_runs), dtype=np.int64),
        )

    def store(self, ws: WorkingSet, done: Bools) -> None:
        """Copy the replications ``done`` (a mask over ``ws``) into their rows."""
        rows = ws.ids[done]
        offset = np.einsum("rpq,rmq->rmp", ws.vec[done], ws.z[done])
        self.final[rows] = ws.ols[done] + offset
        self.zsum[rows] = ws.zsum[done]
        self.thsum[rows] = ws.thsum[done]
        self.nexact[rows] = ws.nexact[done]
        self.csteps[rows] = ws.csteps[done]
        self.cevents[rows] = ws.cevents[done]


@dataclass
class Pace:
    """Lengths of the next burst of exact steps and of the next speculative block.

    ``block == 1`` (with clipping) asks for a burst of exact steps; ``cap`` bounds the block.
    """

    block: int
    cap: int
    burst: int = _FIRST_BURST

    def after_burst(self) -> None:
        """Try a short block next; the next burst (if any) is twice as long."""
        self.block = 2
        self.burst = min(2 * self.burst, _MAX_BURST)

    def after_block(self, clipped: Bools, active: Bools) -> None:
        """Halve the block when most active runs clipped in it, double it when few did."""
        frac = float(clipped.sum()) / max(1, int(active.sum()))
        if frac > 0.5:
            self.block = max(1, self.block // 2)
        elif frac < 0.1:
            self.block = min(2 * self.block, self.cap)
            self.burst = _FIRST_BURST


def _norms(grads: F32, norm: int, squares: str) -> F32:
    """Norms of the gradients over axis 3 (``squares``: the einsum summing their squares)."""
    norms: F32
    if norm == 2:
        norms = np.sqrt(np.einsum(squares, grads, grads))
    else:
        norms = np.abs(grads).sum(axis=3)
    return norms


def exact_burst(ws: WorkingSet, s: StepSettings, pace: Pace) -> None:
    """Do ``pace.burst`` exact iterations (fewer if a run finishes) in original coordinates."""
    assert s.clip is not None
    remaining = s.total_steps - ws.t
    active = remaining > 0
    n_steps = int(min(pace.burst, remaining[active].min()))
    w_n, m_runs, _, _ = ws.shape
    theta = ws.ols + np.einsum("rpq,rmq->rmp", ws.vec, ws.z)
    over_n = np.zeros((w_n, m_runs), dtype=np.int64)
    step_n = np.zeros((w_n, m_runs), dtype=np.int64)
    live = active.astype(np.float64)
    for i in range(n_steps):
        over = _exact_step(ws, s, theta, ws.t + i, active, live)
        count = over.sum(axis=2)
        over_n += count
        step_n += count > 0
    ws.nexact += n_steps * live
    ws.csteps += step_n
    ws.cevents += over_n
    ws.t = ws.t + n_steps * active
    ws.z = np.einsum("rpq,rmp->rmq", ws.vec, theta - ws.ols)
    pace.after_burst()


def _exact_step(
    ws: WorkingSet, s: StepSettings, theta: F64, step: I64, active: Bools, live: F64
) -> Bools:
    """One clipped, noisy iteration of ``theta`` (in place) at iterations ``step``, shape (W, M).

    Only the ``active`` runs move (``live``: the same as 0/1); adds ``theta`` to ``ws.thsum``
    and returns the clipped (replication, run, client) triples.
    """
    assert s.clip is not None
    w_n, m_runs, k, p = ws.shape
    wi, mi = ws.index()
    tc = np.minimum(step, s.total_steps - 1)
    cols = np.swapaxes(theta.astype(np.float32), 1, 2)  # (W, p, M)
    prod = ws.gram32.reshape(w_n, k * p, p) @ cols
    grads = np.moveaxis(prod.reshape(w_n, k, p, m_runs), 3, 1) - ws.mom32  # (W, M, K, p)
    norms = _norms(grads, s.norm, "rmkp,rmkp->rmk")
    over = (norms > s.clip) & active[:, :, None]
    factor = np.minimum(np.float32(1.0), np.float32(s.clip) / np.maximum(norms, np.float32(1e-30)))
    coef = s.weights32 * factor
    update = np.einsum("rmk,rmkp->rmp", coef, grads).astype(np.float64)
    if ws.noise is not None:
        update += ws.noise[wi, mi, tc]
    theta -= (s.lrs[tc] * live)[:, :, None] * update
    ws.thsum += theta * live[:, :, None]
    return over


@dataclass(frozen=True)
class _Block:
    """The linear iterations of a speculative block.

    ``states[:, :, i]`` is ``z`` after ``i`` of the ``L`` iterations (shape (W, M, L + 1, p));
    ``rates`` and ``noise`` (or ``None``) are each iteration's learning rate and aggregated
    noise, zero past ``T`` (``valid``: the iterations before ``T``, ``nvalid`` of them).
    """

    states: F64
    rates: F64
    noise: F64 | None
    valid: Bools
    nvalid: I64


@dataclass(frozen=True)
class _ClipScan:
    """Clipping along a speculative block.

    ``theta`` (W, M, p, L) are the block's states, ``grads`` (W, M, K, p, L) every client's
    gradient there, ``norms`` and ``over`` (W, M, K, L) their norms and whether they clip;
    ``clipped`` (W, M) says which runs clip in the block and ``first`` where they first do
    (``nvalid`` for the others).
    """

    theta: F64
    grads: F32
    norms: F32
    over: Bools
    clipped: Bools
    first: I64


def speculative_block(ws: WorkingSet, s: StepSettings, pace: Pace) -> None:
    """Advance every run through a block, up to and including its first clipped iteration."""
    remaining = s.total_steps - ws.t
    active = remaining > 0
    width = int(min(pace.block, remaining[active].max()))
    block = _linear_block(ws, s, active, width)
    scan = None if s.clip is None else _clip_scan(ws, s, block)
    if scan is None:
        clipped = np.zeros(ws.t.shape, dtype=bool)
        first = block.nvalid
    else:
        clipped, first = scan.clipped, scan.first
    _accept_linear(ws, block.states, first)
    if scan is not None and np.any(clipped):
        _clipped_step(ws, s, block, scan)
    pace.after_block(clipped, active)


def _linear_block(ws: WorkingSet, s: StepSettings, active: Bools, width: int) -> _Block:
    """Run ``width`` unclipped iterations of every active run in the eigenbasis."""
    w_n, m_runs, _, p = ws.shape
    wi, mi = ws.index()
    steps = ws.t[:, :, None] + np.arange(width)
    valid = (steps < s.total_steps) & active[:, :, None]
    steps_c = np.minimum(steps, s.total_steps - 1)
    rates = np.where(valid, s.lrs[steps_c], 0.0)  # (W, M, L)
    noise: F64 | None = None
    zeta: F64 | None = None
    if ws.noise is not None:
        noise = ws.noise[wi[:, :, None], mi[:, :, None], steps_c].astype(np.float64)
        noise *= valid[..., None]
        zeta = noise @ ws.vec[:, None]  # (W, M, L, p): the noise in the eigenbasis
    states = np.empty((w_n, m_runs, width + 1, p))
    states[:, :, 0] = ws.z
    lam_b = ws.lam[:, None, :]
    for i in range(width):
        ai = rates[:, :, i, None]
        nxt = (1.0 - ai * lam_b) * states[:, :, i]
        if zeta is not None:
            nxt -= ai * zeta[:, :, i]
        states[:, :, i + 1] = nxt
    return _Block(states, rates, noise, valid, valid.sum(axis=2))


def _clip_scan(ws: WorkingSet, s: StepSettings, block: _Block) -> _ClipScan:
    """Every client's gradient at every state of ``block``, in one batched product."""
    assert s.clip is not None
    w_n, m_runs, k, p = ws.shape
    width = block.rates.shape[2]
    coords = np.swapaxes(block.states[:, :, :width], 2, 3)
    theta = ws.ols[..., None] + ws.vec[:, None] @ coords  # (W, M, p, L)
    cols = np.moveaxis(theta.astype(np.float32), 1, 2).reshape(w_n, p, -1)
    prod = ws.gram32.reshape(w_n, k * p, p) @ cols  # (W, K p, M L)
    grads = np.moveaxis(prod.reshape(w_n, k, p, m_runs, width), 3, 1)
    grads = grads - ws.mom32[..., None]  # (W, M, K, p, L)
    norms = _norms(grads, s.norm, "rmkpl,rmkpl->rmkl")
    over = (norms > s.clip) & block.valid[:, :, None, :]
    any_over = np.any(over, axis=2)  # (W, M, L)
    clipped = np.any(any_over, axis=2)
    first = np.where(clipped, np.argmax(any_over, axis=2), block.nvalid)
    return _ClipScan(theta, grads, norms, over, clipped, first)


def _accept_linear(ws: WorkingSet, states: F64, first: I64) -> None:
    """Keep each run's linear iterations before ``first`` (its first clipped iteration)."""
    wi, mi = ws.index()
    cums = np.cumsum(states[:, :, 1:], axis=2)
    wt, mt = np.nonzero(first > 0)
    ws.zsum[wt, mt] += cums[wt, mt, first[wt, mt] - 1]
    ws.z = states[wi, mi, first].copy()
    ws.t = ws.t + first


def _clipped_step(ws: WorkingSet, s: StepSettings, block: _Block, scan: _ClipScan) -> None:
    """Do the first clipped iteration of every clipped run exactly (in float64)."""
    assert s.clip is not None
    wc, mc = np.nonzero(scan.clipped)
    jc = scan.first[wc, mc]
    theta = scan.theta[wc, mc, :, jc]
    grads = scan.grads[wc, mc, :, :, jc].astype(np.float64)
    norms = scan.norms[wc, mc, :, jc].astype(np.float64)
    factor = np.minimum(1.0, s.clip / np.maximum(norms, 1e-300))
    update = np.einsum("k,ck,ckp->cp", s.weights, factor, grads)
    if block.noise is not None:
        update += block.noise[wc, mc, jc]
    theta_new = theta - block.rates[wc, mc, jc][:, None] * update
    z_new = np.einsum("cpq,cp->cq", ws.vec[wc], theta_new - ws.ols[wc, mc])
    ws.z[wc, mc] = z_new
    ws.zsum[wc, mc] += z_new
    ws.t[wc, mc] += 1
    ws.csteps[wc, mc] += 1
    ws.cevents[wc, mc] += scan.over[wc, mc, :, jc].sum(axis=1)
