"""Typed protocol messages and their byte encoding.

Every message starts with the same header::

    magic "FPSA" | version (1) | kind (1) | session id (16) | round (8) | sender (4) | recipient (4)

all integers big-endian, followed by a kind-specific body. The server's id is ``SERVER``.
The two messages of the optional consistency check (:mod:`fedprivacy.secagg.consistency`) come
between the masked inputs and the unmask request, which then carries the signatures: an unmask
request without signatures is encoded exactly as without the check.

Parsing is strict: a wrong magic or version, an unknown kind, a field of the wrong size or bytes
left over raise :class:`MalformedMessageError`. Whether a well-formed message is acceptable *now*
(its round, sender and stage) is the receiving state machine's decision.

Examples
--------
>>> header = Header(MessageKind.UNMASK_REQUEST, bytes(16), 3, SERVER, 1)
>>> plain = UnmaskRequest(header, (1, 2, 3))
>>> len(encode_message(plain))
54
>>> signed = UnmaskRequest(header, (1, 2, 3), ((1, b"sig of 1"), (2, b"sig of 2")))
>>> decode_message(encode_message(signed)) == signed, len(encode_message(signed))
(True, 90)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from fedprivacy.crypto.shamir import Share
from fedprivacy.errors import ShamirError
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.wire import MessageFormat, WireReader, pack_pairs

MAGIC = b"FPSA"
VERSION = 1
SERVER = 0xFFFFFFFF
PUBLIC_KEY_BYTES = 32
COMMITMENT_BYTES = 32
_FORMAT = MessageFormat(
    MAGIC,
    VERSION,
    struct.Struct(">4sBB16sQII"),
    "fedprivacy secure aggregation",
    MalformedMessageError,
)


class MessageKind(IntEnum):
    """The seven messages of the four stages (Bonawitz et al., Fig. 4) and the consistency check."""

    ADVERTISE_KEYS = 1
    KEY_ROSTER = 2
    SHARE_KEYS = 3
    SHARE_DELIVERY = 4
    MASKED_INPUT = 5
    UNMASK_REQUEST = 6
    UNMASK_RESPONSE = 7
    CONSISTENCY_REQUEST = 8
    CONSISTENCY_RESPONSE = 9


class ServerStage(IntEnum):
    """The message kind the server is collecting."""

    KEYS = 0
    SHARES = 1
    INPUTS = 2
    UNMASK = 3
    DONE = 4
    ABORTED = 5


class ShareKind(IntEnum):
    """Which secret a revealed share belongs to."""

    SELF_MASK_SEED = 1  # b_u: revealed for users whose input is aggregated
    MASK_KEY = 2  # s_sk_u: revealed for users whose input is not aggregated
    # with reused keys (:mod:`fedprivacy.secagg.key_epoch`): not a share but this round's
    # pairwise mask key with a non-aggregated neighbour, revealed by an aggregated user
    PAIR_MASK_KEY = 3


@dataclass(frozen=True)
class Header:
    """Routing and binding fields common to every message."""

    kind: MessageKind
    session_id: bytes
    round_index: int
    sender: int
    recipient: int


@dataclass(frozen=True)
class AdvertiseKeys:
    """Stage 0, client to server: the public keys ``c_pk``, ``s_pk`` and a commitment to ``b_u``.

    ``signature`` is the node's signature on its keys (:mod:`fedprivacy.secagg.signed_keys`);
    empty (and absent from the encoding) for a node without node authentication.
    """

    header: Header
    encryption_key: bytes
    masking_key: bytes
    seed_commitment: bytes
    signature: bytes = b""


@dataclass(frozen=True)
class KeyRoster:
    """Stage 0 reply, server to client: the public keys of every user that advertised.

    Each entry carries the signature its owner advertised with (empty: none).
    """

    header: Header
    keys: tuple[tuple[int, bytes, bytes, bytes], ...]  # (user, c_pk, s_pk, signature)


@dataclass(frozen=True)
class ShareKeys:
    """Stage 1, client to server: encrypted shares for each neighbour, to be relayed.

    A client with reused keys (:mod:`fedprivacy.secagg.key_epoch`) did not advertise this
    round: ``seed_commitment`` then carries its commitment to ``b_u``; ``None`` (and absent from
    the encoding) otherwise.
    """

    header: Header
    ciphertexts: tuple[tuple[int, bytes], ...]  # (receiver, AES-GCM ciphertext)
    seed_commitment: bytes | None = None


@dataclass(frozen=True)
class ShareDelivery:
    """Stage 1 reply, server to client: the ciphertexts addressed to this client."""

    header: Header
    ciphertexts: tuple[tuple[int, bytes], ...]  # (sender, AES-GCM ciphertext)


@dataclass(frozen=True)
class MaskedInput:
    """Stage 2, client to server: the masked, encoded vector."""

    header: Header
    vector: np.ndarray


@dataclass(frozen=True)
class ConsistencyRequest:
    """Consistency check, server to client: the aggregated set ``S`` the server will unmask."""

    header: Header
    aggregated: tuple[int, ...]


@dataclass(frozen=True)
class ConsistencyResponse:
    """Consistency check, client to server: the client's signature on ``S`` (DER ECDSA)."""

    header: Header
    signature: bytes


