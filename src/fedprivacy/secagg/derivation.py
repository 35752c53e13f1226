"""Key derivations shared by clients and server: every key is bound to session, round and users.

All keys come from HKDF-SHA256 (:func:`fedprivacy.crypto.keys.derive_key`) over an X25519 shared
secret or a 32-byte OS-random seed, with an unambiguous context naming the purpose, the session,
the round, the users and (for masks) the vector. A key therefore never serves two purposes, two
rounds or two vectors, which is what allows the AES-CTR expansion to start from a zero counter.
"""

from __future__ import annotations

import hashlib

from fedprivacy.crypto.keys import derive_key, encode_context
from fedprivacy.secagg.params import SecAggParameters

_PREFIX = "fedprivacy/secagg/v1"


def share_encryption_key(agreement: bytes, params: SecAggParameters, u: int, v: int) -> bytes:
    """AES-GCM key for the shares exchanged between ``u`` and ``v`` (symmetric in u, v)."""
    lo, hi = min(u, v), max(u, v)
    return derive_key(
        agreement, _PREFIX, "share-key", params.session_id, params.round_index, lo, hi
    )


def share_associated_data(params: SecAggParameters, sender: int, receiver: int) -> bytes:
    """Associated data of an encrypted share: session, round, sender and receiver, in order."""
    return encode_context(_PREFIX, "share", params.session_id, params.round_index, sender, receiver)


def self_mask_key(seed: bytes, params: SecAggParameters, user: int) -> bytes:
    """AES-CTR key of ``user``'s self mask ``PRG(b_u)`` for this round's vector."""
    return derive_key(
        seed,
        _PREFIX,
        "self-mask",
        params.session_id,
        params.round_index,
        user,
        params.vector_name,
    )


def pairwise_mask_key(agreement: bytes, params: SecAggParameters, u: int, v: int) -> bytes:
    """AES-CTR key of the pairwise mask shared by ``u`` and ``v`` (symmetric in u, v)."""
    lo, hi = min(u, v), max(u, v)
    return derive_key(
        agreement,
        _PREFIX,
        "pairwise-mask",
        params.session_id,
        params.round_index,
        lo,
        hi,
        params.vector_name,
    )


def seed_commitment(seed: bytes, params: SecAggParameters, user: int) -> bytes:
    """SHA-256 commitment to ``b_u``, advertised with the keys.

    The server checks every reconstructed self-mask seed against it, so a corrupted share can
    abort a round but never produce a wrong aggregate. The seed is 256 uniformly random bits, so
    the hash reveals nothing about it.
    """
    context = encode_context(
        _PREFIX, "seed-commitment", params.session_id, params.round_index, user
    )
    return hashlib.sha256(context + seed).digest()
