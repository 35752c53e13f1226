import numpy as np
import pytest

from fedprivacy.regression.data import RegressionData, simulate_data, true_parameter
from fedprivacy.regression.estimators import ana_fgd, na_fgd
from fedprivacy.regression.noise import aggregated_noise
from fedprivacy.regression.privacy import C_MA, calibrate_client_noise

SIZES = np.array([30, 60, 90])


def zero_data(reps: int, p: int) -> RegressionData:
    """Clients whose gradients are always 0: NA-FGD's iterates are the accumulated noise."""
    k = SIZES.size
    return RegressionData(
        gram32=np.zeros((reps, k, p, p), dtype=np.float32),
        moment=np.zeros((reps, k, p)),
        sizes=SIZES,
        gram=np.zeros((reps, p, p)),
        moment_pooled=np.zeros((reps, p)),
    )


def test_na_fgd_noise_has_the_calibrated_variance():
    reps, p, steps, lr = 400, 6, 50, 0.3
    res = na_fgd(zero_data(reps, p), np.full(steps, lr), epsilon=1.0, delta=1e-5, seed=11)
    # sigma_k = c_MA C sqrt(T log(1/delta)) / (epsilon n_k); the server adds sum_k pi_k xi_k
    sigma = C_MA * np.sqrt(steps * np.log(1e5)) / SIZES
    pi = SIZES / SIZES.sum()
    agg_var = np.sum(pi**2 * sigma**2)
    assert res.noise.aggregate_variance(pi) == pytest.approx(agg_var)
    # theta_T = -alpha sum_t xi_t: variance alpha^2 T agg_var per coordinate
    sample = res.final.ravel()
    expected = lr**2 * steps * agg_var
    ratio = sample.var() / expected
    # chi-square: var of the ratio is 2 / (reps p); fixed seed, 5 standard errors
    assert abs(ratio - 1) < 5 * np.sqrt(2 / sample.size)
    assert abs(sample.mean()) < 5 * np.sqrt(expected / sample.size)
    # the noise of one iteration, directly
    xi = aggregated_noise(np.arange(200), 40, p, res.noise, pi, seed=3).astype(np.float64)
    assert abs(xi.var() / agg_var - 1) < 5 * np.sqrt(2 / xi.size)


def test_laplace_noise_variance_and_shape():
    noise = calibrate_client_noise(1.0, 1e-5, 30, SIZES, mechanism="laplace")
    pi = SIZES / SIZES.sum()
    xi = aggregated_noise(np.arange(300), 30, 8, noise, pi, seed=5).astype(np.float64).ravel()
    var = 2 * np.sum(pi**2 * noise.scales**2)
    assert abs(xi.var() / var - 1) < 0.03
    # a sum of K = 3 equal Laplace terms has excess kurtosis 3 / K = 1
    kurt = np.mean(xi**4) / xi.var() ** 2 - 3
    assert 0.8 < kurt < 1.2
    # unequal pi_k b_k: drawn term by term, same variance formula
    odd = calibrate_client_noise(1.0, 1e-5, 30, SIZES, mechanism="laplace")
    w = np.array([0.5, 0.3, 0.2])
    xi2 = aggregated_noise(np.arange(300), 30, 8, odd, w, seed=6).astype(np.float64)
    assert abs(xi2.var() / (2 * np.sum(w**2 * odd.scales**2)) - 1) < 0.03


def test_laplace_path_clips_with_the_l1_norm():
    # gradients whose L2 norm is below C but L1 norm above: only the Laplace path clips
    theta = true_parameter(30, "dense", norm=0.6)
    data = simulate_data(range(3), [200, 200], theta, noise_sd=0.1, seed=2)
    lr = np.full(20, 0.2)
    gauss = na_fgd(data, lr, epsilon=1e6, clip=1.0)
    lap = na_fgd(data, lr, epsilon=1e6, clip=1.0, mechanism="laplace")
    assert gauss.run.clip_events.sum() == 0
    assert lap.run.clip_events.sum() > 0
    assert lap.noise.mechanism == "laplace"


def test_vectorised_over_replications_equals_one_at_a_time():
    theta = true_parameter(10, "sparse")
    data = simulate_data(range(4), [25, 40, 30], theta, seed=8)
    lr = np.full(120, 0.25)
    whole = na_fgd(data, lr, epsilon=0.5, seed=8)
    for b in range(4):
        one = na_fgd(data.select(np.array([b])), lr, epsilon=0.5, seed=8, reps=np.array([b]))
        assert np.allclose(one.final[0], whole.final[b], atol=1e-9)
        assert np.allclose(one.average[0], whole.average[b], atol=1e-9)
    assert np.allclose(ana_fgd(data, lr, epsilon=0.5, seed=8), whole.average)
