from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from fedprivacy.crypto.keys import (
    KeyPair,
    agree,
    derive_key,
    encode_context,
    generate_keypair,
    keypair_from_private_bytes,
    load_public_key,
    private_key_bytes,
)
from fedprivacy.errors import InvalidKeyError, ParameterError

# Canonical low-order points of Curve25519 (all give an all-zero shared secret).
LOW_ORDER_POINTS = [
    bytes(32),
    (1).to_bytes(32, "little"),
    bytes.fromhex("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
]

field = st.one_of(
    st.binary(max_size=6), st.text(max_size=4), st.integers(min_value=0, max_value=2**64 - 1)
)


def test_keypair_shapes_and_roundtrip() -> None:
    kp = generate_keypair()
    assert isinstance(kp, KeyPair)
    assert len(kp.public_bytes) == 32
    raw = private_key_bytes(kp.private)
    assert len(raw) == 32
    again = keypair_from_private_bytes(raw)
    assert again.public_bytes == kp.public_bytes
    assert generate_keypair().public_bytes != kp.public_bytes


def test_agreement_is_symmetric_and_pair_specific() -> None:
    a, b, c = generate_keypair(), generate_keypair(), generate_keypair()
    ab = agree(a.private, b.public_bytes)
    assert ab == agree(b.private, a.public_bytes)
    assert len(ab) == 32
    assert ab != agree(a.private, c.public_bytes)


@pytest.mark.parametrize("raw", [b"", bytes(31), bytes(33)])
def test_wrong_length_keys_raise(raw: bytes) -> None:
    kp = generate_keypair()
    with pytest.raises(InvalidKeyError):
        load_public_key(raw)
    with pytest.raises(InvalidKeyError):
        keypair_from_private_bytes(raw)
    with pytest.raises(InvalidKeyError):
        agree(kp.private, raw)


def test_non_bytes_key_raises() -> None:
    with pytest.raises(InvalidKeyError):
        load_public_key("x" * 32)  # type: ignore[arg-type]


def test_load_public_key() -> None:
    kp = generate_keypair()
    assert isinstance(load_public_key(kp.public_bytes), X25519PublicKey)


@pytest.mark.parametrize("point", LOW_ORDER_POINTS)
def test_low_order_point_raises(point: bytes) -> None:
    with pytest.raises(InvalidKeyError):
        agree(generate_keypair().private, point)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("ab", "c"), ("a", "bc")),
        ((b"ab", b"c"), (b"a", b"bc")),
        ((1,), (b"\x01",)),
        ((1,), ("\x01",)),
        ((b"x",), ("x",)),
        ((0,), ()),
        ((b"",), ()),
        ((b"", b""), (b"",)),
        (("",), (b"",)),
        ((0, 1), (1, 0)),
        ((256,), (1, 0)),
    ],
)
def test_encode_context_distinguishes_tricky_tuples(
    left: tuple[bytes | str | int, ...], right: tuple[bytes | str | int, ...]
) -> None:
    assert encode_context(*left) != encode_context(*right)


@given(st.lists(field, max_size=4), st.lists(field, max_size=4))
def test_encode_context_injective(
    left: list[bytes | str | int], right: list[bytes | str | int]
) -> None:
    def norm(fields: list[bytes | str | int]) -> list[tuple[str, object]]:
        return [(type(f).__name__, f) for f in fields]

    if norm(left) != norm(right):
        assert encode_context(*left) != encode_context(*right)
    else:
        assert encode_context(*left) == encode_context(*right)


@pytest.mark.parametrize("bad", [-1, 2**64, 1.0, None, True])
def test_encode_context_rejects_bad_fields(bad: object) -> None:
    with pytest.raises(ParameterError):
        encode_context("ok", bad)  # type: ignore[arg-type]


def test_derive_key_depends_on_every_input() -> None:
    secret = bytes(range(32))
    base = derive_key(secret, "mask", 7, b"\x00")
    assert len(base) == 32
    assert derive_key(secret, "mask", 7, b"\x00") == base
    variants = [
        derive_key(bytes(range(1, 33)), "mask", 7, b"\x00"),
        derive_key(secret, "masK", 7, b"\x00"),
        derive_key(secret, "mask", 8, b"\x00"),
        derive_key(secret, "mask", 7, b"\x01"),
        derive_key(secret, "mask", 7),
        derive_key(secret, "mask", 7, b"\x00", ""),
        derive_key(secret, "mask", b"\x07", b"\x00"),
    ]
    assert base not in variants
    assert len(set(variants)) == len(variants)


def test_derive_key_length() -> None:
    secret = b"k" * 32
    long = derive_key(secret, "a", length=64)
    assert len(long) == 64
    assert len(derive_key(secret, "a", length=1)) == 1
    with pytest.raises(ParameterError):
        derive_key(secret, "a", length=0)
    with pytest.raises(ParameterError):
        derive_key(secret, "a", length=255 * 32 + 1)
    with pytest.raises(InvalidKeyError):
        derive_key(b"", "a")
