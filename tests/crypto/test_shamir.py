from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedprivacy.crypto.shamir import (
    LIMB_BITS,
    PRIME,
    Share,
    combine_shares,
    lagrange_at_zero,
    split_secret,
)
from fedprivacy.errors import ParameterError, ShamirError

CHI2_CRIT_31 = 75.0  # p ~ 1e-6 for 31 degrees of freedom


def chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize(("n", "t"), [(6, 3), (5, 5), (5, 1), (4, 2)])
def test_every_threshold_subset_reconstructs(n: int, t: int) -> None:
    secret = os.urandom(32)
    holders = list(range(1, n + 1))
    shares = split_secret(secret, holders, t)
    assert sorted(shares) == holders
    for subset in itertools.combinations(holders, t):
        assert combine_shares([shares[x] for x in subset], t) == secret
        assert combine_shares([shares[x] for x in reversed(subset)], t) == secret
    # Extra shares beyond the threshold are accepted.
    assert combine_shares(list(shares.values()), t) == secret


@pytest.mark.parametrize(("n", "t"), [(6, 3), (5, 5), (4, 2)])
def test_below_threshold_fails_or_is_wrong(n: int, t: int) -> None:
    secret = os.urandom(32)
    shares = split_secret(secret, range(1, n + 1), t)
    for subset in itertools.combinations(range(1, n + 1), t - 1):
        with pytest.raises(ShamirError):
            combine_shares([shares[x] for x in subset], t)
        if t >= 2:
            # Using a lower threshold than the real one does not give the secret back
            # (it is rejected or yields a different value).
            try:
                assert combine_shares([shares[x] for x in subset], t - 1) != secret
            except ShamirError:
                pass


def test_arbitrary_evaluation_points() -> None:
    secret = b"\x00" * 31 + b"\x01"
    holders = [PRIME - 1, 17, 123_456_789, 2]
    shares = split_secret(secret, holders, 3)
    for subset in itertools.combinations(holders, 3):
        assert combine_shares([shares[x] for x in subset], 3) == secret


@pytest.mark.parametrize(
    "secret",
    [
        b"\x00",
        b"\xff",
        os.urandom(31),
        os.urandom(32),
        os.urandom(64),
        b"\xff" * 31,
        b"\xff" * 32,
        b"\xff" * 64,
        b"\x00" * 32,
        b"\x00\x00\x01",
    ],
    ids=lambda secret: f"{len(secret)}-bytes",
)
def test_secret_lengths(secret: bytes) -> None:
    shares = split_secret(secret, [1, 2, 3, 4], 3)
    share = shares[1]
    assert share.secret_length == len(secret)
    assert len(share.values) == -(-8 * len(secret) // LIMB_BITS)
    assert combine_shares([shares[4], shares[2], shares[3]], 3) == secret


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=1, max_size=70), st.integers(1, 5), st.data())
def test_round_trip_property(secret: bytes, t: int, data: st.DataObject) -> None:
    n = data.draw(st.integers(t, 7))
    holders = data.draw(st.lists(st.integers(1, PRIME - 1), min_size=n, max_size=n, unique=True))
    shares = split_secret(secret, holders, t)
    chosen = data.draw(st.permutations(holders))[:t]
    assert combine_shares([shares[x] for x in chosen], t) == secret


def test_share_serialisation_round_trip() -> None:
    shares = split_secret(os.urandom(32), [1, 2, 3], 2)
    for share in shares.values():
        raw = share.to_bytes()
        assert len(raw) == 8 + 4 * len(share.values)
        assert raw[:4] == share.x.to_bytes(4, "big")
        assert Share.from_bytes(raw) == share
    restored = [Share.from_bytes(s.to_bytes()) for s in shares.values()]
    assert combine_shares(restored[1:], 2) == combine_shares(list(shares.values())[:2], 2)


def _raw(x: int, secret_length: int, limbs: list[int], count: int | None = None) -> bytes:
    n = len(limbs) if count is None else count
    return (
        x.to_bytes(4, "big")
        + secret_length.to_bytes(2, "big")
        + n.to_bytes(2, "big")
        + b"".join(v.to_bytes(4, "big") for v in limbs)
    )