@dataclass(frozen=True)
class UnmaskRequest:
    """Stage 2 reply, server to client: the users whose inputs will be aggregated.

    With the consistency check, ``signatures`` holds ``(signer, signature)`` of the members of
    the aggregated set that signed it; empty (and absent from the encoding) without the check.
    """

    header: Header
    aggregated: tuple[int, ...]
    signatures: tuple[tuple[int, bytes], ...] = ()


@dataclass(frozen=True, eq=False)
class UnmaskResponse:
    """Stage 3, client to server: one share per neighbour, of ``b`` or of ``s_sk``, never both.

    In the exact noise mode (:mod:`fedprivacy.dp.noise_modes`) ``excess`` is the noise this
    client removes from the sum, encoded like a masked input; ``None`` (and absent from the
    encoding) otherwise.
    """

    header: Header
    shares: tuple[tuple[int, ShareKind, bytes], ...]  # (owner, kind, serialised Share)
    excess: np.ndarray | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UnmaskResponse):
            return NotImplemented
        a, b = self.excess, other.excess
        same_excess = a is b if a is None or b is None else bool(np.array_equal(a, b))
        return self.header == other.header and self.shares == other.shares and same_excess


Message = (
    AdvertiseKeys
    | KeyRoster
    | ShareKeys
    | ShareDelivery
    | MaskedInput
    | UnmaskRequest
    | UnmaskResponse
    | ConsistencyRequest
    | ConsistencyResponse
)


def _header_bytes(h: Header) -> bytes:
    return _FORMAT.pack_header(int(h.kind), h.session_id, h.round_index, h.sender, h.recipient)


def encode_message(message: Message) -> bytes:
    """Serialise a message to bytes.

    Parameters
    ----------
    message : Message
        Any of the protocol's messages.

    Returns
    -------
    bytes
        The wire encoding, parsed back by :func:`decode_message`.

    """
    parts = [_header_bytes(message.header)]
    if isinstance(message, AdvertiseKeys):
        parts += [message.encryption_key, message.masking_key, message.seed_commitment]
        if message.signature:
            parts += [struct.pack(">H", len(message.signature)), message.signature]
    elif isinstance(message, KeyRoster):
        parts.append(struct.pack(">I", len(message.keys)))
        for user, c_pk, s_pk, signature in message.keys:
            parts += [struct.pack(">I", user), c_pk, s_pk]
            parts += [struct.pack(">H", len(signature)), signature]
    elif isinstance(message, ShareKeys | ShareDelivery):
        parts.append(pack_pairs(message.ciphertexts))
        if isinstance(message, ShareKeys) and message.seed_commitment is not None:
            parts.append(message.seed_commitment)
    elif isinstance(message, MaskedInput):
        parts += _vector_bytes(message.vector)
    elif isinstance(message, UnmaskRequest | ConsistencyRequest):
        parts.append(struct.pack(">I", len(message.aggregated)))
        parts += [struct.pack(">I", u) for u in message.aggregated]
        if isinstance(message, UnmaskRequest) and message.signatures:
            parts.append(pack_pairs(message.signatures))
    elif isinstance(message, ConsistencyResponse):
        parts += [struct.pack(">H", len(message.signature)), message.signature]
    else:
        parts.append(struct.pack(">I", len(message.shares)))
        for owner, kind, share in message.shares:
            parts += [struct.pack(">IBH", owner, int(kind), len(share)), share]
        if message.excess is not None:
            parts += _vector_bytes(message.excess)
    return b"".join(parts)


