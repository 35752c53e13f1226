from __future__ import annotations

import os

import pytest

from fedprivacy.crypto.aead import NONCE_BYTES, open_sealed, seal
from fedprivacy.errors import AuthenticationError, InvalidKeyError

KEY = bytes(range(32))
AD = b"round=3|from=1|to=2"


@pytest.mark.parametrize("plaintext", [b"", b"x", os.urandom(1000)])
def test_round_trip(plaintext: bytes) -> None:
    sealed = seal(KEY, plaintext, AD)
    assert len(sealed) == NONCE_BYTES + len(plaintext) + 16
    assert open_sealed(KEY, sealed, AD) == plaintext


def test_nonces_are_fresh() -> None:
    a, b = seal(KEY, b"same", AD), seal(KEY, b"same", AD)
    assert a[:NONCE_BYTES] != b[:NONCE_BYTES]
    assert a != b


@pytest.mark.parametrize("position", ["nonce", "ciphertext", "tag"])
def test_flipped_bit_is_rejected(position: str) -> None:
    sealed = bytearray(seal(KEY, b"secret message", AD))
    index = {"nonce": 0, "ciphertext": NONCE_BYTES + 3, "tag": len(sealed) - 1}[position]
    sealed[index] ^= 0x10
    with pytest.raises(AuthenticationError):
        open_sealed(KEY, bytes(sealed), AD)


def test_wrong_associated_data_is_rejected() -> None:
    sealed = seal(KEY, b"payload", AD)
    with pytest.raises(AuthenticationError):
        open_sealed(KEY, sealed, AD + b"!")
    with pytest.raises(AuthenticationError):
        open_sealed(KEY, sealed, b"")


def test_wrong_key_is_rejected() -> None:
    sealed = seal(KEY, b"payload", AD)
    with pytest.raises(AuthenticationError):
        open_sealed(bytes(32), sealed, AD)


@pytest.mark.parametrize("length", [0, 5, NONCE_BYTES, NONCE_BYTES + 15])
def test_truncated_input_is_rejected(length: int) -> None:
    sealed = seal(KEY, b"", AD)
    with pytest.raises(AuthenticationError):
        open_sealed(KEY, sealed[:length], AD)


def test_truncated_message_is_rejected() -> None:
    sealed = seal(KEY, b"some longer payload", AD)
    with pytest.raises(AuthenticationError):
        open_sealed(KEY, sealed[:-1], AD)


@pytest.mark.parametrize("key", [b"", bytes(16), bytes(31), bytes(33)])
def test_bad_key_length(key: bytes) -> None:
    with pytest.raises(InvalidKeyError):
        seal(key, b"x", AD)
    with pytest.raises(InvalidKeyError):
        open_sealed(key, bytes(40), AD)
