from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fedprivacy.dp.mechanisms import (
    clip_l1,
    clip_l2,
    clip_rows_l1,
    clip_rows_l2,
    gaussian_mechanism,
    gaussian_std,
    laplace_mechanism,
    laplace_scale,
)
from fedprivacy.errors import ParameterError


def test_clip_l2_scales_long_vector_to_the_bound() -> None:
    clipped, scale = clip_l2([3.0, 4.0], 1.0)
    assert scale == pytest.approx(0.2)
    np.testing.assert_allclose(clipped, [0.6, 0.8])
    assert np.linalg.norm(clipped) == pytest.approx(1.0, rel=1e-12)


def test_clip_l2_keeps_short_and_zero_vectors() -> None:
    v = np.array([0.1, -0.2, 0.3])
    clipped, scale = clip_l2(v, 5.0)
    assert scale == 1.0
    np.testing.assert_array_equal(clipped, v)
    zero, scale0 = clip_l2(np.zeros(4), 1.0)
    assert scale0 == 1.0 and not np.any(zero)


def test_clip_l2_treats_any_shape_as_one_vector() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 5)) * 10
    clipped, scale = clip_l2(x, 2.0)
    assert clipped.shape == x.shape
    assert np.linalg.norm(clipped.ravel()) == pytest.approx(2.0, rel=1e-12)
    np.testing.assert_allclose(clipped, x * scale)
    assert scale == pytest.approx(2.0 / np.linalg.norm(x.ravel()))


def test_clip_l1() -> None:
    clipped, scale = clip_l1([1.0, -3.0], 2.0)
    assert scale == pytest.approx(0.5)
    np.testing.assert_allclose(clipped, [0.5, -1.5])
    same, one = clip_l1([0.5, -0.5], 2.0)
    assert one == 1.0
    np.testing.assert_array_equal(same, [0.5, -0.5])


@pytest.mark.parametrize(("clip", "order"), [(clip_rows_l2, 2), (clip_rows_l1, 1)])
def test_row_wise_clipping(clip: object, order: int) -> None:
    rng = np.random.default_rng(1)
    m = rng.normal(size=(200, 7)) * rng.uniform(0.01, 3, size=(200, 1))
    m[5] = 0.0
    bound = 1.0
    clipped, scales = clip(m, bound)  # type: ignore[operator]
    norms = np.linalg.norm(m, ord=order, axis=1)
    new_norms = np.linalg.norm(clipped, ord=order, axis=1)
    assert np.all(new_norms <= bound * (1 + 1e-12))
    over = norms > bound
    assert over.any() and (~over).any()
    np.testing.assert_allclose(new_norms[over], bound, rtol=1e-12)
    np.testing.assert_array_equal(clipped[~over], m[~over])
    np.testing.assert_allclose(scales, np.where(over, bound / np.maximum(norms, 1e-300), 1.0))
    np.testing.assert_allclose(clipped, m * scales[:, None])
    assert scales[5] == 1.0


def test_clipping_rejects_bad_input() -> None:
    with pytest.raises(ParameterError, match="bound"):
        clip_l2([1.0], 0.0)
    with pytest.raises(ParameterError, match="bound"):
        clip_l1([1.0], -1.0)
    with pytest.raises(ParameterError, match="finite"):
        clip_l2([1.0, np.nan], 1.0)
    with pytest.raises(ParameterError, match="2-D"):
        clip_rows_l2([1.0, 2.0], 1.0)


def test_gaussian_mechanism_noise_statistics() -> None:
    n = 200_000
    value = np.full(n, 7.0)
    out = gaussian_mechanism(
        value, sensitivity=2.0, noise_multiplier=1.5, rng=np.random.default_rng(3)
    )
    noise = out - value
    std = gaussian_std(2.0, 1.5)
    assert std == 3.0
    # standard error of the mean is std / sqrt(n) ~ 0.0067; of the std ~ std / sqrt(2n) ~ 0.0047
    assert abs(noise.mean()) < 4 * std / np.sqrt(n)
    assert noise.std() == pytest.approx(std, rel=0.01)
    assert stats.kstest(noise / std, "norm").pvalue > 1e-3


def test_gaussian_mechanism_is_seeded_and_keeps_shape() -> None:
    x = np.arange(6.0).reshape(2, 3)
    a = gaussian_mechanism(x, sensitivity=1.0, noise_multiplier=1.0, rng=np.random.default_rng(5))
    b = gaussian_mechanism(x, sensitivity=1.0, noise_multiplier=1.0, rng=np.random.default_rng(5))
    c = gaussian_mechanism(x, sensitivity=1.0, noise_multiplier=1.0, rng=np.random.default_rng(6))
    assert a.shape == (2, 3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    scalar = gaussian_mechanism(
        1.0, sensitivity=1.0, noise_multiplier=1.0, rng=np.random.default_rng(0)
    )
    assert scalar.shape == ()


def test_laplace_mechanism_noise_statistics() -> None:
    n = 200_000
    out = laplace_mechanism(np.zeros(n), sensitivity=1.0, epsilon=0.5, rng=np.random.default_rng(4))
    b = laplace_scale(1.0, 0.5)
    assert b == 2.0
    assert abs(out.mean()) < 4 * np.sqrt(2) * b / np.sqrt(n)
    assert out.var() == pytest.approx(2 * b**2, rel=0.02)
    assert np.mean(np.abs(out)) == pytest.approx(b, rel=0.01)  # E|X| = b for Laplace(0, b)
    assert stats.kstest(out, "laplace", args=(0.0, b)).pvalue > 1e-3


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sensitivity": 1.0, "noise_multiplier": 0.0}, "noise_multiplier"),
        ({"sensitivity": 1.0, "noise_multiplier": -1.0}, "noise_multiplier"),
        ({"sensitivity": 0.0, "noise_multiplier": 1.0}, "sensitivity"),
        ({"sensitivity": 1.0, "noise_multiplier": float("inf")}, "noise_multiplier"),
    ],
)
def test_gaussian_mechanism_rejects_bad_parameters(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(ParameterError, match=name):
        gaussian_mechanism([0.0], rng=np.random.default_rng(0), **kwargs)


def test_mechanisms_require_a_generator() -> None:
    with pytest.raises(ParameterError, match="rng"):
        gaussian_mechanism(
            [0.0],
            sensitivity=1.0,
            noise_multiplier=1.0,
            rng=np.random.RandomState(0),  # type: ignore[arg-type]
        )
    with pytest.raises(ParameterError, match="epsilon"):
        laplace_mechanism([0.0], sensitivity=1.0, epsilon=0.0, rng=np.random.default_rng(0))