def check_vector(params: SecAggParameters, vec: np.ndarray, what: str) -> np.ndarray:
    """``vec`` if it is a vector of the round's field, else a typed error naming ``what``.

    Raises
    ------
    MalformedMessageError
        If the dtype or length is not the round's, or an entry exceeds ``2**bits``.
    """
    if vec.dtype != params.codec.dtype or vec.shape != (params.vector_length,):
        raise MalformedMessageError(
            f"{what} has dtype {vec.dtype} and shape {vec.shape}; expected "
            f"{params.codec.dtype} and ({params.vector_length},)"
        )
    bits = params.codec.bits
    if bits < 8 * vec.dtype.itemsize and vec.size and int(vec.max()) >> bits:
        raise MalformedMessageError(f"{what} exceeds 2**{bits}")
    return vec


def _vector_bytes(vec: np.ndarray) -> list[bytes]:
    """A vector's encoding: word size (1) | length (4) | little-endian words."""
    little = vec.astype(vec.dtype.newbyteorder("<"), copy=False)
    return [struct.pack(">BI", vec.dtype.itemsize, vec.size), little.tobytes()]


def _read_vector(r: WireReader, what: str) -> np.ndarray:
    """Inverse of :func:`_vector_bytes`: a read-only view of the message's bytes."""
    itemsize = r.u8("word size")
    if itemsize not in (4, 8):
        raise MalformedMessageError(f"word size {itemsize} is not 4 or 8")
    length = r.u32(f"{what} length")
    start = r.offset
    r.take_view(itemsize * length, what)
    dtype = np.dtype(f"<u{itemsize}")
    # no copy (byte-swapped only on big-endian hosts)
    vector = np.frombuffer(r.data, dtype=dtype, count=length, offset=start)
    return vector.astype(dtype.newbyteorder("="), copy=False)


def _signature(r: WireReader) -> bytes:
    """A trailing key signature; an empty one is encoded as none."""
    signature = r.take(r.u16("signature length"), "signature")
    if not signature:
        raise MalformedMessageError("an empty signature is encoded as none")
    return signature


