"""Group privacy: from a record-level RDP curve to (epsilon, delta) for groups of k records.

Two routes (Section 2.2 of the ULDP-FL paper), both from the same RDP curve ``rho(alpha)``:

``"rdp"`` -- Lemma 6 (Mironov 2017, Prop. 2) then Lemma 2.
    For a group of ``k <= 2^c`` records (``c = ceil(log2 k)``) an ``(alpha, rho)``-RDP mechanism
    is ``(alpha / 2^c, 3^c rho)``-RDP, **but only for** ``alpha >= 2^(c+1)`` (so the group order
    is at least 2). The group curve is converted by Lemma 2 over those orders only. For ``k = 1``
    nothing is converted and every order is used.

``"approx-dp"`` -- Lemma 2 then Lemma 5 (Kasiviswanathan and Smith).
    An ``(epsilon_r, delta_r)``-DP mechanism is ``(k epsilon_r, k e^{(k-1) epsilon_r} delta_r)``-DP
    for groups of ``k``. The per-record ``delta_r`` is solved so that the group delta equals the
    target ``delta`` while ``epsilon_r = epsilon_r(delta_r)`` comes from the RDP curve by Lemma 2
    at that same ``delta_r``. At one order ``alpha > k``, with
    ``B = rho + log((alpha-1)/alpha) - log(alpha)/(alpha-1)`` (so Lemma 2 reads
    ``epsilon_r = B - log(delta_r)/(alpha-1)``), the two equations
    ``log delta = log k + (k-1) epsilon_r + log delta_r`` and Lemma 2 are linear in
    ``(epsilon_r, log delta_r)`` and give ``epsilon_r = ((alpha-1) B + log(k/delta)) / (alpha-k)``;
    the route takes the smallest over the orders. Everything is in log space: ``delta_r`` is
    often far below the smallest float (``log delta_r`` is about ``-3500`` for ``k = 64`` in the
    paper's setting). Orders ``alpha <= k`` give nothing better (raising ``delta_r`` does not
    lower the group delta there) unless ``epsilon_r`` is already 0 at ``delta_r = delta / k``,
    which is checked over every order. This is the exact optimum of the paper's procedure, which
    bisects on ``delta_r`` (footnote 1 of the paper) with a fixed grid of orders; that grid stops
    at order 63, too close to k = 62 (the authors' cap for k = 64) for a useful bound, which is
    why the paper's (epsilon, delta) curve blows up at large k.

``"rdp-all-orders"`` -- the RDP route *ignoring* ``alpha >= 2^(c+1)``.
    Reported because the paper's Fig. 2 values for k = 32 and 64 come from orders that violate
    the condition; it is ``valid`` only when its best order happens to satisfy the condition (then
    it equals ``"rdp"``), and it is never chosen.

The result lists every route and chooses the smallest epsilon among the valid routes
``"rdp"`` and ``"approx-dp"``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_int
from fedprivacy.dp._checks import require_delta
from fedprivacy.dp.rdp import lemma2_epsilons, rdp_curve, rdp_to_epsilon
from fedprivacy.errors import ParameterError

__all__ = [
    "ROUTE_APPROX_DP",
    "ROUTE_RDP",
    "ROUTE_RDP_ALL_ORDERS",
    "GroupBound",
    "GroupPrivacyResult",
    "approx_dp_group_bound",
    "group_exponent",
    "group_privacy_bounds",
    "rdp_group_bound",
]

ROUTE_RDP: Final = "rdp"
ROUTE_APPROX_DP: Final = "approx-dp"
ROUTE_RDP_ALL_ORDERS: Final = "rdp-all-orders"


@dataclass(frozen=True)
class GroupBound:
    """One route's ``(epsilon, delta)`` bound for groups of ``group_size`` records.

    Attributes
    ----------
    route : str
        ``"rdp"``, ``"approx-dp"`` or ``"rdp-all-orders"``.
    epsilon : float
        Group epsilon (``inf`` when no order gives a finite bound).
    delta : float
        Group delta (the target).
    valid : bool
        Whether the bound is proven (false for ``"rdp-all-orders"`` when its best order violates
        ``alpha >= 2^(c+1)``).
    order : float or None
        The record-level RDP order ``alpha`` that attains the bound.
    group_order : float or None
        ``alpha / 2^c`` for the RDP routes; ``None`` for ``"approx-dp"``.
    record_epsilon : float or None
        ``"approx-dp"`` only: the per-record epsilon (the bound is ``k`` times it).
    log_record_delta : float or None
        ``"approx-dp"`` only: natural log of the per-record delta.
    """

    route: str
    epsilon: float
    delta: float
    valid: bool
    order: float | None
    group_order: float | None = None
    record_epsilon: float | None = None
    log_record_delta: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``inf`` epsilon becomes ``None``)."""
        out = asdict(self)
        out["epsilon"] = self.epsilon if math.isfinite(self.epsilon) else None
        return out


