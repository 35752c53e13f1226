"""Federated linear-regression data: per-client sufficient statistics with a replication axis.

Every estimator of this package works on the sufficient statistics of the K clients,
``S_k = X_k^T X_k / n_k`` and ``s_k = X_k^T y_k / n_k``, held for ``R`` replications at once
(leading axis ``R``). DP-SGD also needs the records themselves (per-sample clipping), so they are
kept when asked for.

Simulation (our reconstruction of Section 3.1, which is not in the supplement; every choice is a
parameter)
    Rows ``x_i ~ N(0, Sigma)`` with ``Sigma_ij = rho^|i-j|`` (``rho = 0``: identity, the default;
    with the identity the largest eigenvalue of the sample covariance stays below 2, which the
    ``alpha_0 = 1`` of Appendix B.3 needs), ``y_i = x_i^T theta + e_i``, ``e_i ~ N(0, noise_sd^2)``
    with ``noise_sd = 0.5`` (so the local gradients at the least-squares solution, of norm about
    ``noise_sd sqrt(p / n_k)``, stay below ``C = 1`` for ``n_k >= 150``: the regime of the
    paper's theory, where clipping acts only in the first iterations). ``theta`` is sparse (the
    first 4 coordinates equal) or dense (alternating signs, all coordinates of equal size), both
    of norm 1 by default (below NbAFL's parameter clipping norm ``C = 1``). With ``Sigma = I``
    the Gaussian mechanism is rotation invariant, so the two truths give statistically identical
    MSEs for everything but the Laplace (L1) variant.

    Without records, ``(S_k, s_k)`` are drawn exactly from their joint distribution through the
    Bartlett decomposition: if ``Z`` (``n x p``) has i.i.d. N(0, 1) entries then ``Z = Q R``
    with ``R`` (``min(n, p) x p``, upper trapezoidal) having independent entries
    ``R_ii ~ chi_{n-i+1}``, ``R_ij ~ N(0, 1)`` for ``j > i``, and ``Q^T e`` is
    ``N(0, noise_sd^2 I)`` independent of ``R``; so ``X^T X = A^T R^T R A`` and
    ``X^T e = A^T R^T Q^T e`` (``Sigma = A^T A``). This costs ``p^2 / 2`` random numbers per
    client instead of ``n_k p``. With records (needed by DP-SGD) ``X`` and ``y`` are drawn and the
    statistics computed from them (float32).

Randomness
    Replication ``b`` draws from its own generator (``SFC64`` seeded by
    ``SeedSequence(seed, spawn_key=(stream, b))``), so a replication's data and noise do not
    depend on how many replications run or how they are chunked, and different settings with the
    same seed share random numbers (common random numbers across settings).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int, require_number
from fedprivacy.dp._checks import require_nonnegative, require_positive
from fedprivacy.errors import ParameterError

__all__ = [
    "STREAM_DATA",
    "STREAM_DP_SGD",
    "STREAM_NA_FGD",
    "STREAM_NBAFL",
    "TRUTHS",
    "RegressionData",
    "data_from_silos",
    "heterogeneous_sizes",
    "rep_generator",
    "simulate_data",
    "true_parameter",
]

TRUTHS: Final = ("sparse", "dense")
SPARSE_NONZERO: Final = 4

#: Random streams (the first component of a replication's spawn key).
STREAM_DATA: Final = 0
STREAM_NA_FGD: Final = 1
STREAM_DP_SGD: Final = 2
STREAM_NBAFL: Final = 3
STREAM_SIZES: Final = 4

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]


def rep_generator(seed: int, stream: int, rep: int) -> np.random.Generator:
    """The generator of replication ``rep`` for a random ``stream`` (see the module docstring)."""
    ss = np.random.SeedSequence(entropy=int(seed), spawn_key=(int(stream), int(rep)))
    return np.random.Generator(np.random.SFC64(ss))


def true_parameter(p: int, truth: str = "sparse", norm: float = 1.0) -> F64:
    """The true coefficient vector of the simulation.

    Parameters
    ----------
    p : int
        Dimension (>= 1).
    truth : {"sparse", "dense"}
        ``sparse``: the first ``min(4, p)`` coordinates equal, the rest 0; ``dense``: every
        coordinate ``+-1`` (alternating signs), then scaled.
    norm : float
        Euclidean norm of the result (> 0).

    Returns
    -------
    ndarray of float64, shape (p,)
        ``theta``.

    Examples
    --------
    >>> true_parameter(6, "sparse").round(3).tolist()
    [0.5, 0.5, 0.5, 0.5, 0.0, 0.0]
    """
    d = require_int("p", p, minimum=1)
    scale = require_positive("theta_norm", norm)
    theta = np.zeros(d)
    if truth == "sparse":
        s = min(SPARSE_NONZERO, d)
        theta[:s] = 1.0
    elif truth == "dense":
        theta[:] = np.where(np.arange(d) % 2 == 0, 1.0, -1.0)
    else:
        raise ParameterError("truth", f"must be one of {', '.join(TRUTHS)}; got {truth!r}")
    return np.asarray(theta * scale / np.linalg.norm(theta), dtype=np.float64)


def heterogeneous_sizes(
    clients: int, n: int, spread: float, seed: int = 0, minimum: int = 10
) -> NDArray[np.int64]:
    """Local sample sizes ``n_k ~ N(n, (spread sqrt(n))^2)``, rounded (Appendix B.4).

    Parameters
    ----------
    clients : int
        ``K`` (>= 1).
    n : int
        Mean local size (>= 1).
    spread : float
        Standard deviation in units of ``sqrt(n)`` (Appendix B.4 uses 1, 3 and 5); 0 gives equal
        sizes ``n``.
    seed : int
        Seed; the sizes are drawn once per setting and shared by all replications.
    minimum : int
        Sizes below this are raised to it (a client needs data; 10 by default).

    Returns
    -------
    ndarray of int64, shape (K,)
        The sizes.
    """
    k = require_int("clients", clients, minimum=1)
    mean = require_int("n", n, minimum=1)
    sd = require_nonnegative("spread", spread) * math.sqrt(mean)
    lo = require_int("minimum", minimum, minimum=1)
    if sd == 0.0:
        return np.full(k, mean, dtype=np.int64)
    gen = rep_generator(seed, STREAM_SIZES, 0)
    sizes = np.rint(gen.normal(mean, sd, size=k)).astype(np.int64)
    return np.maximum(sizes, lo)


@dataclass(frozen=True)
class RegressionData:
    """Sufficient statistics (and optionally records) of K clients for R replications.

    Attributes
    ----------
    gram32 : ndarray of float32, shape (R, K, p, p)
        ``S_k = X_k^T X_k / n_k`` (float32: used for the clipping checks and local training).
    moment : ndarray of float64, shape (R, K, p)
        ``s_k = X_k^T y_k / n_k``.
    sizes : ndarray of int64, shape (K,)
        ``n_k``.
    gram : ndarray of float64, shape (R, p, p)
        Pooled ``X^T X / N = sum_k pi_k S_k``.
    moment_pooled : ndarray of float64, shape (R, p)
        Pooled ``X^T y / N``.
    x : ndarray of float32, shape (R, N, p), or None
        Records (clients stacked in order), when kept.
    y : ndarray of float32, shape (R, N), or None
        Responses, when kept.
    theta : ndarray of float64, shape (p,), or None
        The true parameter (simulations), ``None`` for real data.
    noise_moment : ndarray of float64, shape (R, K, p), or None
        Simulations: the error part ``X_k^T e_k / n_k`` of ``s_k = S_k theta + X_k^T e_k / n_k``
        (lets :meth:`with_theta` swap the true parameter on the same design and errors).
    noise_y : ndarray of float32, shape (R, N), or None
        Simulations with records: the errors ``e`` of ``y = X theta + e``.
    """

    gram32: F32
    moment: F64
    sizes: NDArray[np.int64]
    gram: F64
    moment_pooled: F64
    x: F32 | None = None
    y: F32 | None = None
    theta: F64 | None = None
    noise_moment: F64 | None = None
    noise_y: F32 | None = None

    @property
    def replications(self) -> int:
        """``R``."""
        return int(self.gram32.shape[0])

    @property
    def clients(self) -> int:
        """``K``."""
        return int(self.sizes.size)

    @property
    def dimension(self) -> int:
        """``p``."""
        return int(self.gram.shape[-1])

    @property
    def total(self) -> int:
        """``N = sum_k n_k``."""
        return int(self.sizes.sum())

    @property
    def weights(self) -> F64:
        """``pi_k = n_k / N``."""
        return np.asarray(self.sizes / self.sizes.sum(), dtype=np.float64)

    @property
    def offsets(self) -> NDArray[np.int64]:
        """Row offsets of the clients in the stacked records, length ``K + 1``."""
        return np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    def select(self, rows: NDArray[np.intp] | slice) -> RegressionData:
        """The replications ``rows`` (a view or copy of every per-replication array)."""
        return RegressionData(
            gram32=self.gram32[rows],
            moment=self.moment[rows],
            sizes=self.sizes,
            gram=self.gram[rows],
            moment_pooled=self.moment_pooled[rows],
            x=None if self.x is None else self.x[rows],
            y=None if self.y is None else self.y[rows],
            theta=self.theta,
            noise_moment=None if self.noise_moment is None else self.noise_moment[rows],
            noise_y=None if self.noise_y is None else self.noise_y[rows],
        )

    def with_theta(self, theta: ArrayLike) -> RegressionData:
        """The same designs and errors with another true parameter (simulations only).

        ``s_k = S_k theta + X_k^T e_k / n_k`` and ``y = X theta + e`` are recomputed; the Gram
        matrices and records are shared (not copied).
        """
        if self.noise_moment is None:
            raise ParameterError("data", "only simulated data can change their true parameter")
        th = np.asarray(theta, dtype=np.float64)
        if th.shape != (self.dimension,):
            raise ParameterError("theta", f"must have shape ({self.dimension},)")
        moment = (
            np.matmul(self.gram32, th.astype(np.float32)[:, None])[..., 0].astype(np.float64)
            + self.noise_moment
        )
        y = None
        if self.x is not None and self.noise_y is not None:
            y = self.x @ th.astype(np.float32) + self.noise_y
        return replace(
            self,
            moment=moment,
            moment_pooled=np.einsum("k,rkj->rj", self.weights, moment),
            y=y,
            theta=th,
        )


def _ar1_factor(p: int, rho: float) -> F64 | None:
    """Upper factor ``A`` with ``A^T A = Sigma``, ``Sigma_ij = rho^|i-j|`` (None for rho = 0)."""
    if rho == 0.0:
        return None
    idx = np.arange(p)
    sigma = rho ** np.abs(idx[:, None] - idx[None, :])
    return np.asarray(np.linalg.cholesky(sigma).T, dtype=np.float64)


def _checked_setting(
    sizes: ArrayLike, theta: ArrayLike, noise_sd: float, rho: float
) -> tuple[NDArray[np.int64], NDArray[np.float64], float, float]:
    """:func:`simulate_data`'s sizes, parameter, error sd and correlation, checked."""
    n = np.asarray(sizes)
    if n.ndim != 1 or n.size == 0 or not np.issubdtype(n.dtype, np.integer) or np.any(n < 1):
        raise ParameterError("sizes", "must be a non-empty sequence of integers >= 1")
    th = np.asarray(theta, dtype=np.float64)
    if th.ndim != 1 or th.size == 0:
        raise ParameterError("theta", "must be a non-empty vector")
    sd = require_positive("noise_sd", noise_sd)
    r = require_number("rho", rho)
    if not -1.0 < r < 1.0:
        raise ParameterError("rho", f"must lie in (-1, 1), got {r}")
    return n.astype(np.int64), th, sd, r


