"""Validation helpers: every public entry point checks its parameters with these."""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy.errors import ParameterError


def require_number(name: str, value: object) -> float:
    """Return ``value`` (an int or a float, not a bool) as a finite ``float``.

    Examples
    --------
    >>> require_number("lr", 2)
    2.0
    >>> require_number("lr", "fast")
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: lr: must be a number, got 'fast'
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(name, f"must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise ParameterError(name, f"must be finite, got {value!r}")
    return out


def require_positive_number(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0 (:func:`require_number`, then the sign).

    Examples
    --------
    >>> require_positive_number("clip", -1.0)
    Traceback (most recent call last):
    ...
    fedprivacy.errors.ParameterError: clip: must be a finite number > 0, got -1.0
    """
    if require_number(name, value) <= 0:
        raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
    return float(value)  # type: ignore[arg-type]


def require_positive_float(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0 (anything ``float()`` accepts, not a bool).

    Raises
    ------
    ParameterError
        If ``value`` is a bool, not convertible, not finite, or not positive.
    """
    if isinstance(value, bool):
        raise ParameterError(name, f"must be a number, got {value!r}")
    try:
        out = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ParameterError(name, f"must be a number, got {value!r}") from exc
    if not math.isfinite(out) or out <= 0:
        raise ParameterError(name, f"must be a finite number > 0, got {out!r}")
    return out


def require_int(
    name: str, value: object, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Return ``value`` as an ``int`` after checking it is an integer in ``[minimum, maximum]``.

    Raises
    ------
    ParameterError
        If ``value`` is not an integer or lies outside the range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(name, f"must be an integer, got {value!r}")
    out = int(value)
    if minimum is not None and out < minimum:
        raise ParameterError(name, f"must be >= {minimum}, got {out}")
    if maximum is not None and out > maximum:
        raise ParameterError(name, f"must be <= {maximum}, got {out}")
    return out


def require_probability_vector(
    name: str, value: ArrayLike, size: int, *, allow_one: bool = False
) -> NDArray[np.float64]:
    """Broadcast ``value`` to a float vector of length ``size`` with entries in ``[0, 1)``.

    Parameters
    ----------
    name : str
        Parameter name used in the error message.
    value : array_like
        A scalar or a vector of length ``size``.
    size : int
        Required length.
    allow_one : bool
        Whether 1 is allowed (the interval becomes ``[0, 1]``).

    Raises
    ------
    ParameterError
        If the shape is wrong or an entry is not a finite number in range.
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(name, f"must be a number or a vector of numbers ({exc})") from exc
    if arr.ndim == 0:
        arr = np.full(size, float(arr))
    if arr.shape != (size,):
        raise ParameterError(name, f"must be a scalar or have length {size}, got shape {arr.shape}")
    upper = "1]" if allow_one else "1)"
    bad = ~np.isfinite(arr) | (arr < 0) | ((arr > 1) if allow_one else (arr >= 1))
    if np.any(bad):
        first = float(arr[np.flatnonzero(bad)[0]])
        raise ParameterError(name, f"every entry must lie in [0, {upper}, got {first!r}")
    return arr


def require_binary_matrix(name: str, value: ArrayLike) -> NDArray[np.uint8]:
    """Return ``value`` as a 2-D ``uint8`` matrix after checking every entry is 0 or 1.

    Raises
    ------
    ParameterError
        If ``value`` is not 2-D or has an entry other than 0 and 1.
    """
    arr = np.asarray(value)
    if arr.ndim != 2:
        raise ParameterError(name, f"must be a 2-D matrix, got {arr.ndim} dimension(s)")
    if arr.dtype != np.bool_:
        if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
            raise ParameterError(name, f"must hold 0/1 numbers, got dtype {arr.dtype}")
        ok = (arr == 0) | (arr == 1)
        if not np.all(ok):
            r, c = np.argwhere(~ok)[0]
            raise ParameterError(name, f"entries must be 0 or 1; entry ({r}, {c}) is {arr[r, c]!r}")
    return arr.astype(np.uint8)


def require_one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    """Raise :class:`ParameterError` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ParameterError(name, f"must be one of {', '.join(allowed)}; got {value!r}")
