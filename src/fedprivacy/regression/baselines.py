"""Baselines: record-level DP-SGD (Opacus-style) and NbAFL (Wei et al. 2020), vectorised.

DP-SGD
    In every step each client Poisson-samples its records with rate ``q``, clips every
    per-sample gradient ``x_i (x_i^T theta - y_i)`` to L2 norm ``C``, sums them and adds
    ``N(0, z^2 C^2 I)``; it divides by its expected batch size ``q n_k`` (Opacus' mean
    reduction under Poisson sampling) and the server averages with ``pi_k``, so the update is
    ``theta <- theta - alpha_t / (q N) (sum of clipped sampled gradients + sum of the K
    noises)``. Per record this is a Poisson-sub-sampled Gaussian mechanism with multiplier ``z``,
    composed over the steps (:func:`~fedprivacy.regression.privacy.dp_sgd_epsilon`). Defaults of
    the studies: ``q = 0.05``, 5 epochs (100 steps), NA-FGD's constant learning rate, ``C = 1``,
    noise multiplier from the accountant (as Opacus' ``make_private_with_epsilon``). Smaller
    batches over more steps (e.g. NA-FGD's ``T`` steps) are much worse: with per-sample
    gradients of norm about ``|r_i| ||x_i|| >> C`` the clipped gradients are nearly normalised,
    their pull towards the solution saturates, and the noise wins. The sampling is exact: a
    replication's Bernoulli(q) selections over all (step, record) pairs are drawn as geometric
    gaps, and the sum of the K clients' Gaussian noises is drawn as one Gaussian of variance
    ``K z^2 C^2``.

NbAFL
    In each of ``T`` rounds every client starts from the global parameters, runs ``tau`` local
    full-batch gradient steps, clips its parameters to norm ``W`` (``w / max(1, ||w|| / W)``),
    adds the uplink noise, and the server averages with ``pi_k`` (adding downlink noise when
    Wei et al.'s condition ``T > L sqrt(K)`` holds). Noise:
    :func:`~fedprivacy.regression.nbafl_calibration.nbafl_noise`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_positive, require_sampling_rate
from fedprivacy.errors import ParameterError
from fedprivacy.regression.data import STREAM_DP_SGD, STREAM_NBAFL, RegressionData, rep_generator
from fedprivacy.regression.nbafl_calibration import NbAFLNoise, nbafl_noise
from fedprivacy.regression.privacy import dp_sgd_epsilon, dp_sgd_noise_multiplier

__all__ = [
    "DPSGDResult",
    "NbAFLResult",
    "bernoulli_positions",
    "dp_sgd",
    "dp_sgd_budgets",
    "nbafl",
    "nbafl_budgets",
]

F64 = NDArray[np.float64]


def bernoulli_positions(gen: np.random.Generator, rate: float, length: int) -> NDArray[np.int64]:
    """Sorted indices selected by independent Bernoulli(``rate``) trials over ``range(length)``.

    Drawn as cumulative geometric gaps, ``O(rate * length)`` random numbers.
    """
    if length <= 0:
        return np.empty(0, dtype=np.int64)
    if rate >= 1.0:
        return np.arange(length, dtype=np.int64)
    expected = rate * length
    size = int(expected + 6.0 * math.sqrt(expected) + 16)
    pos = np.cumsum(gen.geometric(rate, size)) - 1
    while pos[-1] < length:
        more = np.cumsum(gen.geometric(rate, size)) + pos[-1]
        pos = np.concatenate([pos, more])
    return np.asarray(pos[pos < length], dtype=np.int64)


@dataclass(frozen=True)
class DPSGDResult:
    """Outcome of :func:`dp_sgd`.

    Attributes
    ----------
    estimate : ndarray, shape (R, p)
        The last iterate.
    noise_multiplier : float
        ``z``.
    sampling_rate : float
        ``q``.
    steps : int
        Number of steps.
    clip : float
        Per-sample clipping norm ``C``.
    calibration : str
        ``paper`` or ``accountant``.
    epsilon_accountant : float
        RDP epsilon (Poisson-sub-sampled Gaussian over the steps) at ``delta``.
    clipped_fraction : float
        Fraction of the sampled per-sample gradients that were clipped.
    """

    estimate: F64
    noise_multiplier: float
    sampling_rate: float
    steps: int
    clip: float
    calibration: str
    epsilon_accountant: float
    clipped_fraction: float

    def to_dict(self) -> dict[str, float | int | str]:
        """JSON-ready summary: every field but the estimate."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "estimate"}


