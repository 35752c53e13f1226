import numpy as np
import pytest

from fedprivacy.regression.data import simulate_data, true_parameter
from fedprivacy.regression.engine import noisy_gradient_descent, spectral
from fedprivacy.regression.estimators import fgd, ols


def reference(data, lr, noise, clip, norm=2):
    """Plain per-replication loop: every client's gradient, clipped, plus the noise."""
    r, k, p = data.replications, data.clients, data.dimension
    w = data.weights
    final, average, events = np.zeros((r, p)), np.zeros((r, p)), np.zeros(r, dtype=int)
    iterates = np.zeros((r, lr.size, p))
    for b in range(r):
        theta = np.zeros(p)
        grams = data.gram32[b].astype(np.float64)
        for t in range(lr.size):
            g = grams @ theta - data.moment[b]
            nrm = np.linalg.norm(g, ord=norm, axis=1)
            fac = np.ones(k) if clip is None else np.minimum(1.0, clip / nrm)
            events[b] += 0 if clip is None else int((nrm > clip).sum())
            theta = theta - lr[t] * ((w * fac) @ g + (0 if noise is None else noise[b, t]))
            iterates[b, t] = theta
        final[b] = theta
        average[b] = iterates[b].mean(axis=0)
    return final, average, events, iterates


@pytest.fixture(scope="module")
def small():
    theta = true_parameter(12, "sparse", norm=2.0)
    return simulate_data(range(5), [20, 35, 15], theta, noise_sd=0.5, seed=1)


def test_fgd_converges_to_ols(small):
    lr = np.full(3000, 0.2)
    est = fgd(small, lr)
    assert np.allclose(est, ols(small), atol=1e-10)
    # and OLS solves the pooled normal equations
    assert np.allclose(np.einsum("rpq,rq->rp", small.gram, ols(small)), small.moment_pooled)


@pytest.mark.parametrize(("clip", "norm"), [(None, 2), (0.3, 2), (1.0, 2), (0.5, 1)])
def test_vectorised_engine_equals_per_replication_loop(small, clip, norm):
    steps = 150
    lr = 0.25 * np.arange(1, steps + 1) ** -0.3  # a diminishing schedule too
    noise = (np.random.default_rng(2).normal(size=(5, steps, 12)) * 0.05).astype(np.float32)
    run = noisy_gradient_descent(small, lr, noise=noise, clip=clip, norm=norm)
    final, average, events, iterates = reference(small, lr, noise.astype(np.float64), clip, norm)
    assert np.allclose(run.final, final, atol=1e-6)
    # ANA-FGD is exactly the mean of the NA-FGD iterates theta_1 .. theta_T
    assert np.allclose(run.average, average, atol=1e-6)
    assert np.allclose(run.average, iterates.mean(axis=1), atol=1e-6)
    assert np.array_equal(run.clip_events, events)
    if clip == 0.3:
        assert events.min() > 50  # clipping frequent: exercises the exact-step path


def test_spectral_ols_singular():
    theta = true_parameter(8, "sparse")
    d = simulate_data(range(2), [3], theta)  # N = 3 < p = 8: minimum-norm solution
    sp = spectral(d)
    assert np.allclose(np.einsum("rpq,rq->rp", d.gram, sp.ols), d.moment_pooled, atol=1e-6)


def test_runs_sharing_designs_equal_separate_runs(small):
    from fedprivacy.regression.data import true_parameter as tp
    from fedprivacy.regression.engine import noisy_gradient_descent_runs

    other = small.with_theta(tp(12, "dense", norm=1.5))
    sp1, sp2 = spectral(small), spectral(other)
    steps = 120
    lr = np.full(steps, 0.3)
    rng = np.random.default_rng(4)
    noises = [(rng.normal(size=(5, steps, 12)) * s).astype(np.float32) for s in (0.01, 0.1, 0.05)]
    runs = noisy_gradient_descent_runs(
        small, lr, [small.moment, other.moment, small.moment], [sp1.ols, sp2.ols, sp1.ols],
        noises, clip=0.6, spec=sp1,
    )  # fmt: skip
    for run, d, sp, nz in zip(runs, (small, other, small), (sp1, sp2, sp1), noises, strict=True):
        one = noisy_gradient_descent(d, lr, noise=nz, clip=0.6, spec=sp)
        assert np.allclose(run.final, one.final, atol=1e-6)
        assert np.allclose(run.average, one.average, atol=1e-6)
        assert np.array_equal(run.clip_events, one.clip_events)
