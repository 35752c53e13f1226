"""The vectorised exact discrete Gaussian: its distribution, and the exact path it falls back to."""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import numpy as np
import pytest
from scipy import stats

import fedprivacy.dp.discrete_gaussian_array as dga
from fedprivacy.dp.discrete_gaussian_array import (
    MAX_VARIANCE,
    discrete_gaussian_array,
    resolve_exactly,
)
from fedprivacy.errors import ParameterError


def _pmf(sigma2: float, support: np.ndarray) -> np.ndarray:
    wide = np.arange(-60 * math.isqrt(int(sigma2) + 1) - 60, 60 * math.isqrt(int(sigma2) + 1) + 61)
    norm = np.exp(-(wide.astype(float) ** 2) / (2 * sigma2)).sum()
    return np.exp(-(support.astype(float) ** 2) / (2 * sigma2)) / norm


def _chi_square_p(samples: np.ndarray, sigma2: float) -> float:
    """Goodness of fit against the exact pmf, each tail pooled into the outermost bin.

    The outermost bins are the last values whose expected count is at least 5, so every bin
    keeps an expected count of at least 5 and a rare far-tail draw cannot dominate.
    """
    n = samples.size
    k = 0
    while _pmf(sigma2, np.array([k + 1]))[0] * n >= 5:
        k += 1
    support = np.arange(-k, k + 1)
    expected = _pmf(sigma2, support) * n
    far = _pmf(sigma2, np.arange(k + 1, 60 * k + 60)).sum()
    expected[0] += n * far
    expected[-1] += n * far
    observed = np.array([np.count_nonzero(np.clip(samples, -k, k) == x) for x in support])
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


@pytest.mark.parametrize("sigma2", [1, 3, 50])
def test_small_variances_follow_the_exact_pmf(sigma2: int) -> None:
    x = discrete_gaussian_array(sigma2, 200_000)
    assert _chi_square_p(x, sigma2) > 1e-4


@pytest.mark.parametrize("sigma2", [10**6, 2**51, MAX_VARIANCE])
def test_large_variances_have_mean_zero_and_variance_sigma2(sigma2: int) -> None:
    n = 200_000
    x = discrete_gaussian_array(sigma2, n).astype(np.float64)
    assert abs(x.mean()) < 5 * math.sqrt(sigma2 / n)
    assert abs(x.var() / sigma2 - 1) < 5 * math.sqrt(2 / n)
    assert abs(stats.kurtosis(x)) < 0.05  # Gaussian tails, not Laplace (kurtosis 3)


def test_the_exact_fallback_alone_gives_the_same_distribution(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With an enormous margin no float comparison decides: every draw is resolved by MPFR."""
    calls = []
    real = dga.resolve_exactly

    def counted(prefix: int, num: int, den: int) -> bool:
        calls.append(1)
        return real(prefix, num, den)

    monkeypatch.setattr(dga, "_MARGIN_SCALE", 1e300)
    monkeypatch.setattr(dga, "resolve_exactly", counted)
    x = discrete_gaussian_array(3, 20_000)
    assert len(calls) > 20_000
    assert _chi_square_p(x, 3) > 1e-4


def test_resolve_exactly_accepts_with_probability_exp_minus_gamma() -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    p = math.exp(-1 / 3)
    hits = sum(resolve_exactly(int(rng.integers(0, 1 << 53)), 1, 3) for _ in range(n))
    assert abs(hits / n - p) < 5 * math.sqrt(p * (1 - p) / n)
    # a prefix straddling exp(-1/3) needs more bits, and still decides
    with gmpy2.context(gmpy2.get_context(), precision=300):
        straddle = int(gmpy2.floor(gmpy2.exp(-gmpy2.mpfr(1) / 3) * 2**53))
    assert {resolve_exactly(straddle, 1, 3) for _ in range(200)} == {True, False}
    assert resolve_exactly(0, 10**6, 1) in (True, False)  # p = exp(-10^6) > 0, below 2^-53


def test_bad_arguments_name_themselves() -> None:
    for bad in (Fraction(1, 2), -1, MAX_VARIANCE + 1, 1.0, True):
        with pytest.raises(ParameterError, match="sigma2"):
            discrete_gaussian_array(bad, 3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="size"):
        discrete_gaussian_array(4, -1)
    assert discrete_gaussian_array(0, 4).tolist() == [0, 0, 0, 0]
    assert discrete_gaussian_array(Fraction(9), 0).shape == (0,)