def dp_sgd(
    data: RegressionData,
    lr: F64,
    *,
    epsilon: float,
    delta: float = 1e-5,
    sampling_rate: float | None = None,
    epochs: float = 5.0,
    clip: float = 1.0,
    calibration: str = "paper",
    seed: int = 0,
    reps: NDArray[np.int64] | None = None,
    theta0: F64 | None = None,
) -> DPSGDResult:
    """Record-level federated DP-SGD (module docstring); needs the records in ``data``.

    Parameters
    ----------
    data : RegressionData
        With ``x`` and ``y``.
    lr : ndarray, shape (T,)
        Learning rate of every step (``T`` steps).
    epsilon, delta : float
        Budget per record.
    sampling_rate : float, optional
        Poisson rate ``q``; ``min(1, epochs / T)`` when omitted.
    epochs : float
        Expected passes over the data when ``sampling_rate`` is omitted.
    clip : float
        Per-sample clipping norm.
    calibration : {"paper", "accountant"}
        Noise multiplier rule (:func:`dp_sgd_noise_multiplier`).
    seed : int
        Base seed.
    reps : ndarray of int, optional
        Global replication indices.
    theta0 : ndarray, shape (p,), optional
        Start (zeros).

    Returns
    -------
    DPSGDResult
        Estimates and privacy accounting.
    """
    return dp_sgd_budgets(
        data,
        lr,
        epsilons=(epsilon,),
        delta=delta,
        sampling_rate=sampling_rate,
        epochs=epochs,
        clip=clip,
        calibration=calibration,
        seed=seed,
        reps=reps,
        theta0=theta0,
    )[0]


