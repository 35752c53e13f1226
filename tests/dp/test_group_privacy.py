from __future__ import annotations

import math

import numpy as np
import pytest

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.group_privacy import (
    ROUTE_APPROX_DP,
    ROUTE_RDP,
    ROUTE_RDP_ALL_ORDERS,
    approx_dp_group_bound,
    group_exponent,
    group_privacy_bounds,
    rdp_group_bound,
)
from fedprivacy.dp.rdp import lemma2_epsilons, rdp_to_epsilon
from fedprivacy.errors import ParameterError

DELTA = 1e-5


def lemma2(order: float, rho: float, delta: float) -> float:
    return rho + math.log((order - 1) / order) - (math.log(delta) + math.log(order)) / (order - 1)


@pytest.fixture(scope="module")
def paper_curve() -> tuple[np.ndarray, np.ndarray]:
    return PrivacyAccountant().compose_gaussian(5.0, 100_000, 0.01).rdp()


@pytest.mark.parametrize(("k", "c"), [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (64, 6)])
def test_group_exponent(k: int, c: int) -> None:
    assert group_exponent(k) == c


def test_group_exponent_rejects_empty_groups() -> None:
    with pytest.raises(ParameterError, match="group_size"):
        group_exponent(0)


def test_rdp_route_by_hand_with_the_order_condition() -> None:
    # rho(alpha) = 5 alpha (e.g. a Gaussian with sigma = 1 composed 10 times); k = 2, so c = 1:
    # group curve (alpha / 2, 3 rho(alpha)), valid only for alpha >= 4
    orders = np.array([1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0])
    rdp = 5.0 * orders
    valid = rdp_group_bound(orders, rdp, 2, DELTA)
    by_hand = {a: lemma2(a / 2, 3 * 5.0 * a, DELTA) for a in (4.0, 6.0, 8.0, 16.0)}
    assert valid.route == ROUTE_RDP and valid.valid
    assert valid.epsilon == pytest.approx(min(by_hand.values()), rel=1e-12)
    assert valid.order == 4.0 and valid.group_order == 2.0
    assert valid.epsilon == pytest.approx(60.0 + math.log(0.5) - (math.log(DELTA) + math.log(2.0)))
    # ignoring the condition, order 3 (group order 1.5) wins: smaller, but not a proven bound
    loose = rdp_group_bound(orders, rdp, 2, DELTA, enforce_order_condition=False)
    assert loose.route == ROUTE_RDP_ALL_ORDERS and not loose.valid
    assert loose.order == 3.0 and loose.group_order == 1.5
    assert loose.epsilon == pytest.approx(lemma2(1.5, 45.0, DELTA), rel=1e-12)
    assert loose.epsilon < valid.epsilon
    result = group_privacy_bounds(orders, rdp, 2, DELTA)
    assert result.chosen.route != ROUTE_RDP_ALL_ORDERS
    assert result.bound(ROUTE_RDP_ALL_ORDERS).epsilon < result.epsilon


def test_rdp_route_for_a_group_that_is_not_a_power_of_two() -> None:
    orders = np.arange(2.0, 200.0)
    rdp = 0.01 * orders
    three = rdp_group_bound(orders, rdp, 3, DELTA)
    four = rdp_group_bound(orders, rdp, 4, DELTA)
    assert three.epsilon == four.epsilon and three.order == four.order
    assert three.order is not None and three.order >= 8  # c = 2: alpha >= 2^(c+1)
    by_hand = min(lemma2(a / 4, 9 * 0.01 * a, DELTA) for a in orders if a >= 8)
    assert four.epsilon == pytest.approx(by_hand, rel=1e-12)


def test_approx_dp_route_by_hand() -> None:
    # one order, rho = 2 at alpha = 10, k = 2: closed form of Lemma 2 + Lemma 5
    a, rho, k = 10.0, 2.0, 2
    bound = approx_dp_group_bound([a], [rho], k, DELTA)
    b = rho + math.log((a - 1) / a) - math.log(a) / (a - 1)
    record_eps = ((a - 1) * b + math.log(k / DELTA)) / (a - k)
    assert bound.route == ROUTE_APPROX_DP and bound.valid and bound.order == a
    assert bound.record_epsilon == pytest.approx(record_eps, rel=1e-12)
    assert bound.epsilon == pytest.approx(k * record_eps, rel=1e-12)
    # the two defining equations hold: Lemma 2 at the per-record delta, and Lemma 5's group delta
    assert bound.log_record_delta is not None
    record_delta = math.exp(bound.log_record_delta)
    assert lemma2(a, rho, record_delta) == pytest.approx(record_eps, rel=1e-12)
    assert k * math.exp((k - 1) * record_eps) * record_delta == pytest.approx(DELTA, rel=1e-10)


def test_approx_dp_route_needs_orders_above_the_group_size() -> None:
    bound = approx_dp_group_bound([2.0, 4.0, 8.0], [0.1, 0.2, 0.4], 8, DELTA)
    assert bound.epsilon == math.inf and bound.order is None
    assert bound.to_dict()["epsilon"] is None
    result = group_privacy_bounds([2.0, 4.0, 8.0], [0.1, 0.2, 0.4], 8, DELTA)
    assert result.epsilon == math.inf  # nor does the RDP route have orders >= 16


