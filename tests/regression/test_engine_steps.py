import numpy as np
import pytest

from fedprivacy.regression.data import simulate_data, true_parameter
from fedprivacy.regression.engine import noisy_gradient_descent, spectral
from fedprivacy.regression.engine_steps import (
    Outputs,
    Pace,
    StepSettings,
    WorkingSet,
    exact_burst,
    speculative_block,
)


@pytest.fixture(scope="module")
def small():
    theta = true_parameter(6, "dense", norm=2.0)
    return simulate_data(range(4), [25, 40, 30], theta, noise_sd=0.5, seed=3)


def start(data, noise=None):
    sp = spectral(data)
    ols = sp.ols[:, None, :]
    mom32 = data.moment.astype(np.float32)[:, None]
    return WorkingSet.start(
        sp.eigenvalues, sp.eigenvectors, data.gram32, ols, mom32, noise, np.zeros(data.dimension)
    )


def settings(data, lrs, clip):
    w = data.weights
    return StepSettings(lrs, w, w.astype(np.float32), clip, 2, lrs.size)


def test_pace_halves_doubles_and_caps():
    pace = Pace(block=8, cap=16)
    clipped, active = np.ones((2, 2), bool), np.ones((2, 2), bool)
    pace.after_block(clipped, active)  # everyone clipped: halve
    assert pace.block == 4
    pace.after_block(~clipped, active)  # no one clipped: double, burst back to 8
    pace.after_block(~clipped, active)
    pace.after_block(~clipped, active)
    assert (pace.block, pace.burst) == (16, 8)  # capped
    some = np.array([[True, False], [False, False]])  # 1 of 4: neither halve nor double
    pace.after_block(some, active)
    assert pace.block == 16
    for _ in range(10):
        pace.after_burst()
    assert (pace.block, pace.burst) == (2, 1024)


def test_block_and_burst_agree(small):
    """A speculative block (eigenbasis, up to the first clipped step) and exact bursts agree."""
    lrs = np.full(40, 0.2)
    noise = np.random.default_rng(1).normal(size=(4, 1, 40, 6)) * 3.0  # clips now and then
    s = settings(small, lrs, clip=4.0)
    by_block = start(small, noise)
    speculative_block(by_block, s, Pace(block=16, cap=16))
    t = by_block.t[:, 0]
    assert len(set(t.tolist())) > 1 and t.max() == 16  # stopped at different iterations
    for r, steps in enumerate(t.tolist()):
        by_burst = start(small, noise)
        pace = Pace(block=1, cap=1, burst=steps)
        exact_burst(by_burst, s, pace)
        assert by_burst.t[r, 0] == steps
        assert pace.block == 2
        assert np.allclose(by_block.z[r], by_burst.z[r], atol=1e-6)
        assert by_block.cevents[r, 0] == by_burst.cevents[r, 0]
        assert by_block.csteps[r, 0] == by_burst.csteps[r, 0]
        # ANA-FGD's running sums: in the eigenbasis (block) and in theta (burst)
        block_sum = by_block.vec[r] @ by_block.zsum[r, 0] + steps * by_block.ols[r, 0]
        assert np.allclose(block_sum, by_burst.thsum[r, 0], atol=1e-5)
        assert by_burst.nexact[r, 0] == steps


def test_keep_and_store_move_whole_replications(small):
    ws = start(small)
    ws.z = np.arange(ws.z.size, dtype=np.float64).reshape(ws.z.shape)
    ws.t[:] = [[5], [6], [7], [8]]
    out = Outputs.empty(4, 1, small.dimension)
    done = np.array([True, False, True, False])
    out.store(ws, done)
    expected = ws.ols + np.einsum("rpq,rmq->rmp", ws.vec, ws.z)
    assert np.array_equal(out.final[[0, 2]], expected[done])
    ws.keep(~done)
    assert ws.ids.tolist() == [1, 3]
    assert ws.t[:, 0].tolist() == [6, 8]
    assert ws.gram32.shape[0] == ws.vec.shape[0] == ws.mom32.shape[0] == 2


@pytest.mark.parametrize("clip", [None, 0.3, 2.0])
def test_result_does_not_depend_on_the_blocking(small, clip):
    lrs = 0.3 * np.arange(1, 91) ** -0.2
    noise = np.random.default_rng(5).normal(size=(4, 90, 6)) * 0.1
    runs = [
        noisy_gradient_descent(small, lrs, noise=noise, clip=clip, max_block=mb)
        for mb in (1, 3, 64)
    ]
    for run in runs[1:]:
        assert np.allclose(run.final, runs[0].final, atol=1e-6)
        assert np.allclose(run.average, runs[0].average, atol=1e-6)
        assert np.array_equal(run.clip_events, runs[0].clip_events)
        assert np.array_equal(run.clipped_steps, runs[0].clipped_steps)
