"""AES-256-GCM authenticated encryption with associated data and random nonces."""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from fedprivacy.crypto.keys import require_key_bytes
from fedprivacy.errors import AuthenticationError

__all__ = ["AEAD_KEY_BYTES", "NONCE_BYTES", "TAG_BYTES", "open_sealed", "seal"]

NONCE_BYTES = 12
"""Length of the random nonce prepended to every sealed message."""

TAG_BYTES = 16
"""Length of the GCM authentication tag appended to every sealed message."""

AEAD_KEY_BYTES = 32
"""Length of an AES-256-GCM key."""


def _cipher(key: bytes) -> AESGCM:
    return AESGCM(require_key_bytes("AEAD key", key, AEAD_KEY_BYTES))


def seal(key: bytes, plaintext: bytes, associated_data: bytes) -> bytes:
    """Encrypt and authenticate ``plaintext``, binding it to ``associated_data``.

    Parameters
    ----------
    key : bytes
        A 32-byte AES-256 key. A key must not seal more than about 2**32 messages (random nonces).
    plaintext : bytes
        The message.
    associated_data : bytes
        Authenticated but unencrypted context (sender, recipient, round...); the same bytes
        must be given to :func:`open_sealed`.

    Returns
    -------
    bytes
        ``nonce (12 bytes) || ciphertext || tag (16 bytes)``.

    Raises
    ------
    InvalidKeyError
        If ``key`` is not 32 bytes.
    """
    cipher = _cipher(key)
    nonce = os.urandom(NONCE_BYTES)
    return nonce + cipher.encrypt(nonce, bytes(plaintext), bytes(associated_data))


def open_sealed(key: bytes, sealed: bytes, associated_data: bytes) -> bytes:
    """Check and decrypt a message produced by :func:`seal`.

    Parameters
    ----------
    key : bytes
        The 32-byte key used to seal.
    sealed : bytes
        ``nonce || ciphertext || tag``.
    associated_data : bytes
        The associated data given to :func:`seal`.

    Returns
    -------
    bytes
        The plaintext.

    Raises
    ------
    InvalidKeyError
        If ``key`` is not 32 bytes.
    AuthenticationError
        If ``sealed`` is too short, was tampered with, or the key or associated data differ.
    """
    cipher = _cipher(key)
    data = bytes(sealed)
    if len(data) < NONCE_BYTES + TAG_BYTES:
        raise AuthenticationError(
            f"sealed message is {len(data)} bytes, shorter than nonce + tag "
            f"({NONCE_BYTES + TAG_BYTES} bytes)"
        )
    try:
        return cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], bytes(associated_data))
    except InvalidTag as exc:
        raise AuthenticationError(
            "authentication failed: wrong key, wrong associated data or tampered message"
        ) from exc
