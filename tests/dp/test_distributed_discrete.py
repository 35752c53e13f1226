"""Accounting of the silos' discrete Gaussians: the continuous RDP bound, the KLS tau term."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld

from fedprivacy.dp.accounting import PrivacyAccountant
from fedprivacy.dp.distributed_discrete import (
    NEGLIGIBLE_LOG_TAU,
    NonNegligibleTauError,
    check_negligible,
    grid_noise_multiplier,
    log_tau,
)
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.private_weighting.params import lcm_upto


def tau(sigma2: float, n: int) -> float:
    return 10 * sum(math.exp(-2 * math.pi**2 * sigma2 * k / (k + 1)) for k in range(1, n))


def test_log_tau_matches_the_direct_sum_and_underflows_safely() -> None:
    for sigma2, n in ((0.5, 2), (1.0, 3), (2.5, 6)):
        assert log_tau(Fraction(sigma2), n) == pytest.approx(math.log(tau(sigma2, n)), rel=1e-12)
    assert log_tau(Fraction(4), 1) == -math.inf
    # the protocol's scale: sigma_int = sigma C C_LCM / (sqrt(|S|) P), ~2,900-bit integers
    c_lcm = lcm_upto(2000)
    sigma2 = (Fraction(5.0 * 1.0 / 2) * c_lcm / Fraction(1e-10)) ** 2
    assert log_tau(sigma2, 4) == -math.inf
    assert check_negligible(sigma2, 4, 10**6) == -math.inf
    # where float64 still represents it, log tau ~ -pi^2 sigma^2
    assert log_tau(Fraction(10**300), 2) == pytest.approx(-(math.pi**2) * 1e300, rel=1e-12)


def test_non_negligible_tau_is_refused() -> None:
    with pytest.raises(NonNegligibleTauError, match="tau d"):
        check_negligible(Fraction(4), 3, 10)
    # sigma^2 = 75: pi^2 75 = 740 > 691 = -log(1e-300) (d = 1)
    assert check_negligible(Fraction(75), 2, 1) < NEGLIGIBLE_LOG_TAU
    with pytest.raises(ParameterError):
        log_tau(Fraction(0), 2)
    with pytest.raises(ParameterError):
        log_tau(Fraction(1), 0)
    with pytest.raises(ParameterError):
        check_negligible(Fraction(1), 2, 0)


def test_grid_noise_multiplier_counts_the_rounding() -> None:
    sigma, clip, p, d, s = 5.0, 1.0, 1e-10, 14, 4
    m = grid_noise_multiplier(sigma * clip / math.sqrt(s), s, clip, p, d)
    factor = 1 + math.sqrt(d) * p / (2 * clip)
    assert m < sigma
    assert m == pytest.approx(sigma / factor, rel=1e-11)
    with pytest.raises(ParameterError):
        grid_noise_multiplier(0.0, 2, 1.0, 1e-10, 3)
    with pytest.raises(ParameterError):
        grid_noise_multiplier(1.0, 2, 1.0, 1e-10, 0)


@pytest.mark.parametrize(
    ("sigma", "sensitivity", "q"),
    [(1, 1, 1.0), (3, 2, 1.0), (8, 3, 1.0), (20, 1, 1.0), (5, 3, 1.0), (3, 1, 0.5), (8, 3, 0.5)],
)
def test_continuous_rdp_epsilon_bounds_the_discrete_gaussians(
    sigma: int, sensitivity: int, q: float
) -> None:
    """dp-accounting's PLD of one discrete Gaussian vs the continuous RDP accountant we use."""
    delta = 1e-5
    discrete = pld.from_discrete_gaussian_mechanism(
        sigma, sensitivity=sensitivity, sampling_prob=q
    ).get_epsilon_for_delta(delta)
    ours = PrivacyAccountant("rdp").compose_gaussian(sigma / sensitivity, 1, q).epsilon(delta)
    assert discrete <= ours


def log_pmf_sum(sigma2: float, n: int, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """log pmf of the sum of n N_Z(0, sigma2), by convolving truncated pmfs."""
    x = np.arange(-half_width, half_width + 1)
    one = np.exp(-(x**2) / (2 * sigma2))
    one /= one.sum()
    total = one
    for _ in range(n - 1):
        total = np.convolve(total, one)
    support = np.arange(-(len(total) // 2), len(total) // 2 + 1)
    with np.errstate(divide="ignore"):
        return support, np.log(total)


@pytest.mark.parametrize(("sigma2", "n"), [(0.5, 2), (1.0, 3), (2.0, 4), (0.3, 3)])
@pytest.mark.parametrize("shift", [1, 2])
def test_sum_of_discrete_gaussians_meets_the_kls_bound(sigma2: float, n: int, shift: int) -> None:
    """D_alpha(Z + Delta || Z) <= alpha Delta^2 / (2 n sigma^2) + tau, exact pmf of Z."""
    support, logp = log_pmf_sum(sigma2, n, 60)  # KLS 2021 assume sigma >= 1/2
    for alpha in (1.5, 2.0, 4.0, 8.0, 16.0):
        # log P(x - Delta) and log P(x) on the inner support (mass beyond is < 1e-300)
        inner = slice(shift, len(support) - shift)
        lp = logp[inner]
        lq = logp[inner.start - shift : inner.stop - shift]
        ok = np.isfinite(lp) & np.isfinite(lq)
        terms = alpha * lq[ok] + (1 - alpha) * lp[ok]
        top = terms.max()
        divergence = (top + math.log(np.exp(terms - top).sum())) / (alpha - 1)
        gaussian = alpha * shift**2 / (2 * n * sigma2)
        assert divergence <= gaussian + tau(sigma2, n) + 1e-12
