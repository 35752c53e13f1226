"""Fault injection on a node's side: the messages a malicious node sends instead of its own.

Used by :class:`~fedprivacy.flower.nodes.node.Node` and
:class:`~fedprivacy.flower.uldp.silo_node.SiloNode` when their ``fault`` names them (tests and
demonstrations of what the server does about a malicious party); an honest node never calls them. A
``fault`` is a comma-separated list of ``KIND@R`` (this party, in round ``R``) and ``KIND@R:first``
(whichever party is the first one asked in round ``R``, the lowest id: :func:`fault_fires`; what
``--replay *@R`` gives every node, since on a deployment the nodes draw their batches and nobody
knows beforehand who will be asked; the first party's unmasking shares are the first the server
tries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from fedprivacy.crypto.shamir import PRIME, Share
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.messages import UnmaskResponse, decode_message, encode_message

__all__ = ["bend_shares", "fault_fires"]


def fault_fires(
    fault: str, kind: str, round_index: int, party: int, asked: Collection[int]
) -> bool:
    """Whether ``fault`` makes ``party`` misbehave as ``kind`` now (see the module docstring).

    >>> fault_fires("badshare@0,replay@2:first", "replay", 2, 1, [1, 5])
    True
    >>> fault_fires("replay@2:first", "replay", 2, 5, [1, 5]), fault_fires("", "replay", 2, 1, [1])
    (False, False)
    """
    for item in filter(None, fault.split(",")):
        name, _, rest = item.partition("@")
        r, _, who = rest.partition(":")
        if name == kind and r == str(round_index) and (who != "first" or party == min(asked)):
            return True
    return False


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
