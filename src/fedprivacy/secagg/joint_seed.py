"""A seed the parties draw together: commit, then reveal, so no party (nor the server) chooses it.

Bell et al.'s bound on the SecAgg+ degree (:mod:`fedprivacy.secagg.degree_bound`) holds for a
*random* graph. Drawn from a seed the server picks, the graph is the server's: it can grind the
seed until its colluders are a victim's only neighbours (issue #50, finding 2). Here each party
draws 32 secret bytes from the OS and the seed is a hash of everyone's:

1. **commit**: each party sends :func:`commitment` of its secret (bound to the session and its
   user id);
2. **reveal**: the server sends every party the list of commitments; the party checks that its
   own is in it, fixes the list's :func:`commitments_digest` and only then reveals its secret,
   once per session: a second list is refused, so nothing can be committed after a reveal;
3. **draw**: the server sends every party the secrets; the party checks them against the digest
   it fixed (:func:`check_secrets`) and computes :func:`joint_seed`.

A party's own secret, unknown to everyone until the commitments are fixed, makes the seed it
computes uniform whatever the others (and the server, forging any of them) committed to; the
server can only refuse to finish and start a new session, which the party sees (each new session
is a fresh draw: grinding costs a whole exchange per try, and the party's degree floor keeps the
chance that one try succeeds below 2^-40). A server that sends two parties different lists only
makes their graphs disagree, so the round fails: a liveness fault, not a leak.

Examples
--------
>>> session = bytes(16)
>>> secrets = {u: bytes([u]) * SECRET_BYTES for u in (0, 1, 2)}
>>> commitments = {u: commitment(session, u, s) for u, s in secrets.items()}
>>> digest = commitments_digest(session, commitments)
>>> check_secrets(session, digest, secrets) == joint_seed(session, secrets)
True
>>> check_secrets(session, digest, {**secrets, 2: bytes(SECRET_BYTES)})
Traceback (most recent call last):
...
fedprivacy.secagg.errors.ProtocolViolationError: the revealed secrets do not open the \
commitments this party fixed before it revealed its own
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping

from fedprivacy.secagg.errors import MalformedMessageError, ProtocolViolationError

__all__ = [
    "SECRET_BYTES",
    "check_secrets",
    "commitment",
    "commitments_digest",
    "decode_entries",
    "encode_entries",
    "graph_seed",
    "joint_seed",
]

SECRET_BYTES = 32
"""The length of a party's secret, and of a commitment."""

_ENTRY = struct.Struct(">Q")


def _hash(label: bytes, *parts: bytes) -> bytes:
    h = hashlib.sha256(b"fedprivacy joint seed: " + label)
    for part in parts:
        h.update(_ENTRY.pack(len(part)) + part)
    return h.digest()


def commitment(session: bytes, user: int, secret: bytes) -> bytes:
    """``user``'s commitment to ``secret`` in ``session`` (SHA-256, hiding and binding)."""
    return _hash(b"commit", session, _ENTRY.pack(int(user)), secret)


def encode_entries(entries: Mapping[int, bytes]) -> bytes:
    """``user -> 32 bytes`` as bytes, by user: 8 bytes of user id, then the value.

    >>> decode_entries(encode_entries({3: bytes(32), 1: bytes(32)})) == {1: bytes(32), 3: bytes(32)}
    True
    """
    return b"".join(_ENTRY.pack(u) + entries[u] for u in sorted(entries))


def decode_entries(data: object) -> dict[int, bytes]:
    """Inverse of :func:`encode_entries`; :class:`MalformedMessageError` on anything else."""
    size = _ENTRY.size + SECRET_BYTES
    if not isinstance(data, bytes) or not data or len(data) % size:
        raise MalformedMessageError(f"a list of joint-seed entries is a multiple of {size} bytes")
    out: dict[int, bytes] = {}
    for at in range(0, len(data), size):
        (user,) = _ENTRY.unpack_from(data, at)
        if user in out:
            raise MalformedMessageError(f"user {user} appears twice in the list")
        out[user] = data[at + _ENTRY.size : at + size]
    return out


def commitments_digest(session: bytes, commitments: Mapping[int, bytes]) -> bytes:
    """The digest of the whole list of commitments a party fixes before it reveals."""
    return _hash(b"list", session, encode_entries(commitments))


def joint_seed(session: bytes, secrets: Mapping[int, bytes]) -> bytes:
    """The seed of ``session``: a hash of every committed party's secret, in user order."""
    return _hash(b"seed", session, encode_entries(secrets))


def graph_seed(seed: bytes) -> bytes:
    """The SecAgg+ graph's seed (:attr:`~fedprivacy.secagg.params.SecAggParameters.graph_seed`)."""
    return _hash(b"graph", seed)


def check_secrets(session: bytes, digest: bytes, secrets: Mapping[int, bytes]) -> bytes:
    """The joint seed, once ``secrets`` open exactly the commitments whose ``digest`` was fixed.

    Raises
    ------
    ProtocolViolationError
        If any secret does not open its commitment, or the users are not the list's.
    """
    opened = {u: commitment(session, u, s) for u, s in secrets.items()}
    if commitments_digest(session, opened) != digest:
        raise ProtocolViolationError(
            "the revealed secrets do not open the commitments this party fixed before it "
            "revealed its own"
        )
    return joint_seed(session, secrets)
