"""Cryptographic building blocks for secure aggregation.

X25519 key agreement and HKDF key derivation (:mod:`.keys`), AES-256-GCM sealing (:mod:`.aead`),
AES-256-CTR mask expansion into numpy vectors (:mod:`.prg`), Shamir secret sharing over
GF(2**31 - 1) (:mod:`.shamir`) and fixed-point encoding into ``Z_{2**bits}`` (:mod:`.fixed_point`).
Secret randomness always comes from the operating system.
"""

from __future__ import annotations

from fedprivacy.crypto.aead import NONCE_BYTES, open_sealed, seal
from fedprivacy.crypto.fixed_point import FixedPointCodec
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
from fedprivacy.crypto.prg import MaskExpander, mask_dtype, reduce
from fedprivacy.crypto.shamir import (
    LIMB_BITS,
    PRIME,
    Share,
    combine_shares,
    lagrange_at_zero,
    split_secret,
)
from fedprivacy.crypto.signing import Roster, SigningKey

__all__ = [
    "Roster",
    "SigningKey",
    "LIMB_BITS",
    "NONCE_BYTES",
    "PRIME",
    "FixedPointCodec",
    "KeyPair",
    "MaskExpander",
    "Share",
    "agree",
    "combine_shares",
    "derive_key",
    "encode_context",
    "generate_keypair",
    "keypair_from_private_bytes",
    "lagrange_at_zero",
    "load_public_key",
    "mask_dtype",
    "open_sealed",
    "private_key_bytes",
    "reduce",
    "seal",
    "split_secret",
]
