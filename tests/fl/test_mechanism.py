"""DP mechanisms around aggregation: clipping, weights, and the noise actually released."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedprivacy.dp.party_noise import PartyNoise
from fedprivacy.errors import ParameterError
from fedprivacy.fl.aggregation import AggregateOutcome
from fedprivacy.fl.mechanism import (
    MECHANISMS,
    CentralGaussian,
    DistributedDiscreteGaussian,
    NoMechanism,
    make_mechanism,
)


def test_registry_and_options() -> None:
    assert set(MECHANISMS) == {"none", "central", "distributed"}
    assert isinstance(make_mechanism("none"), NoMechanism)
    central = make_mechanism("central", noise_multiplier=0.8)
    assert isinstance(central, CentralGaussian) and central.clip == 1.0
    with pytest.raises(ParameterError, match="noise_multiplier"):
        make_mechanism("central")
    with pytest.raises(ParameterError, match="clip"):
        make_mechanism("none", clip=2.0)
    with pytest.raises(ParameterError, match="dp"):
        make_mechanism("local", noise_multiplier=1.0)
    with pytest.raises(ParameterError, match="noise_multiplier.*--dp distributed"):
        make_mechanism("distributed")


def test_distributed_clips_like_central_and_releases_the_noisy_aggregate_as_is() -> None:
    rng = np.random.default_rng(1)
    updates = {u: (rng.standard_normal(20) * 3).astype(np.float32) for u in range(4)}
    weights = {u: 0.5 for u in updates}
    d = make_mechanism("distributed", noise_multiplier=1.5, clip=0.5)
    c = CentralGaussian(noise_multiplier=1.5, clip=0.5)
    assert isinstance(d, DistributedDiscreteGaussian) and d.adds_noise_in_aggregation
    (du, dw), (cu, cw) = d.prepare(updates, weights), c.prepare(updates, weights)
    assert dw == cw and all(np.array_equal(du[u], cu[u]) for u in updates)
    assert d.party_noise == PartyNoise(1.5, 0.5)
    mean = rng.standard_normal(20)
    assert np.array_equal(d.release(mean, 4), mean)
    # the accountant is given the noise really in the aggregate, never the planned one
    outcome = AggregateOutcome((1, 2, 3), mean, mean * 3, 3.0, 0, 0.0, noise_multiplier=2.25)
    assert d.accounted_noise(outcome) == 2.25
    assert c.accounted_noise(outcome) == 1.5
    with pytest.raises(ParameterError, match="secure aggregator"):
        d.accounted_noise(AggregateOutcome((1, 2, 3), mean, mean * 3, 3.0, 0, 0.0))


def test_central_clips_every_update_and_weighs_them_equally() -> None:
    rng = np.random.default_rng(0)
    updates = {u: (rng.standard_normal(50) * (u + 1)).astype(np.float32) for u in range(6)}
    m = CentralGaussian(noise_multiplier=1.0, clip=2.0)
    clipped, weights = m.prepare(updates, {u: 0.1 * (u + 1) for u in updates})
    assert set(weights.values()) == {1.0}
    for u, v in clipped.items():
        norm = float(np.linalg.norm(updates[u]))
        assert np.linalg.norm(v) <= 2.0 + 1e-5
        if norm <= 2.0:
            np.testing.assert_allclose(v, updates[u], rtol=1e-6)


def test_released_noise_has_the_calibrated_variance() -> None:
    # z C on the sum of k clipped updates is z C / k on their mean
    z, c, k, d = 1.5, 0.4, 8, 20_000
    m = CentralGaussian(noise_multiplier=z, clip=c)
    mean = np.linspace(-1.0, 1.0, d)
    noise = m.release(mean, k) - mean
    sigma = z * c / k
    # chi-square test of the variance at the 1e-6 level, both sides
    statistic = float(np.sum(noise**2) / sigma**2)
    assert stats.chi2.sf(statistic, d) > 1e-6 and stats.chi2.cdf(statistic, d) > 1e-6
    assert abs(float(noise.mean())) < 6 * sigma / np.sqrt(d)


def test_noise_is_fresh_each_release_and_not_from_the_run_seed() -> None:
    a = CentralGaussian(noise_multiplier=1.0, clip=1.0)
    b = CentralGaussian(noise_multiplier=1.0, clip=1.0)
    zero = np.zeros(16)
    assert not np.array_equal(a.release(zero, 1), a.release(zero, 1))
    assert not np.array_equal(a.release(zero, 1), b.release(zero, 1))


def test_none_changes_nothing() -> None:
    u = {1: np.arange(3, dtype=np.float32)}
    m = NoMechanism()
    assert m.prepare(u, {1: 0.3}) == (u, {1: 0.3})
    mean = np.ones(3)
    assert m.release(mean, 2) is mean


@pytest.mark.parametrize("name", ["central", "distributed"])
def test_clipped_updates_are_within_the_clip_in_the_dtype_sent(name: str) -> None:
    """Float32 rounding after an L2 clip could leave a norm above C (by up to ~3e-8)."""
    rng = np.random.default_rng(8)
    mechanism = make_mechanism(name, noise_multiplier=1.0, clip=0.1)
    rows = {u: rng.normal(size=500).astype(np.float32) * 10 for u in range(200)}
    # adversarial: entries just below a float32 rounding boundary, so every cast rounds up
    tie = np.float32(0.3) + np.float32(np.finfo(np.float32).eps) * 0.49
    rows.update({200 + k: np.full(333 + k, tie, dtype=np.float32) for k in range(50)})
    over = 0
    for u, row in rows.items():
        out, _ = mechanism.prepare({u: row}, {u: 1.0})
        assert out[u].dtype == np.float32
        norm = float(np.linalg.norm(out[u].astype(np.float64)))
        assert norm <= 0.1, (u, norm - 0.1)
        old = row.astype(np.float64) * (0.1 / np.linalg.norm(row.astype(np.float64)))
        over += float(np.linalg.norm(old.astype(np.float32).astype(np.float64))) > 0.1
    assert over > 0  # the old cast-after-clip exceeds C on these inputs