@dataclass(frozen=True)
class GroupPrivacyResult:
    """Every route's bound and the chosen (tightest valid) one."""

    group_size: int
    delta: float
    bounds: tuple[GroupBound, ...]
    chosen: GroupBound

    @property
    def epsilon(self) -> float:
        """The chosen route's group epsilon."""
        return self.chosen.epsilon

    def bound(self, route: str) -> GroupBound:
        """The bound of ``route``.

        Raises
        ------
        ParameterError
            If there is no such route.
        """
        for b in self.bounds:
            if b.route == route:
                return b
        raise ParameterError("route", f"unknown route {route!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``group_size``, ``delta``, ``epsilon``, ``chosen``, ``routes``."""
        return {
            "group_size": self.group_size,
            "delta": self.delta,
            "epsilon": self.epsilon if math.isfinite(self.epsilon) else None,
            "chosen": self.chosen.route,
            "routes": [b.to_dict() for b in self.bounds],
        }


def group_exponent(group_size: int) -> int:
    """``c = ceil(log2 k)``: Lemma 6 covers groups of ``2^c >= k`` records.

    Raises
    ------
    ParameterError
        If ``group_size`` is not an integer >= 1.
    """
    k = require_int("group_size", group_size, minimum=1)
    return (k - 1).bit_length()


def rdp_group_bound(
    orders: ArrayLike,
    rdp: ArrayLike,
    group_size: int,
    delta: float,
    *,
    enforce_order_condition: bool = True,
) -> GroupBound:
    """The RDP route (Lemma 6 then Lemma 2).

    Parameters
    ----------
    orders, rdp : array_like
        The record-level RDP curve.
    group_size : int
        ``k >= 1``; rounded up to ``2^c`` with ``c = ceil(log2 k)``.
    delta : float
        Group delta in (0, 1).
    enforce_order_condition : bool
        True (the proven bound): only orders ``alpha >= 2^(c+1)``. False: every order with
        ``alpha / 2^c > 1`` (the paper's Fig. 2 variant; route ``"rdp-all-orders"``).

    Returns
    -------
    GroupBound
        Route ``"rdp"`` or ``"rdp-all-orders"``.
    """
    d = require_delta("delta", delta)
    c = group_exponent(group_size)
    grid, values = rdp_curve(orders, rdp)
    scale = float(2**c)
    if c == 0:
        usable = np.ones(grid.shape, dtype=bool)
    elif enforce_order_condition:
        usable = grid >= 2.0 * scale
    else:
        usable = grid / scale > 1.0
    route = ROUTE_RDP if enforce_order_condition else ROUTE_RDP_ALL_ORDERS
    if not np.any(usable):
        return GroupBound(route, math.inf, d, enforce_order_condition, None)
    eps, group_order = rdp_to_epsilon(grid[usable] / scale, (3.0**c) * values[usable], d)
    if not math.isfinite(eps):
        return GroupBound(route, math.inf, d, enforce_order_condition, None)
    order = group_order * scale
    valid = enforce_order_condition or c == 0 or order >= 2.0 * scale
    return GroupBound(route, eps, d, bool(valid), order, group_order)


def _approx_dp_record_epsilons(
    grid: NDArray[np.float64], values: NDArray[np.float64], k: int, log_delta: float
) -> NDArray[np.float64]:
    """Per-record epsilon at each order from the closed form (``inf`` where it does not apply)."""
    b = lemma2_epsilons(grid, values, 0.0)  # B of the module docstring: Lemma 2 at delta_r = 1
    out = np.full(grid.shape, np.inf)
    ok = (grid > k) & np.isfinite(values)
    a = grid[ok]
    out[ok] = ((a - 1.0) * b[ok] + math.log(k) - log_delta) / (a - k)
    return out


def approx_dp_group_bound(
    orders: ArrayLike, rdp: ArrayLike, group_size: int, delta: float
) -> GroupBound:
    """The (epsilon, delta) route (Lemma 2 then Lemma 5), solved in log space.

    Parameters
    ----------
    orders, rdp : array_like
        The record-level RDP curve.
    group_size : int
        ``k >= 1`` (any integer; Lemma 5 needs no power of two).
    delta : float
        Group delta in (0, 1).

    Returns
    -------
    GroupBound
        Route ``"approx-dp"``, with ``record_epsilon`` and ``log_record_delta`` such that
        ``log(k) + (k-1) record_epsilon + log_record_delta == log(delta)`` and
        ``record_epsilon`` is Lemma 2 at ``exp(log_record_delta)`` and ``order``.
    """
    d = require_delta("delta", delta)
    k = require_int("group_size", group_size, minimum=1)
    grid, values = rdp_curve(orders, rdp)
    log_delta = math.log(d)
    log_record_delta = log_delta - math.log(k)
    at_delta_over_k = lemma2_epsilons(grid, values, log_record_delta)
    if np.any(at_delta_over_k <= 0.0):
        # epsilon_r = 0 already at delta_r = delta / k: Lemma 5 with epsilon_r = 0 gives the group
        # (0, k delta_r) = (0, delta)
        i = int(np.argmin(at_delta_over_k))
        return GroupBound(
            ROUTE_APPROX_DP, 0.0, d, True, float(grid[i]), None, 0.0, log_record_delta
        )
    per_order = _approx_dp_record_epsilons(grid, values, k, log_delta)
    if not np.any(np.isfinite(per_order)):
        return GroupBound(ROUTE_APPROX_DP, math.inf, d, True, None)
    i = int(np.argmin(per_order))
    # > 0 here: a non-positive closed-form value at some order implies epsilon_r <= 0 at
    # delta / k for that order (handled above)
    record_eps = max(float(per_order[i]), 0.0)
    log_record_delta = log_delta - math.log(k) - (k - 1) * record_eps
    return GroupBound(
        ROUTE_APPROX_DP,
        k * record_eps,
        d,
        True,
        float(grid[i]),
        None,
        record_eps,
        log_record_delta,
    )


def group_privacy_bounds(
    orders: ArrayLike, rdp: ArrayLike, group_size: int, delta: float
) -> GroupPrivacyResult:
    """Every group-privacy route for groups of ``group_size`` records, and the tightest valid one.

    Parameters
    ----------
    orders, rdp : array_like
        The record-level RDP curve (e.g. :meth:`PrivacyAccountant.rdp`).
    group_size : int
        ``k >= 1``.
    delta : float
        Group delta in (0, 1).

    Returns
    -------
    GroupPrivacyResult
        Bounds of ``"rdp"``, ``"approx-dp"`` and ``"rdp-all-orders"`` (in that order); the chosen
        one is the smallest epsilon among the valid ``"rdp"`` and ``"approx-dp"`` bounds (ties go
        to ``"rdp"``).

    Raises
    ------
    ParameterError
        If a parameter is out of range or the curve is malformed.
    """
    k = require_int("group_size", group_size, minimum=1)
    d = require_delta("delta", delta)
    bounds = (
        rdp_group_bound(orders, rdp, k, d),
        approx_dp_group_bound(orders, rdp, k, d),
        rdp_group_bound(orders, rdp, k, d, enforce_order_condition=False),
    )
    candidates = [b for b in bounds if b.valid and b.route != ROUTE_RDP_ALL_ORDERS]
    chosen = min(candidates, key=lambda b: b.epsilon)
    return GroupPrivacyResult(k, d, bounds, chosen)
