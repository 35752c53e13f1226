"""Typed messages of the private weighting protocol and their strict byte encoding.

Every message starts with the same header::

    magic "FPPW" | version (1) | kind (1) | phase (1) | session id (16) | round (8) |
    sender (4) | recipient (4)

all integers big-endian; the server's id is :data:`SERVER`, silos are ``0 .. |S|-1``. The body
depends on the kind. Big integers (residues modulo ``n`` or ``n^2``) are fixed-width big-endian.
Parsing is strict: a wrong magic or version, an unknown kind, a phase that does not match the
kind, a setup message with a round other than 0, a field of the wrong size or trailing bytes
raise :class:`MalformedMessageError`. Whether a well-formed message is acceptable *now* (its
session, round, phase, sender) is the receiving party's state machine's decision.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from fedprivacy.secagg.private_weighting.errors import MalformedMessageError
from fedprivacy.wire import MessageFormat, WireReader, pack_pairs

__all__ = [
    "MAGIC",
    "PUBLIC_KEY_BYTES",
    "SERVER",
    "VERSION",
    "BlindedHistogram",
    "DhPublicKey",
    "DhRoster",
    "EncryptedWeights",
    "Header",
    "MaskedUpdate",
    "Message",
    "MessageKind",
    "PaillierKeyAnnouncement",
    "Phase",
    "SeedDelivery",
    "SeedShares",
    "decode_message",
    "encode_message",
    "pack_integers",
    "read_integers",
]

MAGIC = b"FPPW"
VERSION = 1
SERVER = 0xFFFFFFFF
PUBLIC_KEY_BYTES = 32
_FORMAT = MessageFormat(
    MAGIC, VERSION, struct.Struct(">4sBBB16sQII"), "private weighting", MalformedMessageError
)
_MAX_WIDTH = 1 << 16


class Phase(IntEnum):
    """The protocol's two phases: setup (step 1 of Protocol 1) and a training round (step 2)."""

    SETUP = 1
    ROUND = 2


class MessageKind(IntEnum):
    """The eight messages of Protocol 1, in protocol order."""

    PAILLIER_KEY = 1  # 1(a) server -> silo: Paillier public key
    DH_PUBLIC_KEY = 2  # 1(a) silo -> server: X25519 public key
    DH_ROSTER = 3  # 1(b) server -> silo: every silo's X25519 public key
    SEED_SHARES = 4  # 1(c) silo 0 -> server: Enc(R) for every other silo
    SEED_DELIVERY = 5  # 1(c) server -> silo: the Enc(R) addressed to it (none for silo 0)
    BLINDED_HISTOGRAM = 6  # 1(d-e) silo -> server: B'(n_{s,u}) for every user
    ENCRYPTED_WEIGHTS = 7  # 2(a) server -> silo: Enc(B_inv(N_u)) (0 for unsampled users)
    MASKED_UPDATE = 8  # 2(b-c) silo -> server: Enc(Delta_s + noise + masks) per parameter


PHASE_OF: dict[MessageKind, Phase] = {
    kind: (Phase.ROUND if kind >= MessageKind.ENCRYPTED_WEIGHTS else Phase.SETUP)
    for kind in MessageKind
}


@dataclass(frozen=True)
class Header:
    """Routing and binding fields common to every message."""

    kind: MessageKind
    phase: Phase
    session_id: bytes
    round_index: int
    sender: int
    recipient: int


@dataclass(frozen=True)
class PaillierKeyAnnouncement:
    """1(a), server to silo: the Paillier modulus ``n`` (with ``g = n + 1``)."""

    header: Header
    modulus: int


@dataclass(frozen=True)
class DhPublicKey:
    """1(a), silo to server: the silo's X25519 public key and its signature on it.

    The signature is empty (and absent from the encoding) without node authentication
    (:mod:`~fedprivacy.secagg.private_weighting.authentication`).
    """

    header: Header
    public_key: bytes
    signature: bytes = b""


@dataclass(frozen=True)
class DhRoster:
    """1(b), server to silo: ``(silo, X25519 public key, its signature)`` for every silo."""

    header: Header
    keys: tuple[tuple[int, bytes, bytes], ...]


@dataclass(frozen=True)
class SeedShares:
    """1(c), silo 0 to server: ``(recipient, AES-GCM(R))`` for every other silo, to relay."""

    header: Header
    ciphertexts: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True)
class SeedDelivery:
    """1(c), server to silo: ``(0, AES-GCM(R))`` for silos other than 0, empty for silo 0."""

    header: Header
    ciphertexts: tuple[tuple[int, bytes], ...]


@dataclass(frozen=True)
class BlindedHistogram:
    """1(e), silo to server: ``B'(n_{s,u}) = r_u n_{s,u} + masks mod n`` for every user."""

    header: Header
    values: tuple[int, ...]


@dataclass(frozen=True)
class EncryptedWeights:
    """2(a), server to silo: ``Enc(B_inv(N_u))`` (``Enc(0)`` if not sampled) for every user."""

    header: Header
    ciphertexts: tuple[int, ...]


@dataclass(frozen=True)
class MaskedUpdate:
    """2(b-c), silo to server: ``Enc(sum_u w Delta + noise + masks)`` for every parameter."""

    header: Header
    ciphertexts: tuple[int, ...]


