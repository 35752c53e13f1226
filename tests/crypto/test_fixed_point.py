from __future__ import annotations

import math

import numpy as np
import pytest

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.crypto.prg import reduce
from fedprivacy.errors import OverflowRiskError, ParameterError


def sum_in_field(codec: FixedPointCodec, encodings: list[np.ndarray]) -> np.ndarray:
    acc = np.zeros_like(encodings[0])
    for e in encodings:
        np.add(acc, e, out=acc)  # wraps modulo 2**32 or 2**64
    return reduce(acc, codec.bits)


@pytest.mark.parametrize("bits", [16, 32, 48, 64])
@pytest.mark.parametrize("summands", [1, 7])
def test_sum_round_trip_is_exact(bits: int, summands: int) -> None:
    clip = 1.5
    codec = FixedPointCodec.for_sum(clip, summands, bits)
    rng = np.random.default_rng(bits * 100 + summands)
    xs = [rng.uniform(-clip, clip, size=64) for _ in range(summands)]
    for x in xs:  # extreme values in every vector
        x[:4] = [clip, -clip, clip, -clip]
    xs.append(np.full(64, clip))
    xs.append(np.full(64, -clip))
    for group in (xs[:summands], [xs[-2]] * summands, [xs[-1]] * summands):
        qs = [codec.quantize(x, rng) for x in group]
        encodings = [codec.to_field(q) for q in qs]
        assert all(e.dtype == codec.dtype for e in encodings)
        total = sum_in_field(codec, encodings)
        expected = np.sum(qs, axis=0, dtype=np.int64)
        np.testing.assert_array_equal(codec.decode_integers(total), expected)
        decoded = codec.decode_sum(total, summands)
        assert decoded.dtype == np.float64
        np.testing.assert_allclose(
            decoded, np.sum(group, axis=0), rtol=0, atol=summands / codec.scale + 1e-9
        )
    # The extremes reach the full range.
    top = codec.quantize(np.full(8, clip), rng)
    assert np.all(top == codec.max_magnitude)
    bottom = codec.quantize(np.full(8, -clip), rng)
    assert np.all(bottom == -codec.max_magnitude)


def test_bits64_signed_interpretation_is_exact() -> None:
    codec = FixedPointCodec(clip=1.0, scale=2.0**62 - 2.0**10, bits=64)
    q = np.array([codec.max_magnitude, -codec.max_magnitude, -1, 0, 1], dtype=np.int64)
    field = codec.to_field(q)
    assert field.dtype == np.uint64
    assert int(field[2]) == 2**64 - 1
    np.testing.assert_array_equal(codec.decode_integers(field), q)


@pytest.mark.parametrize("bits", [2, 16, 31, 32, 33, 63, 64])
def test_to_field_and_decode_integers(bits: int) -> None:
    codec = FixedPointCodec(clip=1.0, scale=1.0, bits=bits)
    half = 2 ** (bits - 1)
    q = np.array([0, 1, -1, half - 1, -half], dtype=np.int64)
    field = codec.to_field(q)
    assert field.dtype == codec.dtype
    assert [int(v) for v in field] == [0, 1, 2**bits - 1, half - 1, half]
    np.testing.assert_array_equal(codec.decode_integers(field), q)
    # Unreduced input (e.g. a raw wrapped sum) is reduced first.
    raw = field.astype(np.uint64) + np.uint64(2**bits if bits < 64 else 0)
    np.testing.assert_array_equal(codec.decode_integers(raw), q)


@pytest.mark.parametrize("value", [0.3, -0.3, 2.7, -4.05])
def test_stochastic_rounding_is_unbiased(value: float) -> None:
    codec = FixedPointCodec(clip=5.0, scale=1.0, bits=16)
    rng = np.random.default_rng(1)
    n = 200_000
    q = codec.quantize(np.full(n, value), rng)
    frac = value - math.floor(value)
    assert set(np.unique(q).tolist()) == {math.floor(value), math.floor(value) + 1}
    se = math.sqrt(frac * (1 - frac) / n)
    assert abs(q.mean() - value) < 5 * se


def test_stochastic_rounding_unbiased_with_fractional_scale() -> None:
    codec = FixedPointCodec(clip=100.0, scale=2.0**-3, bits=32)
    rng = np.random.default_rng(2)
    value = 0.3 / codec.scale
    q = codec.quantize(np.full(100_000, value), rng)
    se = math.sqrt(0.3 * 0.7 / q.size)
    assert abs(q.mean() - 0.3) < 5 * se


