"""The noise modes' rules: what each party draws, keeps and removes."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedprivacy.dp.noise_modes import DEFAULT_NOISE_MODE, NOISE_MODES, NoiseDraw
from fedprivacy.errors import ParameterError


@st.composite
def rounds(draw: st.DrawFn) -> tuple[int, int, list[int], Fraction]:
    """A round: n selected, threshold t <= n, an aggregated set of s >= t, a target variance."""
    n = draw(st.integers(2, 60))
    t = draw(st.integers(2, n))
    s = draw(st.integers(t, n))
    aggregated = sorted(draw(st.permutations(range(n)))[:s])
    target = Fraction(draw(st.integers(1, 10**12)), draw(st.integers(1, 1000)))
    return n, t, aggregated, target


@given(rounds())
def test_the_survivors_keep_exactly_n_components_of_the_target_variance(
    case: tuple[int, int, list[int], Fraction],
) -> None:
    n, t, aggregated, target = case
    draw = NOISE_MODES["exact"](target, threshold=t, parties=n)
    assert draw.components == math.ceil(n / t) and draw.kept_total == n
    kept = [draw.kept(aggregated, u) for u in aggregated]
    assert sum(kept) == n
    assert set(kept) <= {n // len(aggregated), -(-n // len(aggregated))}
    assert max(kept) <= draw.components
    # the sum holds the target, rounded up by less than one grid unit a component
    assert target <= n * draw.variance < target + n or draw.variance == 1
    assert draw.in_sum(aggregated, removed=aggregated) == n
    assert draw.in_sum(aggregated, removed=[]) == len(aggregated) * draw.components


@given(rounds())
def test_the_over_provisioned_mode_is_one_draw_for_the_threshold(
    case: tuple[int, int, list[int], Fraction],
) -> None:
    n, t, aggregated, target = case
    draw = NOISE_MODES[DEFAULT_NOISE_MODE](target, threshold=t, parties=n)
    assert (draw.components, draw.kept_total, draw.removable) == (1, None, False)
    assert draw.variance == max(1, math.ceil(target / t))
    assert draw.in_sum(aggregated, removed=aggregated) == len(aggregated)  # nothing removed
    assert t * draw.variance >= target


def test_a_set_smaller_than_the_threshold_or_a_stranger_is_refused() -> None:
    draw = NOISE_MODES["exact"](Fraction(100), threshold=4, parties=12)
    with pytest.raises(ParameterError, match="aggregated"):
        draw.kept([0, 1, 2], 0)  # 3 parties cannot keep 12 components of 3
    with pytest.raises(ParameterError, match="user"):
        draw.kept([0, 1, 2, 3], 7)
    with pytest.raises(ParameterError, match="parties"):
        NOISE_MODES["exact"](Fraction(100), threshold=5, parties=4)
    with pytest.raises(ParameterError, match="noise_mode"):
        NOISE_MODES.lookup("dordis")
    with pytest.raises(ParameterError, match="variance"):
        NoiseDraw(Fraction(1, 2))
