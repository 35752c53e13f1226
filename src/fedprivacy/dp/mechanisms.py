"""Norm clipping and the Gaussian and Laplace mechanisms (simulation: noise from a seeded rng).

Clipping bounds the sensitivity of a sum: after :func:`clip_l2` every contribution has L2 norm at
most ``bound``, so adding or removing one changes the sum by at most ``bound`` in L2 norm, and the
Gaussian mechanism with standard deviation ``noise_multiplier * bound`` is
``(alpha, alpha / (2 noise_multiplier^2))``-RDP. Likewise :func:`clip_l1` and the Laplace
mechanism with scale ``bound / epsilon`` give ``(epsilon, 0)``-DP.

The noise is drawn from a :class:`numpy.random.Generator` passed in by the caller; this is a
simulation, not a hardened implementation (floating-point noise is not a secure sampler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy.dp._checks import (
    require_finite_array,
    require_generator,
    require_positive,
)
from fedprivacy.errors import ParameterError

__all__ = [
    "clip_l1",
    "clip_l2",
    "clip_rows_l1",
    "clip_rows_l2",
    "gaussian_mechanism",
    "gaussian_std",
    "laplace_mechanism",
    "laplace_scale",
]


def _scale_factors(norms: NDArray[np.float64], bound: float) -> NDArray[np.float64]:
    """``min(1, bound / norm)`` entry-wise, 1 where the norm is 0."""
    out = np.ones_like(norms)
    over = norms > bound
    np.divide(bound, norms, out=out, where=over)
    return out


def _clip_rows(
    matrix: ArrayLike, bound: float, order: int, name: str
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    bound = require_positive("bound", bound)
    arr = require_finite_array(name, matrix)
    if arr.ndim != 2:
        raise ParameterError(name, f"must be a 2-D array (one row per vector), got {arr.ndim}-D")
    norms = np.linalg.norm(arr, ord=order, axis=1) if arr.shape[1] else np.zeros(arr.shape[0])
    scales = _scale_factors(norms.astype(np.float64), bound)
    return arr * scales[:, None], scales


def clip_l2(vector: ArrayLike, bound: float) -> tuple[NDArray[np.float64], float]:
    """Scale ``vector`` down so that its L2 norm is at most ``bound``.

    Parameters
    ----------
    vector : array_like
        Any shape; all entries together are one vector (e.g. a flattened model update).
    bound : float
        The clipping norm ``C > 0``.

    Returns
    -------
    clipped : ndarray of float64
        ``vector * scale``, same shape as ``vector``.
    scale : float
        ``min(1, C / ||vector||_2)`` (1 for the zero vector).

    Raises
    ------
    ParameterError
        If ``bound`` is not a finite number > 0 or ``vector`` has a non-finite entry.

    Examples
    --------
    >>> clipped, scale = clip_l2([3.0, 4.0], 1.0)
    >>> clipped.tolist(), scale
    ([0.6000000000000001, 0.8], 0.2)
    """
    clipped, scale = _clip_rows(np.reshape(vector, (1, -1)), bound, 2, "vector")
    return clipped.reshape(np.shape(vector)), float(scale[0])


def clip_l1(vector: ArrayLike, bound: float) -> tuple[NDArray[np.float64], float]:
    """Scale ``vector`` down so that its L1 norm is at most ``bound``.

    Same parameters and return values as :func:`clip_l2`, with the L1 norm.
    """
    clipped, scale = _clip_rows(np.reshape(vector, (1, -1)), bound, 1, "vector")
    return clipped.reshape(np.shape(vector)), float(scale[0])


def clip_rows_l2(
    matrix: ArrayLike, bound: float, dtype: type[np.floating[Any]] = np.float64
) -> tuple[NDArray[Any], NDArray[np.float64]]:
    """Clip every row of a 2-D array to L2 norm at most ``bound`` (per-example clipping).

    In a ``dtype`` narrower than float64 (what is sent), casting a clipped row rounds each
    entry to nearest, which can leave its norm a few ulps above ``bound`` (up to ~3e-8 relative
    in float32), more than the sensitivity's margin: rows that end above ``bound`` after the
    cast are scaled by ``bound / norm (1 - 2 eps)`` and cast again (one pass suffices: rounding
    moves the norm by at most ``eps / 2`` relative; a few are allowed).

    Parameters
    ----------
    matrix : array_like, shape (n, d)
        One vector per row.
    bound : float
        The clipping norm ``C > 0``.
    dtype : numpy floating type
        The dtype of the clipped rows (float64 by default).

    Returns
    -------
    clipped : ndarray of ``dtype``, shape (n, d)
        Row ``i`` is ``matrix[i] * scales[i]``; its float64 norm is ``<= bound``.
    scales : ndarray of float64, shape (n,)
        ``min(1, C / ||matrix[i]||_2)`` (1 for a zero row), before any cast.

    Raises
    ------
    ParameterError
        If ``matrix`` is not 2-D or not finite, or ``bound`` is not a finite number > 0.

    Examples
    --------
    >>> rows = np.full((1, 1000), 0.1) + np.arange(1000) * 1e-9
    >>> out, _ = clip_rows_l2(rows, 0.3, np.float32)
    >>> out.dtype.name, bool(np.linalg.norm(out.astype(np.float64)) <= 0.3)
    ('float32', True)
    """
    clipped, scales = _clip_rows(matrix, bound, 2, "matrix")
    if dtype is np.float64:
        return clipped, scales
    out = clipped.astype(dtype)
    shrink = 1.0 - 2.0 * float(np.finfo(dtype).eps)
    for _ in range(4):
        norms = np.linalg.norm(out.astype(np.float64), axis=1) if out.shape[1] else None
        over = np.zeros(out.shape[0], bool) if norms is None else norms > bound
        if not over.any():
            return out, scales
        assert norms is not None
        factor = bound / norms[over] * shrink
        out[over] = (out[over].astype(np.float64) * factor[:, None]).astype(dtype)
    raise ParameterError("bound", f"cannot clip to {bound} in {np.dtype(dtype).name}")


def clip_rows_l1(
    matrix: ArrayLike, bound: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Clip every row of a 2-D array to L1 norm at most ``bound``.

    Same parameters and return values as :func:`clip_rows_l2`, with the L1 norm.
    """
    return _clip_rows(matrix, bound, 1, "matrix")


