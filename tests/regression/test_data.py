import numpy as np
import pytest

from fedprivacy.errors import ParameterError
from fedprivacy.regression.data import (
    data_from_silos,
    heterogeneous_sizes,
    simulate_data,
    true_parameter,
)


def test_true_parameter():
    s = true_parameter(10, "sparse", norm=2.0)
    assert np.count_nonzero(s) == 4 and np.linalg.norm(s) == pytest.approx(2.0)
    d = true_parameter(10, "dense")
    assert np.count_nonzero(d) == 10 and np.linalg.norm(d) == pytest.approx(1.0)
    with pytest.raises(ParameterError, match="truth"):
        true_parameter(10, "medium")


def test_heterogeneous_sizes():
    assert heterogeneous_sizes(4, 100, 0.0).tolist() == [100] * 4
    a = heterogeneous_sizes(200, 150, 5.0, seed=3)
    assert np.array_equal(a, heterogeneous_sizes(200, 150, 5.0, seed=3))
    assert a.min() >= 10 and abs(a.mean() - 150) < 10
    assert 0.8 * 5 * np.sqrt(150) < a.std() < 1.2 * 5 * np.sqrt(150)


def test_replications_do_not_depend_on_batching():
    theta = true_parameter(6, "dense")
    for records in (False, True):
        whole = simulate_data(range(5), [20, 30], theta, records=records, seed=4)
        part = simulate_data([3, 4], [20, 30], theta, records=records, seed=4)
        assert np.array_equal(whole.gram32[3:], part.gram32)
        assert np.array_equal(whole.moment[3:], part.moment)


@pytest.mark.parametrize("n", [8, 30])
def test_bartlett_matches_records_in_distribution(n):
    # E S_k = I and E s_k = theta; Var of s_k: (||theta||^2 + noise^2) / n per coordinate
    p, b = 5, 4000
    theta = true_parameter(p, "sparse")
    fast = simulate_data(range(b), [n], theta, noise_sd=0.5)
    slow = simulate_data(range(b), [n], theta, noise_sd=0.5, records=True)
    for d in (fast, slow):
        assert np.allclose(d.gram.mean(axis=0), np.eye(p), atol=0.03)
        assert np.allclose(d.moment[:, 0].mean(axis=0), theta, atol=0.03)
        var = d.moment[:, 0].var(axis=0)
        assert np.allclose(var, (1.0 + theta**2 + 0.25) / n, rtol=0.15)
    # second moment of the Gram matrix: E tr(S^2) = p (p + n + 1) / n for Wishart
    for d in (fast, slow):
        tr = np.einsum("rij,rji->r", d.gram, d.gram).mean()
        assert tr == pytest.approx(p * (p + n + 1) / n, rel=0.03)


def test_pooled_statistics_and_silos():
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=(m, 3)) for m in (5, 9)]
    ys = [rng.normal(size=m) for m in (5, 9)]
    d = data_from_silos(xs, ys, 4)
    x, y = np.concatenate(xs), np.concatenate(ys)
    assert d.replications == 4 and d.total == 14 and d.sizes.tolist() == [5, 9]
    assert np.allclose(d.gram[2], x.T @ x / 14) and np.allclose(d.moment_pooled[1], x.T @ y / 14)
    assert d.x is not None and d.x.shape == (4, 14, 3)
    with pytest.raises(ParameterError):
        data_from_silos([np.ones((2, 3))], [np.ones(3)], 2)
    with pytest.raises(ParameterError, match="non-finite"):
        data_from_silos([np.full((2, 3), np.nan)], [np.ones(2)], 2)
