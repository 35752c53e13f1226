"""X25519 key agreement and HKDF-SHA256 key derivation bound to an unambiguous context."""

from __future__ import annotations

import numbers
import os
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from fedprivacy._validation import require_int
from fedprivacy.errors import InvalidKeyError, ParameterError

__all__ = [
    "KEY_BYTES",
    "KeyPair",
    "agree",
    "derive_key",
    "encode_context",
    "generate_keypair",
    "keypair_from_private_bytes",
    "load_public_key",
    "private_key_bytes",
]

KEY_BYTES = 32
"""Length in bytes of X25519 private keys, public keys and shared secrets."""

_HKDF_MAX_LENGTH = 255 * 32
_TAG_BYTES = b"B"
_TAG_STR = b"S"
_TAG_INT = b"I"
_INT_BYTES = 8


@dataclass(frozen=True)
class KeyPair:
    """An X25519 key pair.

    Attributes
    ----------
    private : X25519PrivateKey
        The private key.
    public_bytes : bytes
        The raw 32-byte encoding of the matching public key.
    """

    private: X25519PrivateKey
    public_bytes: bytes


def require_key_bytes(name: str, raw: object, size: int = KEY_BYTES) -> bytes:
    """Return ``raw`` as ``bytes`` of length ``size``, or raise :class:`InvalidKeyError`."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise InvalidKeyError(f"{name} must be bytes, got {type(raw).__name__}")
    out = bytes(raw)
    if len(out) != size:
        raise InvalidKeyError(f"{name} must be {size} bytes, got {len(out)}")
    return out


def _keypair(private: X25519PrivateKey) -> KeyPair:
    return KeyPair(private=private, public_bytes=private.public_key().public_bytes_raw())


def generate_keypair() -> KeyPair:
    """Generate a fresh X25519 key pair from operating-system randomness.

    Returns
    -------
    KeyPair
        The new key pair.
    """
    return keypair_from_private_bytes(os.urandom(KEY_BYTES))


def private_key_bytes(private: X25519PrivateKey) -> bytes:
    """Return the raw 32-byte encoding of an X25519 private key.

    Parameters
    ----------
    private : X25519PrivateKey
        The private key.

    Returns
    -------
    bytes
        The 32 raw private-key bytes.
    """
    return private.private_bytes_raw()


def keypair_from_private_bytes(raw: bytes) -> KeyPair:
    """Rebuild a key pair from the raw 32 bytes of its private key.

    Parameters
    ----------
    raw : bytes
        The raw private key, as returned by :func:`private_key_bytes`.

    Returns
    -------
    KeyPair
        The key pair with its public key recomputed.

    Raises
    ------
    InvalidKeyError
        If ``raw`` is not 32 bytes.
    """
    data = require_key_bytes("private key", raw)
    try:
        private = X25519PrivateKey.from_private_bytes(data)
    except ValueError as exc:  # pragma: no cover - every 32-byte string is a valid scalar
        raise InvalidKeyError(f"invalid X25519 private key: {exc}") from exc
    return _keypair(private)


def load_public_key(raw: bytes) -> X25519PublicKey:
    """Parse a raw 32-byte X25519 public key.

    Parameters
    ----------
    raw : bytes
        The raw public key.

    Returns
    -------
    X25519PublicKey
        The parsed key.

    Raises
    ------
    InvalidKeyError
        If ``raw`` is not 32 bytes.
    """
    data = require_key_bytes("public key", raw)
    try:
        return X25519PublicKey.from_public_bytes(data)
    except ValueError as exc:  # pragma: no cover - cryptography accepts any 32 bytes
        raise InvalidKeyError(f"invalid X25519 public key: {exc}") from exc


def agree(private: X25519PrivateKey, peer_public: bytes) -> bytes:
    """Compute the X25519 shared secret with a peer.

    Parameters
    ----------
    private : X25519PrivateKey
        Our private key.
    peer_public : bytes
        The peer's raw 32-byte public key.

    Returns
    -------
    bytes
        The raw 32-byte shared secret (feed it to :func:`derive_key`, never use it directly).

    Raises
    ------
    InvalidKeyError
        If the peer key is not 32 bytes or is a low-order point (all-zero shared secret).
    """
    public = load_public_key(peer_public)
    try:
        return private.exchange(public)
    except ValueError as exc:
        raise InvalidKeyError(f"key agreement failed (low-order peer public key?): {exc}") from exc


def encode_context(*fields: bytes | str | int) -> bytes:
    """Encode a tuple of context fields unambiguously.

    Each field becomes a one-byte type tag (``B`` bytes, ``S`` UTF-8 string, ``I`` integer)
    followed by an 8-byte big-endian length and the payload; integers are encoded as 8-byte
    unsigned big-endian numbers. The encoding of each field is self-delimiting, so two different
    tuples never encode to the same bytes.

    Parameters
    ----------
    *fields : bytes or str or int
        The fields. Integers must lie in ``[0, 2**64)``; ``bool`` is rejected.

    Returns
    -------
    bytes
        The encoding.

    Raises
    ------
    ParameterError
        If a field has another type or an integer is out of range.
    """
    parts: list[bytes] = []
    for index, field in enumerate(fields):
        if isinstance(field, bytes | bytearray | memoryview):
            tag, payload = _TAG_BYTES, bytes(field)
        elif isinstance(field, str):
            tag, payload = _TAG_STR, field.encode("utf-8")
        elif isinstance(field, numbers.Integral) and not isinstance(field, bool):
            value = int(field)
            if not 0 <= value < 2 ** (8 * _INT_BYTES):
                raise ParameterError(
                    f"context[{index}]", f"integers must lie in [0, 2**64), got {value}"
                )
            tag, payload = _TAG_INT, value.to_bytes(_INT_BYTES, "big")
        else:
            raise ParameterError(
                f"context[{index}]", f"must be bytes, str or int, got {type(field).__name__}"
            )
        parts.append(tag + len(payload).to_bytes(8, "big") + payload)
    return b"".join(parts)


def derive_key(secret: bytes, *context: bytes | str | int, length: int = 32) -> bytes:
    """Derive a key with HKDF-SHA256 (no salt) bound to a context.

    Parameters
    ----------
    secret : bytes
        Input key material, e.g. an X25519 shared secret or a random seed.
    *context : bytes or str or int
        Context fields (protocol label, session, round, purpose...), encoded with
        :func:`encode_context` into the HKDF ``info``.
    length : int
        Number of output bytes, between 1 and ``255 * 32``.

    Returns
    -------
    bytes
        ``length`` pseudorandom bytes.

    Raises
    ------
    InvalidKeyError
        If ``secret`` is not a non-empty byte string.
    ParameterError
        If ``length`` is out of range or a context field is invalid.
    """
    if not isinstance(secret, bytes | bytearray | memoryview):
        raise InvalidKeyError(f"secret must be bytes, got {type(secret).__name__}")
    material = bytes(secret)
    if not material:
        raise InvalidKeyError("secret must not be empty")
    n = require_int("length", length, 1, _HKDF_MAX_LENGTH)
    info = encode_context(*context)
    return HKDF(algorithm=hashes.SHA256(), length=n, salt=None, info=info).derive(material)