def decode_message(data: bytes) -> Message:
    """Parse bytes produced by :func:`encode_message`.

    Parameters
    ----------
    data : bytes
        One whole message.

    Returns
    -------
    Message
        The typed message; a :class:`MaskedInput`'s vector is a read-only view of ``data``.

    Raises
    ------
    MalformedMessageError
        On any deviation from the format (see the module docstring), including a word size
        other than 4 or 8 bytes or an unknown share kind.

    """
    (kind_code, session_id, round_index, sender, recipient), r = _FORMAT.unpack_header(data)
    try:
        kind = MessageKind(kind_code)
    except ValueError:
        raise MalformedMessageError(f"unknown message kind {kind_code}") from None
    header = Header(kind, session_id, round_index, sender, recipient)
    message: Message
    if kind is MessageKind.ADVERTISE_KEYS:
        message = AdvertiseKeys(
            header,
            r.take(PUBLIC_KEY_BYTES, "c_pk"),
            r.take(PUBLIC_KEY_BYTES, "s_pk"),
            r.take(COMMITMENT_BYTES, "seed commitment"),
            _signature(r) if r.offset < len(r.data) else b"",
        )
    elif kind is MessageKind.KEY_ROSTER:
        keys = tuple(
            (
                r.u32("user"),
                r.take(PUBLIC_KEY_BYTES, "c_pk"),
                r.take(PUBLIC_KEY_BYTES, "s_pk"),
                r.take(r.u16("signature length"), "signature"),
            )
            for _ in range(r.count("roster"))
        )
        message = KeyRoster(header, keys)
    elif kind is MessageKind.SHARE_KEYS:
        ciphertexts = r.pairs("ciphertext")
        commitment = r.take(COMMITMENT_BYTES, "seed commitment") if r.offset < len(r.data) else None
        message = ShareKeys(header, ciphertexts, commitment)
    elif kind is MessageKind.SHARE_DELIVERY:
        message = ShareDelivery(header, r.pairs("ciphertext"))
    elif kind is MessageKind.MASKED_INPUT:
        message = MaskedInput(header, _read_vector(r, "vector"))
    elif kind in (MessageKind.UNMASK_REQUEST, MessageKind.CONSISTENCY_REQUEST):
        users = tuple(r.u32("user") for _ in range(r.count("users")))
        if kind is MessageKind.CONSISTENCY_REQUEST:
            message = ConsistencyRequest(header, users)
        elif r.offset == len(r.data):
            message = UnmaskRequest(header, users)
        else:
            signatures = r.pairs("signatures")
            if not signatures:
                raise MalformedMessageError("an empty signature list is encoded as none")
            message = UnmaskRequest(header, users, signatures)
    elif kind is MessageKind.CONSISTENCY_RESPONSE:
        message = ConsistencyResponse(header, r.take(r.u16("signature length"), "signature"))
    else:
        message = _read_unmask_response(header, r)
    r.finish()
    return message


def _read_unmask_response(header: Header, r: WireReader) -> UnmaskResponse:
    """The shares an unmasking client reveals, each with its kind, then any noise excess."""
    shares = []
    for _ in range(r.count("shares")):
        owner = r.u32("owner")
        code = r.u8("share kind")
        try:
            share_kind = ShareKind(code)
        except ValueError:
            raise MalformedMessageError(f"unknown share kind {code}") from None
        shares.append((owner, share_kind, r.take(r.u16("share length"), "share")))
    excess = _read_vector(r, "excess") if r.offset < len(r.data) else None
    return UnmaskResponse(header, tuple(shares), excess)


def encode_share_plaintext(
    sender: int, receiver: int, seed_share: Share, key_share: Share | None
) -> bytes:
    """Plaintext of one encrypted share: ids, then the two length-prefixed shares.

    A client with reused keys shares no key: ``key_share`` is then None, encoded with length 0.
    """
    a = seed_share.to_bytes()
    b = b"" if key_share is None else key_share.to_bytes()
    return struct.pack(">IIH", sender, receiver, len(a)) + a + struct.pack(">H", len(b)) + b


def decode_share_plaintext(data: bytes) -> tuple[int, int, Share, Share | None]:
    """Inverse of :func:`encode_share_plaintext`; :class:`MalformedMessageError` on bad bytes."""
    try:
        sender, receiver, la = struct.unpack_from(">IIH", data)
        a = data[10 : 10 + la]
        (lb,) = struct.unpack_from(">H", data, 10 + la)
        b = data[12 + la : 12 + la + lb]
        if len(a) != la or len(b) != lb or 12 + la + lb != len(data):
            raise MalformedMessageError("share plaintext has the wrong length")
        return sender, receiver, Share.from_bytes(a), Share.from_bytes(b) if b else None
    except (struct.error, ShamirError) as exc:
        raise MalformedMessageError(f"bad share plaintext: {exc}") from exc
