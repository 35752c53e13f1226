"""Distributed DP's grid noise: over-provisioning, sensitivity, wrap-around room, modular noise."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.dp.distributed_discrete import NonNegligibleTauError
from fedprivacy.dp.noise_modes import NoiseDraw
from fedprivacy.dp.party_noise import (
    HEADROOM_SIGMAS,
    MIN_PARTIES,
    PartyNoise,
    add_grid_noise,
    draw_party_noise,
)
from fedprivacy.errors import ParameterError
from fedprivacy.secagg.params import MIN_THRESHOLD


def test_the_smallest_party_count_is_the_protocols_smallest_threshold() -> None:
    assert MIN_PARTIES == MIN_THRESHOLD


@pytest.mark.parametrize("z", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("threshold", [2, 5, 9])
def test_any_unmaskable_sum_holds_at_least_the_target_noise(z: float, threshold: int) -> None:
    plan = PartyNoise(noise_multiplier=z, clip=0.7)
    codec = plan.codec(0.7, per_round=12, bits=32)
    rn = plan.round_noise(codec, 0.7, threshold, dimension=5000)
    # sensitivity in grid units: C * scale + sqrt(d) (stochastic rounding moves < 1 per entry)
    assert rn.sensitivity >= 0.7 * codec.scale + math.sqrt(5000)
    assert rn.variance.denominator == 1
    assert float(rn.variance) * threshold >= (z * rn.sensitivity) ** 2
    assert rn.noise_multiplier(threshold) >= z * (1 - 1e-12)
    # more parties aggregated: more noise, accounted as such
    assert rn.noise_multiplier(12) == pytest.approx(z * math.sqrt(12 / threshold), rel=1e-6)
    assert rn.party_std == pytest.approx(z * 0.7 / math.sqrt(threshold), rel=1e-3)


def test_the_codec_leaves_room_for_k_entries_and_the_noise() -> None:
    plan = PartyNoise(noise_multiplier=2.0, clip=1.0)
    codec = plan.codec(1.0, per_round=10, bits=32)
    worst_std = 2.0 * math.sqrt(10 / MIN_PARTIES)  # K parties over-provisioned for t = 2
    half_range = 2**31 / codec.scale
    assert half_range >= 10 * 1.0 + HEADROOM_SIGMAS * worst_std
    rn = plan.round_noise(codec, 1.0, MIN_PARTIES, dimension=10**6)
    # even the worst round of a run wraps with probability below 2^-40
    assert rn.wrap_log_probability(10) < -40 * math.log(2)
    # the bound is monotone in the number of summed parties
    assert rn.wrap_log_probability(3) < rn.wrap_log_probability(10)


def test_a_grid_too_coarse_for_the_dimension_is_an_error_naming_bits() -> None:
    plan = PartyNoise(noise_multiplier=1.0, clip=1.0)
    codec = plan.codec(1.0, per_round=12, bits=16)
    with pytest.raises(ParameterError, match="bits"):
        plan.round_noise(codec, 1.0, 6, dimension=10_000)


def test_tiny_noise_is_refused_when_the_sum_is_not_a_discrete_gaussian() -> None:
    rn = PartyNoise(1.0, 1.0).round_noise(FixedPointCodec(1.0, 2.0**20, 32), 1.0, 2, 1)
    tiny = type(rn)(NoiseDraw(Fraction(1)), rn.sensitivity, 2, 10, rn.codec, rn.entry_magnitude)
    with pytest.raises(NonNegligibleTauError):
        tiny.noise_multiplier(4)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_parameters_name_themselves(bad: float) -> None:
    with pytest.raises(ParameterError, match="noise_multiplier"):
        PartyNoise(noise_multiplier=bad, clip=1.0)
    with pytest.raises(ParameterError, match="clip"):
        PartyNoise(noise_multiplier=1.0, clip=bad)


@given(
    st.sampled_from([8, 16, 32, 63, 64]),
    st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=6),
    st.data(),
)
def test_grid_noise_is_added_modulo_the_ring_exactly(bits: int, noise: list[int], data) -> None:  # type: ignore[no-untyped-def]
    codec = FixedPointCodec(clip=1.0, scale=1.0, bits=bits)
    modulus = 1 << bits
    size = len(noise) + data.draw(st.integers(0, 3))
    values = data.draw(st.lists(st.integers(0, modulus - 1), min_size=size, max_size=size))
    encoded = np.array(values, dtype=np.uint64).astype(codec.dtype)
    expected = [(v + (noise[i] if i < len(noise) else 0)) % modulus for i, v in enumerate(values)]
    out = add_grid_noise(codec, encoded, noise)
    assert out.dtype == codec.dtype
    assert [int(x) for x in out] == expected
    if all(abs(v) < 2**62 for v in noise):  # the vectorised sampler's int64 form
        out = add_grid_noise(codec, encoded, np.array(noise, dtype=np.int64))
        assert [int(x) for x in out] == expected


def test_party_noise_is_vectorised_up_to_2_60_and_exact_beyond() -> None:
    small = draw_party_noise(Fraction(2**50), 10)
    assert isinstance(small, np.ndarray) and small.dtype == np.int64
    big = draw_party_noise(Fraction(2**80), 3)
    assert isinstance(big, list) and all(isinstance(v, int) for v in big)


def test_more_noise_than_entries_is_an_error() -> None:
    codec = FixedPointCodec(clip=1.0, scale=1.0, bits=16)
    with pytest.raises(ParameterError, match="noise"):
        add_grid_noise(codec, codec.to_field(np.zeros(2, dtype=np.int64)), [1, 2, 3])
