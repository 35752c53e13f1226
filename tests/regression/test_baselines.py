import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.regression.baselines import bernoulli_positions, dp_sgd, nbafl
from fedprivacy.regression.data import data_from_silos, simulate_data, true_parameter
from fedprivacy.regression.privacy import dp_sgd_epsilon


@pytest.fixture(scope="module")
def records():
    theta = true_parameter(6, "sparse")
    return simulate_data(range(3), [20, 30], theta, noise_sd=0.5, records=True, seed=3)


def test_dp_sgd_per_sample_clipping_one_step():
    # one record with a huge gradient: per-sample clipping caps its contribution at C
    xs = [np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[10.0, 0.0]])]
    ys = [np.array([0.5, -0.2]), np.array([100.0])]
    data = data_from_silos(xs, ys, 2)
    res = dp_sgd(data, np.array([0.3]), epsilon=1e9, sampling_rate=1.0, clip=1.0)
    # theta_0 = 0: per-sample gradients -y_i x_i, norms 0.5, 0.2, 1000 -> only the last clipped
    g = np.array([[-0.5, 0.0], [0.0, 0.2], [-1.0, 0.0]])  # the last one scaled to norm 1
    expected = -0.3 / 3 * g.sum(axis=0)  # alpha / (q N) * sum
    assert np.allclose(res.estimate, expected, atol=1e-4)
    assert res.clipped_fraction == pytest.approx(1 / 3)


def test_dp_sgd_noise_scale_and_accounting(records):
    lr = np.full(40, 0.2)
    res = dp_sgd(records, lr, epsilon=2.0, epochs=4.0, calibration="accountant")
    assert res.sampling_rate == pytest.approx(0.1) and res.steps == 40
    assert res.epsilon_accountant == pytest.approx(2.0, rel=1e-3)
    assert res.epsilon_accountant == pytest.approx(
        dp_sgd_epsilon(res.noise_multiplier, 40, 1e-5, 0.1)
    )
    # with (almost) no noise and every record, DP-SGD heads to the truth
    quiet = dp_sgd(records, np.full(400, 0.5), epsilon=1e9, sampling_rate=1.0)
    assert np.all(np.linalg.norm(quiet.estimate - records.theta, axis=1) < 0.5)
    with pytest.raises(ParameterError, match="records"):
        dp_sgd(simulate_data(range(2), [20], records.theta), lr, epsilon=1.0)


def test_dp_sgd_noise_variance():
    # zero data: the update is -alpha / (q N) * (sum of K client noises of std z C)
    xs = [np.zeros((10, 3)), np.zeros((10, 3))]
    ys = [np.zeros(10), np.zeros(10)]
    data = data_from_silos(xs, ys, 600)
    res = dp_sgd(data, np.array([1.0]), epsilon=1.0, sampling_rate=0.5, clip=2.0)
    z = res.noise_multiplier
    expected = (1.0 / (0.5 * 20)) ** 2 * 2 * (z * 2.0) ** 2
    ratio = res.estimate.var() / expected
    assert abs(ratio - 1) < 5 * np.sqrt(2 / res.estimate.size)


def test_bernoulli_positions():
    gen = np.random.default_rng(0)
    pos = bernoulli_positions(gen, 0.01, 200_000)
    assert np.all(np.diff(pos) > 0) and pos[-1] < 200_000
    assert abs(pos.size - 2000) < 5 * np.sqrt(2000)
    assert bernoulli_positions(gen, 1.0, 5).tolist() == [0, 1, 2, 3, 4]


def test_nbafl_noise_and_clipping(records):
    res = nbafl(records, epsilon=1.0, rounds=2, local_steps=5, clip=0.5)
    assert res.noise.exposures == 2 and res.noise.downlink_std == 0.0
    m = records.sizes
    c = np.sqrt(2 * np.log(1.25e5))
    assert np.allclose(res.noise.uplink_std, c * 2 * (2 * 0.5 / m) / 1.0)
    # without noise the global model is an average of clipped local models: norm <= W
    quiet = nbafl(records, epsilon=1e12, rounds=3, local_steps=5, clip=0.5)
    assert np.all(np.linalg.norm(quiet.estimate, axis=1) <= 0.5 + 1e-6)
    assert quiet.clipped_fraction > 0
    # downlink noise appears when T > L sqrt(K)
    down = nbafl(records, epsilon=1.0, rounds=4, local_steps=1, exposures=2)
    assert down.noise.downlink_std > 0


def test_budgets_at_once_equal_separate_runs(records):
    from fedprivacy.regression.baselines import dp_sgd_budgets, nbafl_budgets

    lr = np.full(30, 0.3)
    both = dp_sgd_budgets(records, lr, epsilons=(0.5, 3.0), sampling_rate=0.2, seed=5)
    for e, res in zip((0.5, 3.0), both, strict=True):
        one = dp_sgd(records, lr, epsilon=e, sampling_rate=0.2, seed=5)
        assert np.allclose(res.estimate, one.estimate, atol=1e-5)
        assert res.clipped_fraction == one.clipped_fraction
    nb = nbafl_budgets(records, epsilons=(0.5, 3.0), rounds=2, seed=5)
    for e, res in zip((0.5, 3.0), nb, strict=True):
        one = nbafl(records, epsilon=e, rounds=2, seed=5)
        assert np.allclose(res.estimate, one.estimate, atol=1e-5)
