from __future__ import annotations

import os

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedprivacy.crypto.prg import MaskExpander, mask_dtype, reduce
from fedprivacy.errors import InvalidKeyError, ParameterError

KEY_A = bytes(range(32))
KEY_B = bytes(range(1, 33))

# Chi-square critical values with a tiny false-alarm rate (p ~ 1e-6).
CHI2_CRIT_255 = 390.0
CHI2_CRIT_15 = 52.0


def chi_square(counts: np.ndarray) -> float:
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize(
    ("bits", "dtype"), [(1, np.uint32), (32, np.uint32), (33, np.uint64), (64, np.uint64)]
)
def test_mask_dtype(bits: int, dtype: type) -> None:
    assert mask_dtype(bits) == np.dtype(dtype)


@pytest.mark.parametrize("bits", [0, 65, -1])
def test_mask_dtype_rejects(bits: int) -> None:
    with pytest.raises(ParameterError):
        mask_dtype(bits)
    with pytest.raises(ParameterError):
        MaskExpander(4, bits)


def test_matches_aes_ctr_keystream() -> None:
    ex = MaskExpander(10, 64)
    stream = Cipher(algorithms.AES(KEY_A), modes.CTR(bytes(16))).encryptor().update(bytes(80))
    expected = np.frombuffer(stream, dtype="<u8")
    np.testing.assert_array_equal(ex.expand(KEY_A), expected)
    ex20 = MaskExpander(20, 20)
    stream20 = Cipher(algorithms.AES(KEY_A), modes.CTR(bytes(16))).encryptor().update(bytes(80))
    expected20 = np.frombuffer(stream20, dtype="<u4") & np.uint32(2**20 - 1)
    np.testing.assert_array_equal(ex20.expand(KEY_A), expected20)


@pytest.mark.parametrize("bits", [1, 13, 32, 40, 64])
def test_deterministic_range_and_dtype(bits: int) -> None:
    ex = MaskExpander(5000, bits)
    assert ex.length == 5000
    assert ex.bits == bits
    assert ex.dtype == mask_dtype(bits)
    assert ex.modulus_mask == ex.dtype.type(2**bits - 1)
    assert ex.modulus_mask.dtype == ex.dtype
    a = ex.expand_copy(KEY_A)
    assert a.dtype == ex.dtype
    assert a.shape == (5000,)
    np.testing.assert_array_equal(a, MaskExpander(5000, bits).expand(KEY_A))
    b = ex.expand_copy(KEY_B)
    assert not np.array_equal(a, b)
    assert int(a.max()) <= 2**bits - 1
    assert int(b.max()) <= 2**bits - 1
    # The top bit is used (values are not confined to a smaller range).
    assert int(a.max()) >= 2 ** (bits - 1)


def test_expand_copy_is_independent_of_later_calls() -> None:
    ex = MaskExpander(100, 32)
    first = ex.expand_copy(KEY_A)
    kept = first.copy()
    view = ex.expand(KEY_A)
    np.testing.assert_array_equal(view, kept)
    ex.expand(KEY_B)
    ex.expand_copy(KEY_B)
    np.testing.assert_array_equal(first, kept)
    # The view is reused: it now holds the KEY_B expansion.
    assert not np.array_equal(view, kept)
    assert not view.flags.writeable


@pytest.mark.parametrize("bits", [1, 20, 32, 40, 64])
def test_add_then_subtract_restores(bits: int) -> None:
    ex = MaskExpander(1000, bits)
    rng = np.random.default_rng(0)
    acc = rng.integers(0, 2**bits, size=1000, dtype=np.uint64).astype(ex.dtype)
    original = acc.copy()
    ex.add_into(acc, KEY_A)
    assert not np.array_equal(acc, original)
    expected = reduce((original + ex.expand_copy(KEY_A)).astype(ex.dtype), bits)
    np.testing.assert_array_equal(reduce(acc.copy(), bits), expected)
    ex.subtract_from(acc, KEY_A)
    np.testing.assert_array_equal(acc, original)


def test_masks_cancel_modulo() -> None:
    bits = 13
    ex = MaskExpander(500, bits)
    acc = np.zeros(500, dtype=ex.dtype)
    keys = [os.urandom(32) for _ in range(5)]
    for k in keys:
        ex.add_into(acc, k)
    for k in reversed(keys):
        ex.subtract_from(acc, k)
    np.testing.assert_array_equal(reduce(acc, bits), np.zeros(500, dtype=ex.dtype))


def test_accumulator_checks() -> None:
    ex = MaskExpander(10, 20)
    with pytest.raises(ParameterError):
        ex.add_into(np.zeros(10, dtype=np.uint64), KEY_A)
    with pytest.raises(ParameterError):
        ex.add_into(np.zeros(11, dtype=np.uint32), KEY_A)
    with pytest.raises(ParameterError):
        ex.subtract_from(np.zeros((10, 1), dtype=np.uint32), KEY_A)


def test_combine_is_add_into_and_subtract_from() -> None:
    ex = MaskExpander(50, 20)
    acc = np.arange(50, dtype=ex.dtype)
    added = acc.copy()
    ex.add_into(added, KEY_A)
    combined = acc.copy()
    ex.combine(combined, KEY_A, 1)
    np.testing.assert_array_equal(combined, added)
    ex.combine(combined, KEY_A, -1)
    np.testing.assert_array_equal(combined, acc)
    for sign in (0, 2, True):
        with pytest.raises(ParameterError, match="sign"):
            ex.combine(acc.copy(), KEY_A, sign)


@pytest.mark.parametrize("key", [b"", bytes(16), bytes(31), bytes(33)])
def test_bad_key_raises(key: bytes) -> None:
    ex = MaskExpander(10, 32)
    with pytest.raises(InvalidKeyError):
        ex.expand(key)
    with pytest.raises(InvalidKeyError):
        ex.add_into(np.zeros(10, dtype=np.uint32), key)


def test_zero_length() -> None:
    assert MaskExpander(0, 16).expand(KEY_A).shape == (0,)


def test_uniformity_bits20() -> None:
    bits = 20
    ex = MaskExpander(200_000, bits)
    values = ex.expand_copy(os.urandom(32))
    low = np.bincount((values & 0xFF).astype(np.int64), minlength=256)
    assert chi_square(low) < CHI2_CRIT_255
    top = np.bincount((values >> (bits - 4)).astype(np.int64), minlength=16)
    assert top.size == 16
    assert chi_square(top) < CHI2_CRIT_15


def test_chi_square_detects_bias() -> None:
    # Sanity check of the statistic itself: a masked value with a stuck bit fails.
    values = MaskExpander(200_000, 20).expand_copy(KEY_A) | np.uint32(1 << 19)
    top = np.bincount((values >> 16).astype(np.int64), minlength=16)
    assert chi_square(top) > CHI2_CRIT_15


def test_reduce_in_place() -> None:
    v = np.array([2**32 - 1, 5, 2**20], dtype=np.uint32)
    out = reduce(v, 20)
    assert out is v
    np.testing.assert_array_equal(v, np.array([2**20 - 1, 5, 0], dtype=np.uint32))
    w = np.array([2**64 - 1], dtype=np.uint64)
    np.testing.assert_array_equal(reduce(w, 64), np.array([2**64 - 1], dtype=np.uint64))
    with pytest.raises(ParameterError):
        reduce(np.zeros(3, dtype=np.uint32), 40)
    with pytest.raises(ParameterError):
        reduce(np.zeros(3, dtype=np.int64), 20)
