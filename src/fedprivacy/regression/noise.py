"""The clients' privacy noise, drawn per replication and aggregated with the weights ``pi_k``.

Only the aggregate ``xi_t = sum_k pi_k xi_{k,t}`` enters the server's update, so it is drawn
directly from its exact distribution:

* Gaussian: ``xi_t ~ N(0, (sum_k pi_k^2 sigma_k^2) I)``.
* Laplace: ``pi_k b_k`` is the same for every client under both calibrations (``b_k`` is
  proportional to ``1 / n_k``), and a sum of ``K`` i.i.d. Laplace(1) variables is the difference
  of two Gamma(K, 1) variables (``Laplace = Exp - Exp``), so each coordinate is
  ``pi_1 b_1 (G_1 - G_2)``; with unequal ``pi_k b_k`` the ``K`` Laplace terms are drawn one by one.

Replication ``b`` uses its own generator (:func:`fedprivacy.regression.data.rep_generator`), and
the same standard draws are rescaled for every privacy budget (common random numbers across
``epsilon``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from fedprivacy.regression.data import STREAM_NA_FGD, rep_generator
from fedprivacy.regression.privacy import ClientNoise

__all__ = ["aggregated_noise"]

_CHUNK = 256


def aggregated_noise(
    reps: Sequence[int] | NDArray[np.int64],
    steps: int,
    dimension: int,
    noise: ClientNoise,
    weights: NDArray[np.float64],
    *,
    seed: int = 0,
    stream: int = STREAM_NA_FGD,
) -> NDArray[np.float32]:
    """Draw ``xi_t`` for every replication and iteration (module docstring).

    Parameters
    ----------
    reps : sequence of int
        Global replication indices (one random stream each).
    steps : int
        ``T``.
    dimension : int
        ``p``.
    noise : ClientNoise
        The clients' noise scales and mechanism.
    weights : ndarray, shape (K,)
        ``pi_k``.
    seed : int
        Base seed.
    stream : int
        Random stream id.

    Returns
    -------
    ndarray of float32, shape (R, T, p)
        The aggregated noise.
    """
    ids = np.asarray(reps, dtype=np.int64)
    out = np.empty((ids.size, steps, dimension), dtype=np.float32)
    coef = np.asarray(weights, dtype=np.float64) * noise.scales
    k = coef.size
    for i, b in enumerate(ids):
        gen = rep_generator(seed, stream, int(b))
        if noise.mechanism == "gaussian":
            std = np.float32(np.sqrt(np.sum(coef**2)))
            out[i] = gen.standard_normal((steps, dimension), dtype=np.float32) * std
        elif np.allclose(coef, coef[0], rtol=1e-9, atol=0.0):
            g1 = gen.standard_gamma(float(k), (steps, dimension), dtype=np.float32)
            g2 = gen.standard_gamma(float(k), (steps, dimension), dtype=np.float32)
            out[i] = (g1 - g2) * np.float32(coef[0])
        else:
            for s0 in range(0, steps, _CHUNK):
                s1 = min(steps, s0 + _CHUNK)
                lap = gen.laplace(0.0, 1.0, (s1 - s0, k, dimension))
                out[i, s0:s1] = np.einsum("k,tkp->tp", coef, lap)
    return out
