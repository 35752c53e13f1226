"""SecAgg public keys signed under each node's key and checked against the node's own roster.

Bonawitz et al.'s protocol against an active server (CCS 2017, Sec. 6) assumes a PKI: every
user signs the public keys it advertises, and every user checks the signatures of the keys it
receives before it seals a share for them. Without it the server can hand a victim a key roster
whose "neighbours" are keys of its own: the victim then seals its shares of ``b_u`` and
``s_sk_u`` to the server and masks with pairs the server can compute, and its input comes out
unmasked, with no unmask request sent and so before the survivor-list check can run.

With a node's :class:`~fedprivacy.secagg.consistency.ConsistencyCheck` (its signing key and the
federation's roster, both from its own machine):

- :func:`sign_keys`: a node signs :func:`~fedprivacy.secagg.derivation.keys_statement`
  (session, round, user, ``c_pk``, ``s_pk``; a key epoch's keys bound to the session, the
  round then left out) with its node key, in the signing context of keys
  (:class:`~fedprivacy.crypto.signing.Statement`);
- :func:`check_participants`: every participant of a round must be in the node's roster, so
  participants the server invents (phantoms) are refused before anything is sent;
- :func:`verify_keys`: each key of a key roster must carry its owner's valid signature, else
  the node refuses the roster before it seals any share.

A signature on the wire is one scope byte (1: the round, 2: a key epoch), then the DER
signature; empty when the sender signs nothing (a node without node authentication).

Adversary: a server that lies about the keys (substitutes, replays a round's keys in another,
invents participants). Not covered: a server colluding with enough users to reach the threshold.

Examples
--------
>>> from fedprivacy.crypto.fixed_point import FixedPointCodec
>>> from fedprivacy.crypto.signing import SigningKey
>>> from fedprivacy.secagg.consistency import checks_for
>>> from fedprivacy.secagg.params import SecAggParameters
>>> params = SecAggParameters.create(bytes(16), 0, range(3), 2, FixedPointCodec.for_sum(1, 3, 32))
>>> checks = checks_for({u: SigningKey.generate() for u in range(3)})
>>> c_pk, s_pk = bytes(32), bytes(range(32))
>>> signature = sign_keys(checks[1], params, 1, c_pk, s_pk, epoch=False)
>>> verify_keys(checks[0].roster, params, 1, c_pk, s_pk, signature)
>>> verify_keys(checks[0].roster, params, 1, s_pk, c_pk, signature)
Traceback (most recent call last):
...
fedprivacy.secagg.errors.UnsignedKeyError: the keys of user 1 do not carry its signature: \
user 1's signature does not verify
"""

from __future__ import annotations

from fedprivacy.crypto.keys import load_public_key
from fedprivacy.crypto.signing import Roster, Statement
from fedprivacy.errors import AuthenticationError
from fedprivacy.secagg.consistency import ConsistencyCheck
from fedprivacy.secagg.derivation import keys_statement
from fedprivacy.secagg.errors import (
    MalformedMessageError,
    ProtocolViolationError,
    UnknownSenderError,
    UnsignedKeyError,
)
from fedprivacy.secagg.messages import KeyRoster
from fedprivacy.secagg.params import SecAggParameters

__all__ = ["check_participants", "roster_keys", "sign_keys", "verify_keys"]

_ROUND, _EPOCH = 1, 2


def sign_keys(
    check: ConsistencyCheck,
    params: SecAggParameters,
    user: int,
    encryption_key: bytes,
    masking_key: bytes,
    *,
    epoch: bool,
) -> bytes:
    """The scope byte and the node's signature on its keys of this round (or of its epoch)."""
    statement = keys_statement(params, user, encryption_key, masking_key, epoch)
    scope = _EPOCH if epoch else _ROUND
    return bytes([scope]) + check.signing_key.sign(Statement.KEYS, statement)


def verify_keys(
    roster: Roster,
    params: SecAggParameters,
    user: int,
    encryption_key: bytes,
    masking_key: bytes,
    signature: bytes,
) -> None:
    """Refuse keys that ``user``'s roster key did not sign for this round or for its epoch.

    Raises
    ------
    UnsignedKeyError
        If the signature is missing, has an unknown scope, or does not verify under the key
        ``roster`` (the verifier's own) holds for ``user``, or ``user`` is not in it.
    """
    if not signature or signature[0] not in (_ROUND, _EPOCH):
        raise UnsignedKeyError(f"the keys of user {user} are not signed")
    statement = keys_statement(params, user, encryption_key, masking_key, signature[0] == _EPOCH)
    try:
        roster.verify(user, Statement.KEYS, statement, signature[1:])
    except AuthenticationError as exc:
        raise UnsignedKeyError(
            f"the keys of user {user} do not carry its signature: {exc}"
        ) from exc


def check_participants(roster: Roster, params: SecAggParameters) -> None:
    """Refuse a round with a participant that is not in the node's own roster.

    Raises
    ------
    UnsignedKeyError
        Naming the participants outside the roster (parties the server added on its own).

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> from fedprivacy.crypto.signing import SigningKey
    >>> from fedprivacy.secagg.consistency import roster_of
    >>> from fedprivacy.secagg.params import SecAggParameters
    >>> roster = roster_of({u: SigningKey.generate() for u in range(3)})
    >>> codec = FixedPointCodec.for_sum(1, 5, 32)
    >>> check_participants(roster, SecAggParameters.create(bytes(16), 0, range(5), 3, codec))
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.UnsignedKeyError: participants [3, 4] are not in this node's \
roster: the server cannot add parties of its own
    """
    outside = [u for u in params.participants if u not in roster]
    if outside:
        raise UnsignedKeyError(
            f"participants {outside} are not in this node's roster: the server cannot add "
            "parties of its own"
        )


def roster_keys(
    message: KeyRoster,
    params: SecAggParameters,
    user: int,
    own: tuple[bytes, bytes],
    roster: Roster | None,
) -> dict[int, tuple[bytes, bytes]]:
    """The keys a client accepts from a key roster: user -> ``(c_pk, s_pk)``.

    Every entry must name a distinct participant with valid X25519 keys, the client's own entry
    must carry ``own``, no two keys may be equal, and, with the client's ``roster`` (node
    authentication), every other entry must carry its owner's signature (:func:`verify_keys`).

    Raises
    ------
    MalformedMessageError, UnknownSenderError, ProtocolViolationError, UnsignedKeyError
        For a repeated user, a non-participant, a missing own entry or equal keys, a key
        without its owner's signature.
    """
    keys: dict[int, tuple[bytes, bytes]] = {}
    for v, c_pk, s_pk, signature in message.keys:
        if v in keys:
            raise MalformedMessageError(f"user {v} appears twice in the key roster")
        if v not in params.participants:
            raise UnknownSenderError(f"roster lists {v}, who is not a participant")
        load_public_key(c_pk)
        load_public_key(s_pk)
        if roster is not None and v != user:
            verify_keys(roster, params, v, c_pk, s_pk, signature)
        keys[v] = (c_pk, s_pk)
    if keys.get(user) != own:
        raise ProtocolViolationError("the roster does not carry this client's own keys")
    all_keys = [k for pair in keys.values() for k in pair]
    if len(set(all_keys)) != len(all_keys):
        raise ProtocolViolationError("two advertised public keys are equal")
    return keys