Message = (
    PaillierKeyAnnouncement
    | DhPublicKey
    | DhRoster
    | SeedShares
    | SeedDelivery
    | BlindedHistogram
    | EncryptedWeights
    | MaskedUpdate
)


def make_header(
    kind: MessageKind, session_id: bytes, round_index: int, sender: int, recipient: int
) -> Header:
    """Build a header whose phase is the kind's phase."""
    return Header(kind, PHASE_OF[kind], session_id, round_index, sender, recipient)


def pack_integers(values: tuple[int, ...]) -> bytes:
    """``width | count | values``: non-negative integers, fixed-width big-endian."""
    width = max(1, max((v.bit_length() for v in values), default=0) + 7 >> 3)
    if any(v < 0 for v in values):
        raise MalformedMessageError("integers in messages must be non-negative")
    body = b"".join(int(v).to_bytes(width, "big") for v in values)
    return struct.pack(">II", width, len(values)) + body


def read_integers(r: WireReader, what: str) -> tuple[int, ...]:
    """A list written by :func:`pack_integers`: width, count, fixed-width big-endian values."""
    width = r.u32(f"{what} width")
    if not 1 <= width <= _MAX_WIDTH:
        raise MalformedMessageError(f"{what} width {width} is not in [1, {_MAX_WIDTH}]")
    n = r.count(what)
    raw = r.take(width * n, what)
    return tuple(int.from_bytes(raw[i * width : (i + 1) * width], "big") for i in range(n))


def encode_message(message: Message) -> bytes:
    """Serialise a message.

    Parameters
    ----------
    message : Message
        Any protocol message.

    Returns
    -------
    bytes
        The wire encoding, parsed back by :func:`decode_message`.
    """
    h = message.header
    head = _FORMAT.pack_header(
        int(h.kind), int(h.phase), h.session_id, h.round_index, h.sender, h.recipient
    )
    body: bytes
    if isinstance(message, PaillierKeyAnnouncement):
        body = pack_integers((message.modulus,))
    elif isinstance(message, DhPublicKey):
        sig = message.signature
        body = message.public_key + (struct.pack(">H", len(sig)) + sig if sig else b"")
    elif isinstance(message, DhRoster):
        body = struct.pack(">I", len(message.keys)) + b"".join(
            struct.pack(">I", s) + pk + struct.pack(">H", len(sig)) + sig
            for s, pk, sig in message.keys
        )
    elif isinstance(message, SeedShares | SeedDelivery):
        body = pack_pairs(message.ciphertexts)
    elif isinstance(message, BlindedHistogram):
        body = pack_integers(message.values)
    else:
        body = pack_integers(message.ciphertexts)
    return head + body


def decode_message(data: bytes) -> Message:
    """Parse bytes produced by :func:`encode_message`.

    Parameters
    ----------
    data : bytes
        One whole message.

    Returns
    -------
    Message
        The typed message, its header's phase that of its kind.

    Raises
    ------
    MalformedMessageError
        On any deviation from the format (see the module docstring), including a phase that
        does not match the kind, a setup message of a round other than 0, or an integer list of
        width 0 or above 65536 bytes.
    """
    fields, r = _FORMAT.unpack_header(data)
    kind_code, phase_code, session, round_index, sender, recipient = fields
    try:
        kind = MessageKind(kind_code)
        phase = Phase(phase_code)
    except ValueError:
        raise MalformedMessageError(f"unknown kind {kind_code} or phase {phase_code}") from None
    if PHASE_OF[kind] is not phase:
        raise MalformedMessageError(f"{kind.name} belongs to phase {PHASE_OF[kind].name}")
    if phase is Phase.SETUP and round_index != 0:
        raise MalformedMessageError("setup messages carry round 0")
    header = Header(kind, phase, session, round_index, sender, recipient)
    message: Message
    if kind is MessageKind.PAILLIER_KEY:
        values = read_integers(r, "modulus")
        if len(values) != 1:
            raise MalformedMessageError("a key announcement carries exactly one modulus")
        message = PaillierKeyAnnouncement(header, values[0])
    elif kind is MessageKind.DH_PUBLIC_KEY:
        public_key, signature = r.take(PUBLIC_KEY_BYTES, "public key"), b""
        if r.offset < len(data):
            signature = r.take(r.u16("signature length"), "signature")
            if not signature:
                raise MalformedMessageError("an empty signature is encoded as none")
        message = DhPublicKey(header, public_key, signature)
    elif kind is MessageKind.DH_ROSTER:
        keys = tuple(
            (
                r.u32("silo"),
                r.take(PUBLIC_KEY_BYTES, "public key"),
                r.take(r.u16("signature length"), "signature"),
            )
            for _ in range(r.count("roster"))
        )
        message = DhRoster(header, keys)
    elif kind in (MessageKind.SEED_SHARES, MessageKind.SEED_DELIVERY):
        cls = SeedShares if kind is MessageKind.SEED_SHARES else SeedDelivery
        message = cls(header, r.pairs("ciphertexts"))
    elif kind is MessageKind.BLINDED_HISTOGRAM:
        message = BlindedHistogram(header, read_integers(r, "histogram"))
    elif kind is MessageKind.ENCRYPTED_WEIGHTS:
        message = EncryptedWeights(header, read_integers(r, "ciphertexts"))
    else:
        message = MaskedUpdate(header, read_integers(r, "ciphertexts"))
    r.finish()
    return message
