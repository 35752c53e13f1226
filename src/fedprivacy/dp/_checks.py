"""Parameter checks shared by the modules of :mod:`fedprivacy.dp`."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int, require_number
from fedprivacy.errors import ParameterError


def require_positive(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0, or raise :class:`ParameterError`."""
    out = require_number(name, value)
    if out <= 0:
        raise ParameterError(name, f"must be > 0, got {out!r}")
    return out


def require_nonnegative(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` >= 0, or raise :class:`ParameterError`."""
    out = require_number(name, value)
    if out < 0:
        raise ParameterError(name, f"must be >= 0, got {out!r}")
    return out


def require_delta(name: str, value: object) -> float:
    """Return a DP ``delta`` after checking it lies in the open interval (0, 1)."""
    out = require_number(name, value)
    if not 0.0 < out < 1.0:
        raise ParameterError(name, f"must lie in the open interval (0, 1), got {out!r}")
    return out


def require_sampling_rate(name: str, value: object) -> float:
    """Return a Poisson sampling rate after checking it lies in (0, 1]."""
    out = require_number(name, value)
    if not 0.0 < out <= 1.0:
        raise ParameterError(name, f"must lie in (0, 1] (1 = no sub-sampling), got {out!r}")
    return out


def require_steps(name: str, value: object, minimum: int = 0) -> int:
    """Return a number of composed steps after checking it is an integer >= ``minimum``."""
    return require_int(name, value, minimum=minimum)


def require_budget(
    epsilon: object, delta: object, steps: object, steps_name: str = "steps"
) -> tuple[float, float, int]:
    """Return ``epsilon > 0``, ``delta`` in (0, 1) and ``steps >= 1`` (named ``steps_name``)."""
    return (
        require_positive("epsilon", epsilon),
        require_delta("delta", delta),
        require_steps(steps_name, steps, minimum=1),
    )


def require_generator(name: str, value: object) -> np.random.Generator:
    """Return ``value`` after checking it is a seeded :class:`numpy.random.Generator`."""
    if not isinstance(value, np.random.Generator):
        raise ParameterError(
            name,
            "must be a numpy.random.Generator (e.g. numpy.random.default_rng(seed)), "
            f"got {type(value).__name__}",
        )
    return value


def require_finite_array(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Return ``value`` as a float64 array after checking every entry is finite."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(name, f"must be an array of numbers ({exc})") from exc
    if not np.all(np.isfinite(arr)):
        raise ParameterError(name, "every entry must be finite (no NaN or infinity)")
    return arr


def require_order_grid(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Return RDP orders as a non-empty float64 vector of finite values > 1, as given."""
    arr = require_finite_array(name, value)
    if arr.ndim != 1 or arr.size == 0:
        raise ParameterError(name, f"must be a non-empty 1-D sequence, got shape {arr.shape}")
    if np.any(arr <= 1.0):
        raise ParameterError(name, f"every RDP order must be > 1, got {float(arr.min())!r}")
    return arr


def require_orders(name: str, value: ArrayLike) -> NDArray[np.float64]:
    """Return RDP orders as a sorted float64 vector of distinct finite values > 1."""
    ordered = np.sort(require_order_grid(name, value))
    if np.any(np.diff(ordered) == 0):
        raise ParameterError(name, "orders must be distinct")
    return ordered