@pytest.mark.parametrize(
    ("clip", "scale", "bits"), [(1.0, 1.0, 8), (0.5, 1000.0, 32), (3.0, 2.0**40, 64)]
)
def test_capacity_boundary(clip: float, scale: float, bits: int) -> None:
    codec = FixedPointCodec(clip=clip, scale=scale, bits=bits)
    cap = codec.capacity()
    assert cap >= 1
    assert (
        cap * (2 * codec.max_magnitude + 1) <= 2**bits < (cap + 1) * (2 * codec.max_magnitude + 1)
    )
    codec.check_capacity(cap)
    codec.check_capacity(1)
    with pytest.raises(OverflowRiskError) as info:
        codec.check_capacity(cap + 1)
    assert info.value.name == "summands"
    assert str(cap) in str(info.value)
    with pytest.raises(OverflowRiskError):
        codec.decode_sum(np.zeros(3, dtype=codec.dtype), cap + 1)
    with pytest.raises(ParameterError):
        codec.check_capacity(0)


def test_max_magnitude() -> None:
    assert FixedPointCodec(clip=1.0, scale=3.0, bits=16).max_magnitude == 3
    assert FixedPointCodec(clip=1.1, scale=3.0, bits=16).max_magnitude == 4
    # 2 * 3 + 1 = 7 values per entry: 2**8 // 7 = 36.
    assert FixedPointCodec(clip=1.0, scale=3.0, bits=8).capacity() == 36


@pytest.mark.parametrize(
    ("clip", "summands", "bits"),
    [(1.0, 1, 2), (1.0, 1000, 32), (0.01, 3, 16), (1e6, 100, 32), (1e4, 10, 16), (3.0, 10**6, 64)],
)
def test_for_sum_picks_largest_power_of_two(clip: float, summands: int, bits: int) -> None:
    codec = FixedPointCodec.for_sum(clip, summands, bits)
    assert codec.clip == clip
    assert codec.bits == bits
    mantissa, _ = math.frexp(codec.scale)
    assert mantissa == 0.5  # a power of two
    assert codec.scale >= 2.0**-20
    codec.check_capacity(summands)
    doubled = FixedPointCodec(clip=clip, scale=2 * codec.scale, bits=bits)
    with pytest.raises(OverflowRiskError):
        doubled.check_capacity(summands)


def test_for_sum_fractional_scale() -> None:
    codec = FixedPointCodec.for_sum(1e4, 10, 16)
    assert codec.scale < 1


def test_for_sum_impossible() -> None:
    with pytest.raises(OverflowRiskError):
        FixedPointCodec.for_sum(1e11, 10, 16)
    with pytest.raises(ParameterError):
        FixedPointCodec.for_sum(1.0, 0, 16)


def test_quantize_rejects_bad_inputs() -> None:
    codec = FixedPointCodec(clip=1.0, scale=8.0, bits=16)
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError, match="2 entries exceed"):
        codec.quantize(np.array([0.0, 1.5, -2.0, 1.0]), rng)
    with pytest.raises(ParameterError, match="2.0"):
        codec.quantize(np.array([0.0, 1.5, -2.0, 1.0]), rng)
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ParameterError):
            codec.quantize(np.array([0.0, bad]), rng)
    with pytest.raises(ParameterError):
        codec.encode(np.array([np.nan]), rng)
    with pytest.raises(ParameterError):
        codec.to_field(np.array([0.5]))


def test_quantize_requires_single_entry_to_fit() -> None:
    codec = FixedPointCodec(clip=1.0, scale=1000.0, bits=8)
    assert codec.capacity() == 0
    with pytest.raises(OverflowRiskError):
        codec.encode(np.zeros(3), np.random.default_rng(0))


def test_encode_shape_and_dtype() -> None:
    codec = FixedPointCodec(clip=2.0, scale=2.0**10, bits=40)
    x = np.linspace(-2.0, 2.0, 12).reshape(3, 4)
    enc = codec.encode(x, np.random.default_rng(0))
    assert enc.shape == (3, 4)
    assert enc.dtype == np.uint64
    assert int(enc.max()) < 2**40


@pytest.mark.parametrize(
    ("clip", "scale", "bits"),
    [
        (0.0, 1.0, 16),
        (-1.0, 1.0, 16),
        (math.inf, 1.0, 16),
        (math.nan, 1.0, 16),
        (1.0, 0.0, 16),
        (1.0, math.inf, 16),
        (1.0, 1.0, 1),
        (1.0, 1.0, 65),
        (1e300, 1e300, 64),
    ],
)
def test_bad_parameters(clip: float, scale: float, bits: int) -> None:
    with pytest.raises(ParameterError):
        FixedPointCodec(clip=clip, scale=scale, bits=bits)