def simulate_data(
    reps: Sequence[int] | NDArray[np.int64],
    sizes: ArrayLike,
    theta: ArrayLike,
    *,
    noise_sd: float = 0.5,
    rho: float = 0.0,
    seed: int = 0,
    records: bool = False,
) -> RegressionData:
    """Draw the clients' data for the replications ``reps`` (see the module docstring).

    Parameters
    ----------
    reps : sequence of int
        Global replication indices (each has its own random stream).
    sizes : array_like of int
        Local sample sizes ``n_k``.
    theta : array_like, shape (p,)
        True parameter.
    noise_sd : float
        Standard deviation of the regression errors (> 0).
    rho : float
        AR(1) correlation of the covariates, in (-1, 1).
    seed : int
        Base seed.
    records : bool
        Draw and keep the records (needed by DP-SGD) instead of the Bartlett shortcut.

    Returns
    -------
    RegressionData
        With ``theta`` set.
    """
    rep_ids = np.asarray(reps, dtype=np.int64)
    n, th, sd, r = _checked_setting(sizes, theta, noise_sd, rho)
    p, k, big_r = th.size, n.size, rep_ids.size
    factor = _ar1_factor(p, r)
    gram32 = np.empty((big_r, k, p, p), dtype=np.float32)
    gram = np.empty((big_r, p, p), dtype=np.float64)
    weights = n / n.sum()
    offsets = np.concatenate([[0], np.cumsum(n)])
    total = int(offsets[-1])
    xs = np.empty((big_r, total, p), dtype=np.float32) if records else None
    m_max = int(min(n.max(), p))
    row = np.arange(m_max)
    keep_rows = (row[None, :] < np.minimum(n, p)[:, None]).astype(np.float32)  # (K, m_max)
    df = np.where(keep_rows > 0, n[:, None] - row[None, :], 1)
    diag = (np.arange(k)[:, None], row[None, :], row[None, :])
    fac32 = None if factor is None else factor.astype(np.float32)
    noise_moment = np.empty((big_r, k, p), dtype=np.float64)
    noise_y = np.empty((big_r, total), dtype=np.float32) if records else None
    for i, b in enumerate(rep_ids):
        gen = rep_generator(seed, STREAM_DATA, int(b))
        if records:
            assert xs is not None and noise_y is not None
            z = gen.standard_normal((total, p), dtype=np.float32)
            x = z if fac32 is None else z @ fac32
            e = gen.standard_normal(total, dtype=np.float32) * np.float32(sd)
            xs[i], noise_y[i] = x, e
            if np.all(n == n[0]):  # equal sizes: one batched product
                xk = x.reshape(k, int(n[0]), p)
                gram32[i] = (np.swapaxes(xk, 1, 2) @ xk) / np.float32(n[0])
                noise_moment[i] = (e.reshape(k, 1, -1) @ xk)[:, 0] / n[:, None]
            else:
                for c in range(k):
                    xc, ec = x[offsets[c] : offsets[c + 1]], e[offsets[c] : offsets[c + 1]]
                    gram32[i, c] = (xc.T @ xc) / np.float32(n[c])
                    noise_moment[i, c] = (ec @ xc).astype(np.float64) / n[c]
        else:
            tri = np.triu(gen.standard_normal((k, m_max, p), dtype=np.float32), 1)
            tri[diag] = np.sqrt(gen.chisquare(df)).astype(np.float32)
            tri *= keep_rows[:, :, None]
            w = gen.standard_normal((k, m_max), dtype=np.float32) * keep_rows
            if fac32 is not None:
                tri = tri @ fac32
            gram32[i] = (np.swapaxes(tri, 1, 2) @ tri) / n.astype(np.float32)[:, None, None]
            xte = np.einsum("kmp,km->kp", tri, w)
            noise_moment[i] = sd * xte.astype(np.float64) / n[:, None]
        gram[i] = np.tensordot(weights, gram32[i], axes=1)
    gram = 0.5 * (gram + np.swapaxes(gram, 1, 2))
    # the data of theta = 0 (responses = errors); with_theta adds the signal
    base = RegressionData(
        gram32=gram32,
        moment=noise_moment,
        sizes=n,
        gram=gram,
        moment_pooled=np.einsum("k,rkj->rj", weights, noise_moment),
        x=xs,
        y=noise_y,
        noise_moment=noise_moment,
        noise_y=noise_y,
    )
    return base.with_theta(th)


