"""Key derivations shared by clients and server: every key is bound to session, round and users.

All keys come from HKDF-SHA256 (:func:`fedprivacy.crypto.keys.derive_key`) over an X25519 shared
secret or a 32-byte OS-random seed, with an unambiguous context naming the purpose, the session,
the round, the users and (for masks) the vector. A key therefore never serves two purposes, two
rounds or two vectors, which is what allows the AES-CTR expansion to start from a zero counter.
The two signed statements, :func:`keys_statement` and :func:`survivors_statement`, are bound
the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from fedprivacy.crypto.keys import derive_key, encode_context
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.params_wire import params_digest

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


def pairwise_mask_key(
    agreement: bytes, params: SecAggParameters, u: int, v: int, model: bytes = b""
) -> bytes:
    """AES-CTR key of the pairwise mask shared by ``u`` and ``v`` (symmetric in u, v).

    ``model`` is the digest of the model the masked update was trained on (empty: none, as
    outside training): two neighbours that trained on different models mask with different
    keys, so their masks do not cancel and a sum over them reveals nothing (a server that sends
    different models to different parties of one round, Pasquini et al., CCS 2022).
    """
    lo, hi = min(u, v), max(u, v)
    bound = (model,) if model else ()
    return derive_key(
        agreement,
        _PREFIX,
        "pairwise-mask",
        params.session_id,
        params.round_index,
        lo,
        hi,
        params.vector_name,
        *bound,
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


def keys_statement(
    params: SecAggParameters, user: int, encryption_key: bytes, masking_key: bytes, epoch: bool
) -> bytes:
    """What a node signs with its keys: "in session X, round R (or my key epoch), mine are these".

    Fresh keys are bound to the round, so that a server holding a key it rebuilt in one round
    (``s_sk_v`` of a user left out) cannot offer it again in a later one; keys of a key epoch
    (:mod:`~fedprivacy.secagg.key_epoch`), never shared, are bound to the session.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 5, 32)
    >>> r0 = SecAggParameters.create(bytes(16), 0, range(5), 3, codec)
    >>> r1 = SecAggParameters.create(bytes(16), 1, range(5), 3, codec)
    >>> c, s = bytes(32), bytes(range(32))
    >>> keys_statement(r0, 2, c, s, False) == keys_statement(r1, 2, c, s, False)
    False
    >>> keys_statement(r0, 2, c, s, True) == keys_statement(r1, 2, c, s, True)
    True
    """
    scope = ("epoch", 0) if epoch else ("round", params.round_index)
    return encode_context(
        _PREFIX, "keys", params.session_id, *scope, user, encryption_key, masking_key
    )


def survivors_statement(
    params: SecAggParameters, aggregated: Iterable[int], model: bytes = b""
) -> bytes:
    """What a client signs in the consistency check: "round R of session X aggregates S".

    The statement names the purpose, the session, the round, the SHA-256 of every public
    parameter of the round (:func:`~fedprivacy.secagg.params_wire.encode_params`: participants,
    threshold, graph, codec), the aggregated set in ascending order and, in training, the
    digest of the model the client trained on, so a signature is valid for one set of one
    round and one model only: it cannot be replayed in another round or session, with other
    parameters, for another set, or by a party that was sent another model.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 5, 32)
    >>> params = SecAggParameters.create(bytes(16), 0, range(5), 3, codec)
    >>> survivors_statement(params, [3, 1, 2]) == survivors_statement(params, [1, 2, 3])
    True
    >>> survivors_statement(params, [1, 2, 3]) == survivors_statement(params, [1, 2, 3, 4])
    False
    """
    digest = params_digest(params)
    users = sorted(int(u) for u in aggregated)
    bound = (model,) if model else ()
    return encode_context(
        _PREFIX,
        "survivors",
        params.session_id,
        params.round_index,
        digest,
        len(users),
        *users,
        *bound,
    )
