"""Similarity of a reconstructed image to the original: MSE and PSNR (Fig. 9 of the paper).

Both are computed on pixels in ``[0, 1]`` (de-normalised), per image: ``MSE = mean((a - b)^2)``
over channels and pixels, ``PSNR = 10 log10(1 / MSE)`` in dB (``inf`` for identical images).

Examples
--------
>>> import numpy as np
>>> a = np.zeros((1, 1, 2, 2)); b = np.full((1, 1, 2, 2), 0.1)
>>> mse(a, b).round(6).tolist(), psnr(a, b).round(6).tolist()
([0.01], [20.0])
>>> psnr(a, a).tolist()
[inf]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy.errors import ParameterError


def mse(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Mean squared error per image of two batches ``(B, C, H, W)`` in ``[0, 1]``."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 4:
        raise ParameterError("images", f"need two (B, C, H, W) batches, got {x.shape}, {y.shape}")
    return np.asarray(((x - y) ** 2).mean(axis=(1, 2, 3)), dtype=np.float64)


def psnr(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """Peak signal-to-noise ratio in dB per image (peak 1; ``inf`` when equal)."""
    err = mse(a, b)
    with np.errstate(divide="ignore"):
        return np.asarray(10 * np.log10(1.0 / err), dtype=np.float64)


def denormalise(
    images: ArrayLike, mean_std: tuple[Sequence[float], Sequence[float]]
) -> NDArray[np.float64]:
    """Map normalised images ``(x - mean) / std`` back to ``[0, 1]`` (clipped)."""
    x = np.asarray(images, dtype=np.float64)
    mean = np.asarray(mean_std[0], dtype=np.float64).reshape(1, -1, 1, 1)
    std = np.asarray(mean_std[1], dtype=np.float64).reshape(1, -1, 1, 1)
    return np.asarray(np.clip(x * std + mean, 0.0, 1.0), dtype=np.float64)