def data_from_silos(
    xs: Sequence[ArrayLike], ys: Sequence[ArrayLike], replications: int, *, records: bool = True
) -> RegressionData:
    """Fixed (real) data of K silos, repeated for ``replications`` noise replications.

    Parameters
    ----------
    xs, ys : sequences of arrays
        Per-silo design matrices ``(n_k, p)`` and responses ``(n_k,)``.
    replications : int
        ``R``; the statistics are the same in every replication (only the privacy noise varies).
    records : bool
        Keep the records (for DP-SGD).

    Returns
    -------
    RegressionData
        With ``theta = None``.
    """
    big_r = require_int("replications", replications, minimum=1)
    if len(xs) != len(ys) or not xs:
        raise ParameterError("xs", "need one design matrix and one response vector per silo")
    mats = [np.asarray(x, dtype=np.float64) for x in xs]
    vecs = [np.asarray(y, dtype=np.float64).ravel() for y in ys]
    p = mats[0].shape[1]
    for x, y in zip(mats, vecs, strict=True):
        if x.ndim != 2 or x.shape[1] != p or x.shape[0] != y.size or x.shape[0] < 1:
            raise ParameterError("xs", "silo shapes disagree (n_k x p designs, n_k responses)")
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
            raise ParameterError("xs", "the data contain missing or non-finite values")
    n = np.array([x.shape[0] for x in mats], dtype=np.int64)
    g = np.stack([(x.T @ x) / x.shape[0] for x in mats])
    s = np.stack([(x.T @ y) / x.shape[0] for x, y in zip(mats, vecs, strict=True)])
    gram32 = np.ascontiguousarray(np.broadcast_to(g.astype(np.float32), (big_r, *g.shape)))
    moment = np.ascontiguousarray(np.broadcast_to(s, (big_r, *s.shape)))
    w = n / n.sum()
    gram = np.broadcast_to(np.einsum("k,kij->ij", w, g), (big_r, p, p)).copy()
    pooled = np.broadcast_to(np.einsum("k,kj->j", w, s), (big_r, p)).copy()
    xr = yr = None
    if records:
        x_all = np.concatenate(mats).astype(np.float32)
        y_all = np.concatenate(vecs).astype(np.float32)
        xr = np.ascontiguousarray(np.broadcast_to(x_all, (big_r, *x_all.shape)))
        yr = np.ascontiguousarray(np.broadcast_to(y_all, (big_r, y_all.size)))
    return RegressionData(gram32, moment, n, gram, pooled, xr, yr, None)
