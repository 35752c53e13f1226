"""The exact discrete Gaussian sampler: distribution against the exact pmf, huge variances."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedprivacy.dp.discrete_gaussian import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_vector,
    discrete_laplace,
    exact_variance,
    isqrt_floor,
)
from fedprivacy.errors import ParameterError

# every draw comes from the OS, so these tests are statistical: thresholds at p = 1e-6


def exact_pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    """N_Z(0, sigma2) on ``support``, normalised over a range holding all but ~1e-300 of it."""
    wide = np.arange(-int(40 * math.sqrt(sigma2)) - 40, int(40 * math.sqrt(sigma2)) + 41)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * sigma2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma2)) / norm


def chi_square_p(samples: list[int], pmf: Callable[[np.ndarray], np.ndarray]) -> float:
    """p-value of a chi-square test, each tail pooled into the outermost bin of expected count >= 5.

    Pooling into the outermost bin (not a bin of its own) keeps every bin's expected count at
    least 5, so a single rare draw far out in a tail cannot dominate the statistic.
    """
    x = np.asarray(samples)
    n = len(x)
    lo, hi = int(x.min()) - 1, int(x.max()) + 1
    support = np.arange(lo - 50, hi + 51)
    probs = pmf(support)
    keep = probs * n >= 5
    inner = support[keep]
    a, b = int(inner.min()), int(inner.max())
    outside = (1 - probs.sum()) / 2
    expected = [probs[support <= a].sum() + outside]
    observed = [int((x <= a).sum())]
    for v in range(a + 1, b):
        expected.append(probs[support == v].sum())
        observed.append(int((x == v).sum()))
    expected.append(probs[support >= b].sum() + outside)
    observed.append(int((x >= b).sum()))
    e = np.array(expected) * n
    o = np.array(observed)
    return float(stats.chisquare(o, e * o.sum() / e.sum()).pvalue)


@pytest.mark.parametrize("sigma2", [Fraction(2), Fraction(10), Fraction(1, 3)])
def test_matches_the_exact_pmf(sigma2: Fraction) -> None:
    samples = discrete_gaussian_vector(sigma2, 8000)
    assert all(isinstance(v, int) for v in samples)
    p = chi_square_p(samples, lambda s: exact_pmf(float(sigma2), s))
    assert p > 1e-6


def test_huge_variance_mean_and_variance() -> None:
    scale = 1 << 3000  # sigma ~ 3 * 2^3000, like sigma C_LCM / P
    sigma2 = Fraction(9 * scale * scale, 7)
    n = 1500
    x = np.array([v / (3 * scale) for v in discrete_gaussian_vector(sigma2, n)])  # ~N(0, 1/7)
    var = 1 / 7
    assert abs(x.mean()) < 5 * math.sqrt(var / n)
    assert abs(x.var() / var - 1) < 5 * math.sqrt(2 / n)
    assert abs(stats.kurtosis(x)) < 5 * math.sqrt(24 / n)  # Gaussian shape


def test_discrete_laplace_and_bernoulli_exp() -> None:
    t = 3
    x = [discrete_laplace(t) for _ in range(6000)]

    def pmf(s: np.ndarray) -> np.ndarray:
        return (1 - math.exp(-1 / t)) / (1 + math.exp(-1 / t)) * np.exp(-np.abs(s) / t)

    assert chi_square_p(x, pmf) > 1e-6
    for num, den in ((1, 3), (5, 2), (0, 7)):
        hits = sum(bernoulli_exp(num, den) for _ in range(4000))
        prob = math.exp(-num / den)
        assert abs(hits - 4000 * prob) <= 5 * math.sqrt(4000 * prob * (1 - prob)) + 1e-9


def test_zero_variance_and_helpers() -> None:
    assert discrete_gaussian(Fraction(0)) == 0
    assert discrete_gaussian_vector(0, 4) == [0, 0, 0, 0]  # type: ignore[arg-type]
    assert discrete_gaussian_vector(Fraction(5), 0) == []
    assert isqrt_floor(Fraction(10**40 + 1)) == 10**20
    assert isqrt_floor(Fraction(99, 100)) == 0
    assert exact_variance(0.1, Fraction(10)) == (Fraction(0.1) * 10) ** 2


@pytest.mark.parametrize(
    "call",
    [
        lambda: discrete_gaussian(Fraction(-1)),
        lambda: discrete_gaussian(2.0),  # type: ignore[arg-type]
        lambda: discrete_gaussian(True),  # type: ignore[arg-type]
        lambda: discrete_gaussian_vector(Fraction(1), -1),
        lambda: discrete_gaussian_vector(Fraction(1), 2.0),  # type: ignore[arg-type]
        lambda: discrete_laplace(0),
        lambda: bernoulli_exp(-1, 2),
        lambda: bernoulli_exp(1, 0),
        lambda: exact_variance(-1.0, Fraction(1)),
        lambda: exact_variance(math.nan, Fraction(1)),
        lambda: exact_variance("1", Fraction(1)),  # type: ignore[arg-type]
    ],
)
def test_bad_input_is_a_parameter_error(call: Callable[[], object]) -> None:
    with pytest.raises(ParameterError):
        call()