def _step_samples(
    ids: NDArray[np.int64], seed: int, steps: int, q: float, shape: tuple[int, int, int]
) -> tuple[
    NDArray[np.float32], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]
]:
    """Each replication's noise draws and Poisson samples, the samples gathered step by step.

    Returns the noise ``(R, steps, p)``, the counts ``(R, steps)``, each step's start in the
    gathered records, each replication's offset inside a step, and the gathered record indices
    (replication ``i``'s record ``j`` is ``i * big_n + j``); ``shape`` is ``(R, big_n, p)``.
    """
    big_r, big_n, p = shape
    noise = np.empty((big_r, steps, p), dtype=np.float32)
    recs: list[NDArray[np.int64]] = []
    counts = np.zeros((big_r, steps), dtype=np.int64)
    for i, b in enumerate(ids):
        gen = rep_generator(seed, STREAM_DP_SGD, int(b))
        noise[i] = gen.standard_normal((steps, p), dtype=np.float32)
        pos = bernoulli_positions(gen, q, steps * big_n)
        counts[i] = np.bincount(pos // big_n, minlength=steps)
        recs.append(pos)
    base = np.concatenate([[0], np.cumsum(counts.sum(axis=0))])
    offset = np.cumsum(counts, axis=0) - counts  # a replication's offset inside a step
    flat = np.empty(int(base[-1]), dtype=np.int64)
    for i, pos in enumerate(recs):
        st = pos // big_n
        start = np.cumsum(counts[i]) - counts[i]
        dest = base[st] + offset[i, st] + (np.arange(pos.size) - start[st])
        flat[dest] = i * big_n + (pos - st * big_n)
    return noise, counts, base, offset, flat


def dp_sgd_budgets(
    data: RegressionData,
    lr: F64,
    *,
    epsilons: Sequence[float],
    delta: float = 1e-5,
    sampling_rate: float | None = None,
    epochs: float = 5.0,
    clip: float = 1.0,
    calibration: str = "paper",
    seed: int = 0,
    reps: NDArray[np.int64] | None = None,
    theta0: F64 | None = None,
) -> list[DPSGDResult]:
    """:func:`dp_sgd` for several budgets at once (same samples, rescaled noise draws).

    Each budget's result equals a separate :func:`dp_sgd` call with the same seed; the runs
    share the per-step gathers of the sampled records.
    """
    if data.x is None or data.y is None:
        raise ParameterError("data", "DP-SGD needs the records (simulate with records=True)")
    lrs = np.asarray(lr, dtype=np.float64)
    steps = int(lrs.size)
    c = require_positive("clip", clip)
    if sampling_rate is None:
        q = min(1.0, require_positive("epochs", epochs) / steps)
    else:
        q = require_sampling_rate("sampling_rate", sampling_rate)
    zs = [dp_sgd_noise_multiplier(e, delta, steps, q, calibration) for e in epsilons]
    m_runs = len(zs)
    big_r, big_n, p, k = data.replications, data.total, data.dimension, data.clients
    ids = np.arange(big_r) if reps is None else np.asarray(reps, dtype=np.int64)
    x2 = data.x.reshape(big_r * big_n, p)
    y1 = data.y.reshape(-1)
    xn = np.sqrt(np.einsum("ij,ij->i", x2, x2))
    noise_sd = np.array([z * c * math.sqrt(k) for z in zs])
    theta = np.zeros((big_r, m_runs, p))
    if theta0 is not None:
        theta += np.asarray(theta0, dtype=np.float64)
    noise, counts, base, offset, flat = _step_samples(ids, seed, steps, q, (big_r, big_n, p))
    rows_all = flat // big_n
    cc = np.float32(c)
    clipped = np.zeros(m_runs, dtype=np.int64)
    sampled = 0
    for t in range(steps):
        s0, s1 = int(base[t]), int(base[t + 1])
        total = np.zeros((big_r, m_runs, p))
        if s1 > s0:
            cnt = counts[:, t]
            width = int(cnt.max())
            rows = rows_all[s0:s1]
            slot = np.arange(s1 - s0) - offset[rows, t]
            idx = np.zeros((big_r, width), dtype=np.int64)
            mask = np.zeros((big_r, width), dtype=np.float32)
            idx[rows, slot] = flat[s0:s1]
            mask[rows, slot] = 1.0
            xs = x2[idx]  # (R, width, p), padded with record 0 (masked out)
            resid = xs @ np.swapaxes(theta.astype(np.float32), 1, 2) - y1[idx][..., None]
            gnorm = np.abs(resid) * xn[idx][..., None]
            over = gnorm > cc
            clipped += np.count_nonzero(over & (mask[..., None] > 0), axis=(0, 1))
            sampled += s1 - s0
            wts = np.where(over, cc / np.maximum(gnorm, np.float32(1e-30)), np.float32(1.0))
            wts *= resid * mask[..., None]
            total += np.swapaxes(np.swapaxes(xs, 1, 2) @ wts, 1, 2)
        total += noise[:, t, None, :] * noise_sd[None, :, None]
        theta -= (lrs[t] / (q * big_n)) * total
    out = []
    for m, z in enumerate(zs):
        frac = float(clipped[m] / sampled) if sampled else 0.0
        eps = dp_sgd_epsilon(z, steps, delta, q)
        out.append(
            DPSGDResult(theta[:, m], float(z), float(q), steps, c, calibration, float(eps), frac)
        )
    return out


@dataclass(frozen=True)
class NbAFLResult:
    """Outcome of :func:`nbafl`.

    Attributes
    ----------
    estimate : ndarray, shape (R, p)
        The global parameters after the last round.
    noise : NbAFLNoise
        Uplink/downlink noise and the accountant's epsilon.
    local_steps : int
        ``tau``.
    clipped_fraction : float
        Fraction of the uploads whose parameters were clipped.
    """

    estimate: F64
    noise: NbAFLNoise
    local_steps: int
    clipped_fraction: float

    def to_dict(self) -> dict[str, object]:
        """JSON-ready summary."""
        return {
            **self.noise.to_dict(),
            "local_steps": self.local_steps,
            "clipped_fraction": self.clipped_fraction,
        }


def nbafl(
    data: RegressionData,
    *,
    epsilon: float,
    delta: float = 1e-5,
    rounds: int = 3,
    local_steps: int = 10,
    lr: float = 0.5,
    clip: float = 1.0,
    exposures: int | None = None,
    calibration: str = "paper",
    seed: int = 0,
    reps: NDArray[np.int64] | None = None,
    theta0: F64 | None = None,
) -> NbAFLResult:
    """Noising before aggregation FL (Wei et al. 2020) for linear regression (module docstring).

    Parameters
    ----------
    data : RegressionData
        ``R`` replications of the clients' statistics.
    epsilon, delta : float
        Budget.
    rounds : int
        Aggregation rounds ``T``.
    local_steps : int
        Local full-batch gradient steps per round ``tau``.
    lr : float
        Local learning rate.
    clip : float
        Parameter clipping norm ``W``.
    exposures : int, optional
        ``L`` (``T`` when omitted).
    calibration : {"paper", "accountant"}
        See :func:`~fedprivacy.regression.nbafl_calibration.nbafl_noise`.
    seed : int
        Base seed.
    reps : ndarray of int, optional
        Global replication indices.
    theta0 : ndarray, shape (p,), optional
        Start (zeros).

    Returns
    -------
    NbAFLResult
        Estimates and the noise.
    """
    return nbafl_budgets(
        data,
        epsilons=(epsilon,),
        delta=delta,
        rounds=rounds,
        local_steps=local_steps,
        lr=lr,
        clip=clip,
        exposures=exposures,
        calibration=calibration,
        seed=seed,
        reps=reps,
        theta0=theta0,
    )[0]


def nbafl_budgets(
    data: RegressionData,
    *,
    epsilons: Sequence[float],
    delta: float = 1e-5,
    rounds: int = 3,
    local_steps: int = 10,
    lr: float = 0.5,
    clip: float = 1.0,
    exposures: int | None = None,
    calibration: str = "paper",
    seed: int = 0,
    reps: NDArray[np.int64] | None = None,
    theta0: F64 | None = None,
) -> list[NbAFLResult]:
    """:func:`nbafl` for several budgets at once (same noise draws, rescaled).

    Each budget's result equals a separate :func:`nbafl` call with the same seed; the local
    training of all budgets shares the reads of the Gram matrices.
    """
    big_t = require_int("rounds", rounds, minimum=1)
    tau = require_int("local_steps", local_steps, minimum=1)
    a = np.float32(require_positive("lr", lr))
    noises = [
        nbafl_noise(
            e, delta, big_t, data.sizes, clip=clip, exposures=exposures, calibration=calibration
        )
        for e in epsilons
    ]
    m_runs = len(noises)
    down_on = noises[0].downlink_std > 0
    big_r, p, k = data.replications, data.dimension, data.clients
    ids = np.arange(big_r) if reps is None else np.asarray(reps, dtype=np.int64)
    up = np.empty((big_r, big_t, k, p), dtype=np.float32)
    down = np.zeros((big_r, big_t, p), dtype=np.float32)
    for i, b in enumerate(ids):
        gen = rep_generator(seed, STREAM_NBAFL, int(b))
        up[i] = gen.standard_normal((big_t, k, p), dtype=np.float32)
        if down_on:
            down[i] = gen.standard_normal((big_t, p), dtype=np.float32)
    up_sd = np.stack([nz.uplink_std for nz in noises], axis=1).astype(np.float32)  # (K, M)
    down_sd = np.array([nz.downlink_std for nz in noises])
    w_clip = np.float32(noises[0].clip)
    weights = data.weights
    mom32 = data.moment.astype(np.float32)[..., None]  # (R, K, p, 1)
    w = np.zeros((big_r, p, m_runs))
    if theta0 is not None:
        w += np.asarray(theta0, dtype=np.float64)[None, :, None]
    clipped = np.zeros(m_runs, dtype=np.int64)
    for r in range(big_t):
        local = np.repeat(w.astype(np.float32)[:, None], k, axis=1)  # (R, K, p, M)
        for _ in range(tau):
            local -= a * (data.gram32 @ local - mom32)
        norms = np.sqrt(np.einsum("rkpm,rkpm->rkm", local, local))
        clipped += np.count_nonzero(norms > w_clip, axis=(0, 1))
        local *= np.minimum(np.float32(1.0), w_clip / np.maximum(norms, np.float32(1e-30)))[
            :, :, None, :
        ]
        local += up_sd[None, :, None, :] * up[:, r, :, :, None]
        w = np.einsum("k,rkpm->rpm", weights, local.astype(np.float64))
        if down_on:
            w += down_sd[None, None, :] * down[:, r, :, None].astype(np.float64)
    return [
        NbAFLResult(w[:, :, m].copy(), noises[m], tau, float(clipped[m] / (big_r * big_t * k)))
        for m in range(m_runs)
    ]