def gaussian_std(sensitivity: float, noise_multiplier: float) -> float:
    """Standard deviation ``noise_multiplier * sensitivity`` of the Gaussian mechanism.

    Raises
    ------
    ParameterError
        If either argument is not a finite number > 0.
    """
    return require_positive("noise_multiplier", noise_multiplier) * require_positive(
        "sensitivity", sensitivity
    )


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Scale ``b = sensitivity / epsilon`` of the Laplace mechanism (variance ``2 b^2``).

    Raises
    ------
    ParameterError
        If either argument is not a finite number > 0.
    """
    return require_positive("sensitivity", sensitivity) / require_positive("epsilon", epsilon)


def _add_noise(
    value: ArrayLike,
    rng: np.random.Generator,
    draw: Callable[[np.random.Generator, tuple[int, ...]], NDArray[np.float64]],
) -> NDArray[np.float64]:
    """``value + draw(rng, value.shape)`` after checking ``rng`` and then ``value``."""
    gen = require_generator("rng", rng)
    arr = require_finite_array("value", value)
    return arr + draw(gen, arr.shape)


def gaussian_mechanism(
    value: ArrayLike,
    *,
    sensitivity: float,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Add i.i.d. ``N(0, (noise_multiplier * sensitivity)^2)`` noise to every entry of ``value``.

    With L2 sensitivity ``sensitivity`` this is ``(alpha, alpha / (2 noise_multiplier^2))``-RDP
    for every ``alpha > 1`` (Lemma 3 of the ULDP-FL paper); account for it with
    :meth:`fedprivacy.dp.accounting.PrivacyAccountant.compose_gaussian`.

    Parameters
    ----------
    value : array_like
        The exact answer (any shape; a scalar gives a 0-d array).
    sensitivity : float
        L2 sensitivity of ``value`` (e.g. the clipping norm), > 0.
    noise_multiplier : float
        Ratio ``z`` of the noise standard deviation to the sensitivity, > 0.
    rng : numpy.random.Generator
        Source of the noise (seed it for reproducible simulations).

    Returns
    -------
    ndarray of float64
        ``value + noise``, same shape as ``value``.

    Raises
    ------
    ParameterError
        If a parameter is out of range or ``value`` has a non-finite entry.
    """
    std = gaussian_std(sensitivity, noise_multiplier)
    return _add_noise(value, rng, lambda gen, shape: gen.normal(0.0, std, size=shape))


def laplace_mechanism(
    value: ArrayLike,
    *,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
) -> NDArray[np.float64]:
    """Add i.i.d. Laplace noise of scale ``sensitivity / epsilon`` to every entry of ``value``.

    With L1 sensitivity ``sensitivity`` this is ``(epsilon, 0)``-DP. Same parameters, return
    value and errors as :func:`gaussian_mechanism`, with the L1 sensitivity and the privacy
    parameter ``epsilon > 0`` in place of ``noise_multiplier``.
    """
    scale = laplace_scale(sensitivity, epsilon)
    return _add_noise(value, rng, lambda gen, shape: gen.laplace(0.0, scale, size=shape))
