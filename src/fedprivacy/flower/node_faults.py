"""Fault injection on a node's side: the messages a malicious node sends instead of its own.

Used by :class:`~fedprivacy.flower.node.Node` when its ``fault`` names them (tests and
demonstrations of what the server does about a malicious party); an honest node never calls them.
"""

from __future__ import annotations

import dataclasses

from fedprivacy.crypto.shamir import PRIME, Share
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.messages import UnmaskResponse, decode_message, encode_message

__all__ = ["bend_shares"]


def bend_shares(reply: bytes) -> bytes:
    """The unmasking response ``reply`` with every share wrong (``badshare@R``).

    Each share keeps its point, length and format, so the server accepts the message; one limb
    is off by one, so every secret rebuilt with it fails its commitment or public key.

    Parameters
    ----------
    reply : bytes
        The node's encoded :class:`~fedprivacy.secagg.messages.UnmaskResponse`.

    Returns
    -------
    bytes
        The same response with bent shares.

    Raises
    ------
    MalformedMessageError
        If ``reply`` is not an unmasking response.
    """
    message = decode_message(reply)
    if not isinstance(message, UnmaskResponse):
        raise MalformedMessageError("only an unmasking response carries shares to bend")
    bent = []
    for owner, kind, raw in message.shares:
        share = Share.from_bytes(raw)
        values = ((share.values[0] + 1) % PRIME, *share.values[1:])
        bent.append((owner, kind, Share(share.x, values, share.secret_length).to_bytes()))
    return encode_message(dataclasses.replace(message, shares=tuple(bent)))
