"""What an unmasking client reveals about each neighbour, and the server's check of it.

One rule for both sides (:func:`reveal_kind`): for a neighbour ``v`` of the responder ``w``,

- ``v`` aggregated: the share of ``v``'s self-mask seed ``b_v``;
- ``v`` left out, with fresh keys this round: the share of its masking key ``s_sk_v``;
- ``v`` left out, reusing its keys (:mod:`fedprivacy.secagg.key_epoch`): nothing that belongs
  to ``v`` alone, but, when ``w`` itself is aggregated, this round's key of the pairwise mask
  between ``w`` and ``v`` (the mask ``v``'s absence leaves in ``w``'s input).

Never both a share of ``b_v`` and anything that removes ``v``'s pairwise masks.

Examples
--------
>>> reveal_kind(owner=3, responder=1, aggregated={1, 3}, reusing=set()).name
'SELF_MASK_SEED'
>>> reveal_kind(owner=3, responder=1, aggregated={1, 2}, reusing=set()).name
'MASK_KEY'
>>> reveal_kind(owner=3, responder=1, aggregated={1, 2}, reusing={3}).name
'PAIR_MASK_KEY'
>>> reveal_kind(owner=3, responder=4, aggregated={1, 2}, reusing={3}) is None
True
"""

from __future__ import annotations

from collections.abc import Collection

from fedprivacy.crypto.keys import KEY_BYTES
from fedprivacy.crypto.shamir import Share
from fedprivacy.errors import ShamirError
from fedprivacy.secagg.errors import MalformedMessageError, ProtocolViolationError
from fedprivacy.secagg.messages import ShareKind, UnmaskResponse
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.secagg.recovery import SECRET_BYTES

__all__ = ["RevealedShares", "check_response", "reveal_kind"]

RevealedShares = dict[int, tuple[ShareKind, Share]]
"""One response's shares: owner -> (kind, share)."""


def reveal_kind(
    owner: int, responder: int, aggregated: Collection[int], reusing: Collection[int]
) -> ShareKind | None:
    """What ``responder`` reveals about its neighbour ``owner`` (module docstring).

    Parameters
    ----------
    owner, responder : int
        The neighbour and the unmasking client.
    aggregated : collection of int
        The aggregated set ``S``.
    reusing : collection of int
        The users that reuse their keys this round (they shared no masking key).

    Returns
    -------
    ShareKind or None
        None when it reveals nothing about ``owner``.

    """
    if owner in aggregated:
        return ShareKind.SELF_MASK_SEED
    if owner not in reusing:
        return ShareKind.MASK_KEY
    return ShareKind.PAIR_MASK_KEY if responder in aggregated else None


def check_response(
    params: SecAggParameters, msg: UnmaskResponse, expected: dict[int, ShareKind]
) -> tuple[RevealedShares, dict[int, bytes]]:
    """Parse an unmask response that must reveal exactly ``expected``.

    Parameters
    ----------
    params : SecAggParameters
        The round's parameters.
    msg : UnmaskResponse
        The response.
    expected : dict of int to ShareKind
        Owner -> what the responder must reveal about it (:func:`reveal_kind`).

    Returns
    -------
    shares : dict of int to (ShareKind, Share)
        The shares, by owner.
    pair_keys : dict of int to bytes
        The revealed pairwise mask keys, by the neighbour they are shared with.

    Raises
    ------
    ProtocolViolationError
        A kind other than expected, a missing owner, or a share at another user's point.
    MalformedMessageError
        An owner twice, a bad share, or a secret or key of the wrong length.

    """
    sender = msg.header.sender
    shares: RevealedShares = {}
    pair_keys: dict[int, bytes] = {}
    for owner, kind, raw in msg.shares:
        if owner in shares or owner in pair_keys:
            raise MalformedMessageError(f"{sender} sent two shares of {owner}")
        if expected.get(owner) is not kind:
            raise ProtocolViolationError(
                f"{sender} revealed a {kind.name} share of {owner}; expected "
                f"{expected[owner].name if owner in expected else 'none'}"
            )
        if kind is ShareKind.PAIR_MASK_KEY:
            if len(raw) != KEY_BYTES:
                raise MalformedMessageError(f"{sender} sent a {len(raw)}-byte pairwise mask key")
            pair_keys[owner] = raw
        else:
            shares[owner] = (kind, _share(params, sender, owner, kind, raw))
    if shares.keys() | pair_keys.keys() != expected.keys():
        raise ProtocolViolationError(f"{sender} did not send one share per neighbour")
    return shares, pair_keys


def _share(params: SecAggParameters, sender: int, owner: int, kind: ShareKind, raw: bytes) -> Share:
    try:
        share = Share.from_bytes(raw)
    except ShamirError as exc:
        raise MalformedMessageError(f"bad share from {sender}: {exc}") from exc
    if share.x != params.share_point(sender):
        raise ProtocolViolationError(f"{sender} sent a share with another user's point")
    if share.secret_length != SECRET_BYTES[kind]:
        raise MalformedMessageError(
            f"{sender} sent a share of a {share.secret_length}-byte secret as its "
            f"{kind.name} share of {owner} ({SECRET_BYTES[kind]} bytes)"
        )
    return share
