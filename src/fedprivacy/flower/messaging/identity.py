"""Who a node is: its user id bound to its key, and the server's roster of admitted nodes.

A node's id is whatever it claims unless the claim is signed. With node authentication each
node holds the private key of its SuperNode authentication pair (its policy's ``signing_key``);
the server's ``hello`` carries a fresh nonce and the node answers with its user id and a
signature over ``(nonce, user)`` (:func:`hello_payload`), in the signing context of a hello
(:class:`~fedprivacy.crypto.signing.Statement`), and only for a nonce of exactly
:data:`NONCE_BYTES` bytes: the server cannot make the node sign bytes of its choosing. The
server checks each claim against the federation's :class:`~fedprivacy.crypto.signing.Roster`
(user -> public key, from the operator who admits the nodes) in :func:`admit`: a claim that
does not verify, a user outside the roster, or two nodes claiming one user drop those nodes (an
``identity_refused`` event each), never the run. Without a roster the claims are taken as they
come, and a duplicate claim still drops both claimants.

Adversary: a malicious node (claims another user's id, replays another node's signed hello
from an earlier run: the nonce is fresh); not the server, which admits whom it likes (the nodes'
own checks, :mod:`fedprivacy.flower.nodes.node_policy`, do not depend on the roster it builds). A
server that sends a nonce of another length gets no signature (:class:`~fedprivacy.errors.
AuthenticationError` on the node).

Examples
--------
>>> from fedprivacy.crypto.signing import Roster, SigningKey, Statement
>>> keys = {u: SigningKey.generate() for u in (0, 1)}
>>> roster = Roster({u: k.public_openssh() for u, k in keys.items()})
>>> nonce = new_nonce()
>>> def hello(key, user):
...     return {"user": user, "signature": key.sign(Statement.HELLO, hello_payload(nonce, user))}
>>> replies = {10: hello(keys[0], 0), 11: hello(keys[1], 0), 12: hello(keys[1], 1)}  # 11 lies
>>> admitted, refused = admit(replies, nonce, roster)
>>> admitted, [(e["node"], e["detail"]) for e in refused]
({0: 10, 1: 12}, [(11, "user 0's signature does not verify")])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fedprivacy.crypto.signing import Roster, SigningKey, Statement
from fedprivacy.errors import AuthenticationError
from fedprivacy.policy import PartyPolicy

__all__ = ["admit", "hello_payload", "new_nonce", "signed_hello"]

NONCE_BYTES = 16


def new_nonce() -> bytes:
    """A fresh nonce from the OS for one ``hello`` round."""
    return os.urandom(NONCE_BYTES)


def hello_payload(nonce: bytes, user: int) -> bytes:
    """What a node signs to claim ``user`` in answer to ``nonce`` (:data:`NONCE_BYTES` bytes).

    Raises
    ------
    AuthenticationError
        If the nonce is not exactly :data:`NONCE_BYTES` bytes long.
    """
    if len(nonce) != NONCE_BYTES:
        raise AuthenticationError(
            f"a hello nonce has {NONCE_BYTES} bytes, not {len(nonce)}: nothing is signed"
        )
    return nonce + int(user).to_bytes(8, "big")


def signed_hello(user: int, policy: PartyPolicy, request: Mapping[str, Any]) -> dict[str, Any]:
    """A node's ``hello`` reply: its user, signed over the request's nonce with its own key.

    Unsigned when the node's policy names no signing key or the request carries no nonce.
    """
    reply: dict[str, Any] = {"user": int(user)}
    nonce = request.get("nonce")
    if policy.signing_key and isinstance(nonce, bytes):
        key = SigningKey.from_file(policy.signing_key)
        reply["signature"] = key.sign(Statement.HELLO, hello_payload(nonce, user))
    return reply


def _claim(reply: Mapping[str, Any], nonce: bytes, roster: Roster | None) -> int:
    """The user a reply claims, verified against ``roster``; AuthenticationError otherwise."""
    user = reply.get("user")
    if not isinstance(user, int) or isinstance(user, bool) or user < 0:
        raise AuthenticationError("the reply names no user")
    if roster is not None:
        signature = reply.get("signature")
        if not isinstance(signature, bytes):
            raise AuthenticationError(f"the claim to be user {user} is not signed")
        roster.verify(user, Statement.HELLO, hello_payload(nonce, user), signature)
    return user


def admit(
    replies: Mapping[int, Mapping[str, Any]], nonce: bytes, roster: Roster | None
) -> tuple[dict[int, int], list[dict[str, Any]]]:
    """The user -> node mapping of the verified claims, and an event per refused node.

    Parameters
    ----------
    replies : mapping of int to mapping
        Node id -> its ``hello`` reply (``user``, and ``signature`` with a roster).
    nonce : bytes
        The nonce the ``hello`` requests carried.
    roster : Roster or None
        The federation's public keys; ``None`` takes the claims as they come.

    Returns
    -------
    tuple of dict and list
        User -> node id, and ``identity_refused`` events (``node``, ``user``, ``detail``).
    """
    claims: dict[int, list[int]] = {}
    refused: list[dict[str, Any]] = []
    for node, reply in sorted(replies.items()):
        try:
            claims.setdefault(_claim(reply, nonce, roster), []).append(node)
        except AuthenticationError as exc:
            event = {"event": "identity_refused", "node": node, "user": reply.get("user")}
            refused.append({**event, "detail": str(exc)})
    admitted: dict[int, int] = {}
    for user, nodes in sorted(claims.items()):
        if len(nodes) == 1:
            admitted[user] = nodes[0]
            continue
        for node in nodes:
            detail = f"nodes {nodes} all claim user {user}: none is admitted"
            refused.append(
                {"event": "identity_refused", "node": node, "user": user, "detail": detail}
            )
    return admitted, refused
