"""Protocol 1's X25519 keys signed under each silo's node key, checked against its own roster.

Step 1(b) relays every silo's key-agreement key through the server. Without signatures the
server can hand a silo a roster whose "peers" are keys of its own: silo 0 then seals the shared
seed ``R`` (which derives the masks and the multiplicative blinds) to the server. With node
authentication (the silo's policy names its ``signing_key`` and the federation's ``roster``)
each silo signs its key, bound to the session, in the signing context of keys
(:class:`~fedprivacy.crypto.signing.Statement`), and a silo refuses a roster that lists a silo
outside its own roster or a key without its owner's valid signature, before it agrees on any
key or seals the seed.

Adversary: a server that substitutes, replays (another session's) or invents key-agreement
keys. Not covered: a silo colluding with the server.

Examples
--------
>>> from fedprivacy.crypto.signing import SigningKey
>>> from fedprivacy.secagg.consistency import checks_for
>>> checks = checks_for({s: SigningKey.generate() for s in range(2)})
>>> key = bytes(range(32))
>>> entries = ((0, key, b""), (1, key, sign_dh_key(checks[1], bytes(16), 1, key)))
>>> verify_dh_roster(checks[0].roster, bytes(16), 0, entries)
>>> verify_dh_roster(checks[0].roster, bytes(15) + b"x", 0, entries)
Traceback (most recent call last):
...
fedprivacy.secagg.errors.UnsignedKeyError: the key of silo 1 does not carry its signature: \
user 1's signature does not verify
"""

from __future__ import annotations

from collections.abc import Iterable

from fedprivacy.crypto.keys import encode_context
from fedprivacy.crypto.signing import Roster, Statement
from fedprivacy.errors import AuthenticationError
from fedprivacy.secagg.consistency import ConsistencyCheck
from fedprivacy.secagg.errors import UnsignedKeyError
from fedprivacy.secagg.private_weighting.randomness import PREFIX

__all__ = ["dh_key_statement", "sign_dh_key", "verify_dh_roster"]


def dh_key_statement(session_id: bytes, silo: int, public_key: bytes) -> bytes:
    """What a silo signs with its key: "in session X, silo S agrees keys with this one"."""
    return encode_context(PREFIX, "dh-key", session_id, silo, public_key)


def sign_dh_key(check: ConsistencyCheck, session_id: bytes, silo: int, public_key: bytes) -> bytes:
    """The silo's signature on its X25519 public key of the session."""
    return check.signing_key.sign(Statement.KEYS, dh_key_statement(session_id, silo, public_key))


def verify_dh_roster(
    roster: Roster, session_id: bytes, own: int, keys: Iterable[tuple[int, bytes, bytes]]
) -> None:
    """Refuse a key roster with a silo outside ``roster`` or a peer key its owner did not sign.

    Raises
    ------
    UnsignedKeyError
        Naming the first such silo.
    """
    for silo, public_key, signature in keys:
        if silo == own:
            continue
        if silo not in roster:
            raise UnsignedKeyError(f"silo {silo} is not in this silo's roster")
        statement = dh_key_statement(session_id, silo, public_key)
        try:
            roster.verify(silo, Statement.KEYS, statement, signature)
        except AuthenticationError as exc:
            raise UnsignedKeyError(
                f"the key of silo {silo} does not carry its signature: {exc}"
            ) from exc