def test_from_bytes_rejects_malformed() -> None:
    good = split_secret(bytes(32), [5], 1)[5].to_bytes()
    Share.from_bytes(good)
    nine = [1] * 9
    bad = [
        b"",
        good[:7],
        good[:-1],
        good + b"\x00",
        _raw(0, 32, nine),  # x = 0
        _raw(PRIME, 32, nine),  # x out of field
        _raw(1, 32, [PRIME] + [1] * 8),  # limb not in the field
        _raw(1, 32, [2**32 - 1] + [1] * 8),
        _raw(1, 32, [1] * 8),  # 8 limbs cannot hold 32 bytes
        _raw(1, 30, nine),  # 30 bytes need 8 limbs, not 9
        _raw(1, 0, []),  # empty secret
        _raw(1, 32, nine, count=10),  # declared count inconsistent with the length
    ]
    for data in bad:
        with pytest.raises(ShamirError):
            Share.from_bytes(data)


def test_different_subsets_agree_and_inconsistent_shares_fail() -> None:
    secret = os.urandom(32)
    shares = split_secret(secret, [1, 2, 3, 4], 2)
    other = split_secret(os.urandom(16), [5, 6], 2)
    with pytest.raises(ShamirError):
        combine_shares([shares[1], other[5]], 2)
    # Duplicate x, even for identical shares.
    with pytest.raises(ShamirError):
        combine_shares([shares[1], shares[1]], 2)
    with pytest.raises(ShamirError):
        combine_shares([shares[1], shares[2], shares[1]], 2)
    assert combine_shares([shares[1], shares[2]], 2) == combine_shares([shares[3], shares[4]], 2)


def test_tampered_share_is_detected_or_changes_result() -> None:
    secret = b"\x00" * 32
    shares = split_secret(secret, [1, 2, 3], 3)
    bad = Share(
        x=2, values=((shares[2].values[0] + 1) % PRIME,) + shares[2].values[1:], secret_length=32
    )
    try:
        assert combine_shares([shares[1], bad, shares[3]], 3) != secret
    except ShamirError:
        pass


@pytest.mark.parametrize(
    ("holders", "t"),
    [([1, 2, 3], 0), ([1, 2, 3], 4), ([1, 1, 2], 2), ([0, 1, 2], 2), ([1, PRIME], 1), ([], 1)],
)
def test_split_parameter_errors(holders: list[int], t: int) -> None:
    with pytest.raises(ParameterError):
        split_secret(b"secret", holders, t)


def test_split_rejects_empty_secret() -> None:
    with pytest.raises(ParameterError):
        split_secret(b"", [1, 2], 1)


def test_combine_rejects_bad_threshold() -> None:
    shares = split_secret(b"abc", [1, 2], 1)
    with pytest.raises(ParameterError):
        combine_shares(list(shares.values()), 0)
    with pytest.raises(ShamirError):
        combine_shares([], 1)


def test_lagrange_coefficients() -> None:
    xs = [3, 7, 11]
    lam = lagrange_at_zero(xs)
    assert lam.dtype == np.uint64
    assert not lam.flags.writeable
    assert lagrange_at_zero(tuple(xs)) is lam  # cached
    # Interpolating f(x) = 5 + 2x + 9x^2 at 0 gives 5.
    ys = [(5 + 2 * x + 9 * x * x) % PRIME for x in xs]
    assert sum(int(c) * y for c, y in zip(lam, ys, strict=True)) % PRIME == 5
    # The coefficients sum to 1 (interpolating the constant 1).
    assert int(lam.sum()) % PRIME == 1
    with pytest.raises(ParameterError):
        lagrange_at_zero([1, 1])
    with pytest.raises(ParameterError):
        lagrange_at_zero([])


def test_single_share_is_uniform() -> None:
    # With t = 2 every limb of one share is s + a*x for a uniform a: uniform on GF(p),
    # whatever the secret. Pool the 9 independent limbs of many splits.
    for secret in (b"\x00" * 32, b"\xff" * 32):
        values = np.array(
            [split_secret(secret, [3, 9], 2)[9].values for _ in range(1500)], dtype=np.int64
        ).ravel()
        buckets = np.bincount(values * 32 // PRIME, minlength=32)
        assert buckets.size == 32
        assert chi_square(buckets) < CHI2_CRIT_31
    # A degenerate "share" (t = 1 reveals the secret) fails the same test.
    leaked = np.array(
        [split_secret(b"\x00" * 32, [3, 9], 1)[9].values for _ in range(200)], dtype=np.int64
    ).ravel()
    assert chi_square(np.bincount(leaked * 32 // PRIME, minlength=32)) > CHI2_CRIT_31