def test_approx_dp_route_with_zero_epsilon() -> None:
    # a (nearly) perfectly private curve at a huge order: epsilon 0 already at delta / k
    bound = approx_dp_group_bound([1e6], [0.0], 4, DELTA)
    assert bound.epsilon == 0.0
    assert bound.log_record_delta == pytest.approx(math.log(DELTA / 4))
    # also from an order <= k: Lemma 2 at order 4, rho = 0, delta / k = 0.125 is
    # log(3/4) - (log(0.125) + log(4)) / 3 < 0
    assert math.log(0.75) - (math.log(0.125) + math.log(4.0)) / 3 < 0
    assert approx_dp_group_bound([4.0], [0.0], 4, 0.5).epsilon == 0.0


def test_approx_dp_route_equals_the_papers_bisection(
    paper_curve: tuple[np.ndarray, np.ndarray],
) -> None:
    """Our closed form is the optimum of the paper's procedure: bisect on the per-record delta."""
    orders, rdp = paper_curve
    for k in (2, 8, 64):
        log_target = math.log(DELTA)

        def record_eps(log_delta_r: float) -> float:
            return max(0.0, float(np.min(lemma2_epsilons(orders, rdp, log_delta_r))))

        lo, hi = -1e5, log_target
        for _ in range(200):
            mid = (lo + hi) / 2
            if math.log(k) + (k - 1) * record_eps(mid) + mid > log_target:
                hi = mid
            else:
                lo = mid
        bound = approx_dp_group_bound(orders, rdp, k, DELTA)
        assert bound.epsilon == pytest.approx(k * record_eps(lo), rel=1e-9)
        assert bound.log_record_delta == pytest.approx(lo, rel=1e-9)


def test_group_of_one_is_record_level(paper_curve: tuple[np.ndarray, np.ndarray]) -> None:
    orders, rdp = paper_curve
    record, order = rdp_to_epsilon(orders, rdp, DELTA)
    result = group_privacy_bounds(orders, rdp, 1, DELTA)
    for b in result.bounds:
        assert b.epsilon == pytest.approx(record, rel=1e-12)
        assert b.valid and b.order == order


def test_paper_setting_routes(paper_curve: tuple[np.ndarray, np.ndarray]) -> None:
    orders, rdp = paper_curve
    previous = 0.0
    for c in range(1, 7):
        k = 2**c
        result = group_privacy_bounds(orders, rdp, k, DELTA)
        rdp_route = result.bound(ROUTE_RDP)
        assert rdp_route.order is not None and rdp_route.order >= 2 ** (c + 1)
        assert rdp_route.group_order is not None and rdp_route.group_order >= 2
        assert result.chosen.valid and result.chosen.route in (ROUTE_RDP, ROUTE_APPROX_DP)
        assert result.epsilon == min(
            result.bound(ROUTE_RDP).epsilon, result.bound(ROUTE_APPROX_DP).epsilon
        )
        assert result.epsilon > previous
        previous = result.epsilon
        loose = result.bound(ROUTE_RDP_ALL_ORDERS)
        if k >= 8:  # here the unconstrained minimum sits at an order below 2^(c+1)
            assert not loose.valid and loose.order is not None and loose.order < 2 ** (c + 1)
            assert loose.epsilon < rdp_route.epsilon
        else:
            assert loose.valid and loose.epsilon == rdp_route.epsilon
    # measured values, k = 64: Lemma 6 on valid orders 20107, Lemma 5 3508
    assert result.bound(ROUTE_RDP).epsilon == pytest.approx(20107.06, rel=1e-4)
    assert result.bound(ROUTE_APPROX_DP).epsilon == pytest.approx(3508.09, rel=1e-4)


def test_result_dict_and_lookup(paper_curve: tuple[np.ndarray, np.ndarray]) -> None:
    orders, rdp = paper_curve
    result = PrivacyAccountant().compose_gaussian(5.0, 100_000, 0.01).group_privacy(4, DELTA)
    assert result.epsilon == group_privacy_bounds(orders, rdp, 4, DELTA).epsilon
    d = result.to_dict()
    assert d["group_size"] == 4 and d["chosen"] == result.chosen.route
    assert [r["route"] for r in d["routes"]] == [ROUTE_RDP, ROUTE_APPROX_DP, ROUTE_RDP_ALL_ORDERS]
    assert set(d["routes"][0]) >= {"route", "epsilon", "delta", "valid", "order"}
    with pytest.raises(ParameterError, match="route"):
        result.bound("nope")


@pytest.mark.parametrize(
    ("k", "delta", "match"),
    [(0, DELTA, "group_size"), (2, 0.0, "delta"), (2, 1.0, "delta"), (2.5, DELTA, "group_size")],
)
def test_bad_parameters(k: int, delta: float, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        group_privacy_bounds([2.0, 4.0], [0.1, 0.2], k, delta)


def test_bad_curves() -> None:
    with pytest.raises(ParameterError, match="one value per order"):
        group_privacy_bounds([2.0, 4.0], [0.1], 2, DELTA)
    with pytest.raises(ParameterError, match="> 1"):
        group_privacy_bounds([1.0, 4.0], [0.1, 0.2], 2, DELTA)
    with pytest.raises(ParameterError, match=">= 0"):
        group_privacy_bounds([2.0, 4.0], [-0.1, 0.2], 2, DELTA)
