import math

import numpy as np
import pytest

from fedprivacy.dp.accounting import epsilon_for
from fedprivacy.errors import ParameterError
from fedprivacy.regression.accounting import laplace_epsilon, laplace_rdp
from fedprivacy.regression.nbafl_calibration import nbafl_constant, nbafl_noise
from fedprivacy.regression.privacy import (
    C_MA,
    calibrate_client_noise,
    dp_sgd_epsilon,
    dp_sgd_noise_multiplier,
    paper_noise_scale,
    record_sensitivity,
)

SIZES = [40, 80, 120]


def test_paper_sigma_formula():
    sig = paper_noise_scale(0.8, 1e-5, 300, 1.0, SIZES)
    expected = C_MA * math.sqrt(300 * math.log(1e5)) / (0.8 * np.array(SIZES))
    assert np.allclose(sig, expected)
    noise = calibrate_client_noise(0.8, 1e-5, 300, SIZES)
    assert np.allclose(noise.scales, expected)
    assert np.allclose(noise.sensitivities, 1.0 / np.array(SIZES))  # C / n_k, add/remove
    # the multiplier sigma_k / Delta_k is the same for every client
    assert np.allclose(noise.noise_multipliers, C_MA * math.sqrt(300 * math.log(1e5)) / 0.8)
    z = float(noise.noise_multipliers[0])
    assert noise.epsilon_accountant == pytest.approx(epsilon_for(z, 300, 1e-5))
    # the c_MA heuristic adds less noise than the RDP accountant needs
    assert noise.epsilon_accountant > 2 * 0.8


def test_replace_neighbouring_doubles_sensitivity():
    assert np.allclose(record_sensitivity(1.0, SIZES, "replace"), 2.0 / np.array(SIZES))
    a = calibrate_client_noise(1.0, 1e-5, 100, SIZES)
    b = calibrate_client_noise(1.0, 1e-5, 100, SIZES, neighbouring="replace")
    assert np.allclose(a.scales, b.scales)  # the paper's sigma does not depend on it
    assert b.epsilon_accountant > a.epsilon_accountant
    with pytest.raises(ParameterError, match="neighbouring"):
        record_sensitivity(1.0, SIZES, "swap")


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_accountant_mode_meets_target(mechanism):
    noise = calibrate_client_noise(
        0.8, 1e-5, 200, SIZES, mechanism=mechanism, calibration="accountant"
    )
    assert noise.epsilon_accountant <= 0.8 + 1e-9
    assert noise.epsilon_accountant == pytest.approx(0.8, rel=1e-3)
    assert np.allclose(noise.scales, noise.noise_multipliers * 1.0 / np.array(SIZES))


def test_laplace_uses_l1_sensitivity_and_laplace_rdp():
    noise = calibrate_client_noise(2.0, 1e-5, 50, SIZES, mechanism="laplace")
    # sensitivity C / n_k of the L1-clipped mean; scale proportional to it
    assert np.allclose(noise.sensitivities, 1.0 / np.array(SIZES))
    z = float(noise.noise_multipliers[0])
    assert noise.epsilon_accountant == pytest.approx(laplace_epsilon(z, 50, 1e-5))
    # variance of a Laplace(b) coordinate is 2 b^2
    w = np.array(SIZES) / sum(SIZES)
    assert noise.aggregate_variance(w) == pytest.approx(2 * np.sum(w**2 * noise.scales**2))
    # Laplace RDP: 0 < eps(alpha) <= 1/z (pure DP), increasing to 1/z
    rdp = laplace_rdp(2.0, [1.5, 2.0, 10.0, 1e4])
    assert np.all(rdp > 0) and np.all(rdp <= 0.5 + 1e-12) and np.all(np.diff(rdp) > 0)
    assert rdp[-1] == pytest.approx(0.5, rel=1e-3)
    # one release: never above the pure epsilon 1 / z
    assert laplace_epsilon(4.0, 1, 1e-5) <= 0.25 + 1e-12


def test_dp_sgd_multiplier():
    z = dp_sgd_noise_multiplier(1.0, 1e-5, 400, 0.05, "paper")
    assert z == pytest.approx(C_MA * 0.05 * math.sqrt(400 * math.log(1e5)))
    za = dp_sgd_noise_multiplier(1.0, 1e-5, 400, 0.05, "accountant")
    eps = dp_sgd_epsilon(za, 400, 1e-5, 0.05)
    assert eps <= 1.0 and eps == pytest.approx(1.0, rel=1e-3)
    # the accountant's subset of orders is at most slightly looser than the full grid
    full = epsilon_for(za, 400, 1e-5, sampling_rate=0.05)
    assert full <= eps <= full * 1.03


def test_nbafl_noise_scales():
    c = nbafl_constant(1e-5)
    assert c == pytest.approx(math.sqrt(2 * math.log(1.25e5)))
    nz = nbafl_noise(0.8, 1e-5, 3, SIZES, clip=2.0)
    # uplink: c L Delta_U / eps with Delta_U = 2 W / m_k and L = T = 3 exposures
    assert np.allclose(nz.uplink_std, c * 3 * (2 * 2.0 / np.array(SIZES)) / 0.8)
    assert nz.exposures == 3 and nz.downlink_std == 0.0  # T <= L sqrt(K)
    assert nz.epsilon_accountant == pytest.approx(epsilon_for(c * 3 / 0.8, 3, 1e-5))
    # downlink noise only when T > L sqrt(K): T = 100, L = 10, K = 3
    nz2 = nbafl_noise(0.8, 1e-5, 100, SIZES, exposures=10)
    expected = 2 * c * 1.0 * math.sqrt(100**2 - 10**2 * 3) / (min(SIZES) * 3 * 0.8)
    assert nz2.downlink_std == pytest.approx(expected)
    assert nbafl_noise(0.8, 1e-5, 17, SIZES, exposures=10).downlink_std == 0.0  # 17 < 10 sqrt(3)
    assert nbafl_noise(0.8, 1e-5, 18, SIZES, exposures=10).downlink_std > 0.0
    acc = nbafl_noise(0.8, 1e-5, 3, SIZES, calibration="accountant")
    assert acc.epsilon_accountant == pytest.approx(0.8, rel=1e-3) and acc.downlink_std == 0


def test_validation():
    with pytest.raises(ParameterError, match="epsilon"):
        calibrate_client_noise(0.0, 1e-5, 10, SIZES)
    with pytest.raises(ParameterError, match="mechanism"):
        calibrate_client_noise(1.0, 1e-5, 10, SIZES, mechanism="cauchy")
    with pytest.raises(ParameterError, match="sizes"):
        calibrate_client_noise(1.0, 1e-5, 10, [0, 3])
