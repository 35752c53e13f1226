"""A round's public parameters as bytes, so that they can travel in a message.

The encoding, all integers big-endian::

    magic "FPSP" | version (1) | session id (16) | round (8) | dimension (8) | threshold (4)
    | clip (f64) | scale (f64) | bits (1) | weighted (1: 0 or 1) | degree (4) | ring block (4)
    | participant count (4) | participant (4)...  (strictly ascending)
    | position count (4: 0 or the participant count) | position (4)...
    | graph seed length (4) | graph seed | vector name length (4) | vector name (UTF-8)

A degree or ring block of 0 stands for ``None`` (both are at least 2 when set). Floats are
IEEE 754 doubles, so the codec round-trips exactly. Parsing is strict: a wrong magic or
version, a field of the wrong size, a flag other than 0 or 1, participants out of order, a
vector name that is not UTF-8 or bytes left over raise :class:`MalformedMessageError`; values
that parse but do not make valid parameters raise the :class:`~fedprivacy.errors.ParameterError`
of :class:`SecAggParameters`.
"""

from __future__ import annotations

import hashlib
import struct

from fedprivacy.crypto.fixed_point import FixedPointCodec
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.secagg.params import SecAggParameters
from fedprivacy.wire import MessageFormat

__all__ = ["MAGIC", "VERSION", "decode_params", "encode_params", "params_digest"]

MAGIC = b"FPSP"
VERSION = 2
_FORMAT = MessageFormat(
    MAGIC,
    VERSION,
    struct.Struct(">4sB16sQQIddBBII"),
    "fedprivacy secure aggregation parameters",
    MalformedMessageError,
)


def encode_params(params: SecAggParameters) -> bytes:
    """Serialise a round's public parameters (every field, the codec included).

    Parameters
    ----------
    params : SecAggParameters
        The parameters.

    Returns
    -------
    bytes
        The encoding of the module docstring, parsed back by :func:`decode_params`.

    Examples
    --------
    >>> from fedprivacy.crypto.fixed_point import FixedPointCodec
    >>> codec = FixedPointCodec.for_sum(1.0, 6, 32)
    >>> params = SecAggParameters.create(bytes(16), 3, range(6), 10, codec, degree=2)
    >>> data = encode_params(params)
    >>> data[:4], len(data)
    (b'FPSP', 113)
    >>> decode_params(data) == params
    True
    """
    codec = params.codec
    users = params.participants
    name = params.vector_name.encode("utf-8")
    parts = [
        _FORMAT.pack_header(
            params.session_id,
            params.round_index,
            params.dimension,
            params.threshold,
            codec.clip,
            codec.scale,
            codec.bits,
            int(params.weighted),
            params.degree or 0,
            params.ring_block or 0,
        ),
        struct.pack(f">I{len(users)}I", len(users), *users),
        struct.pack(f">I{len(params.positions)}I", len(params.positions), *params.positions),
        struct.pack(">I", len(params.graph_seed)),
        params.graph_seed,
        struct.pack(">I", len(name)),
        name,
    ]
    return b"".join(parts)


def params_digest(params: SecAggParameters) -> bytes:
    """SHA-256 of :func:`encode_params`: binds a state or a signature to every parameter."""
    return hashlib.sha256(encode_params(params)).digest()


def decode_params(data: bytes) -> SecAggParameters:
    """Parse parameters written by :func:`encode_params`.

    Parameters
    ----------
    data : bytes
        The whole encoding.

    Returns
    -------
    SecAggParameters
        The parameters, equal to those encoded.

    Raises
    ------
    MalformedMessageError
        On any deviation from the format (see the module docstring).
    ParameterError
        If the fields parse but do not make valid parameters (for example ``bits = 1``).

    Examples
    --------
    >>> decode_params(b"FPSP")
    Traceback (most recent call last):
    ...
    fedprivacy.secagg.errors.MalformedMessageError: message shorter than its header
    """
    fields, r = _FORMAT.unpack_header(data)
    session_id, round_index, dimension, threshold, clip, scale, bits, weighted, degree, block = (
        fields
    )
    if weighted not in (0, 1):
        raise MalformedMessageError(f"weighted flag {weighted} is not 0 or 1")
    participants = tuple(r.u32("participant") for _ in range(r.count("participants")))
    if any(a >= b for a, b in zip(participants, participants[1:], strict=False)):
        raise MalformedMessageError("participants are not in strictly ascending order")
    positions = tuple(r.u32("position") for _ in range(r.count("positions")))
    graph_seed = r.take(r.u32("graph seed length"), "graph seed")
    raw_name = r.take(r.u32("vector name length"), "vector name")
    r.finish()
    try:
        vector_name = raw_name.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessageError("the vector name is not UTF-8") from None
    return SecAggParameters(
        session_id=session_id,
        round_index=round_index,
        participants=participants,
        threshold=threshold,
        dimension=dimension,
        codec=FixedPointCodec(clip=clip, scale=scale, bits=bits),
        weighted=bool(weighted),
        degree=degree or None,
        graph_seed=graph_seed,
        vector_name=vector_name,
        ring_block=block or None,
        positions=positions,
    )
