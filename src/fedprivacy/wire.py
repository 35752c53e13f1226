"""Strict binary framing shared by the protocols' messages (secure aggregation, private weighting).

A protocol describes its framing once as a :class:`MessageFormat`: the magic bytes, the version
and the :class:`struct.Struct` of its header, which starts with the magic (``4s``) and the
version (``B``). :meth:`MessageFormat.unpack_header` checks those two and returns the header's
other fields; :class:`WireReader` reads the body strictly. Every deviation raises the protocol's
own ``MalformedMessageError`` (:attr:`MessageFormat.error`), with the same messages in every
protocol.

Examples
--------
>>> import struct
>>> fmt = MessageFormat(b"DEMO", 1, struct.Struct(">4sBI"), "demo", ValueError)
>>> data = fmt.pack_header(7) + pack_pairs(((2, b"hi"),))
>>> fields, reader = fmt.unpack_header(data)
>>> fields, reader.pairs("ciphertext")
((7,), ((2, b'hi'),))
>>> fmt.unpack_header(b"NOPE" + data[4:])
Traceback (most recent call last):
...
ValueError: bad magic: not a demo message
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_ENTRIES", "MessageFormat", "WireReader", "pack_pairs"]

MAX_ENTRIES = 1 << 24
"""The most entries a counted list in a message may declare."""


class WireReader:
    """Strict cursor over a message's bytes.

    Parameters
    ----------
    data : bytes
        The whole message.
    offset : int
        Where the body starts (after the header).
    error : type of Exception
        The protocol's ``MalformedMessageError``, raised on any deviation.
    """

    def __init__(self, data: bytes, offset: int, error: type[Exception]) -> None:
        self.data = data
        self.offset = offset
        self.error = error

    def take(self, size: int, what: str) -> bytes:
        """The next ``size`` bytes (``what`` names them in the error if they are missing)."""
        end = self.offset + size
        if size < 0 or end > len(self.data):
            raise self.error(f"message truncated while reading {what}")
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk

    def take_view(self, size: int, what: str) -> None:
        """Skip ``size`` bytes after checking they are there (the caller views them in place)."""
        if size < 0 or self.offset + size > len(self.data):
            raise self.error(f"message truncated while reading {what}")
        self.offset += size

    def u8(self, what: str) -> int:
        """The next byte."""
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        """The next big-endian ``uint16``."""
        value: int = struct.unpack(">H", self.take(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        """The next big-endian ``uint32``."""
        value: int = struct.unpack(">I", self.take(4, what))[0]
        return value

    def count(self, what: str) -> int:
        """A ``uint32`` entry count, at most :data:`MAX_ENTRIES`."""
        n = self.u32(what)
        if n > MAX_ENTRIES:
            raise self.error(f"{what} count {n} exceeds {MAX_ENTRIES}")
        return n

    def pairs(self, what: str) -> tuple[tuple[int, bytes], ...]:
        """A counted list of ``(peer, blob)`` pairs, as written by :func:`pack_pairs`."""
        out = []
        for _ in range(self.count(what)):
            peer = self.u32("peer")
            out.append((peer, self.take(self.u32("ciphertext length"), "ciphertext")))
        return tuple(out)

    def finish(self) -> None:
        """Check that every byte was read."""
        if self.offset != len(self.data):
            raise self.error(f"{len(self.data) - self.offset} trailing bytes")


def pack_pairs(pairs: tuple[tuple[int, bytes], ...]) -> bytes:
    """``count | (peer, length, blob)...``, all integers big-endian ``uint32``."""
    parts = [struct.pack(">I", len(pairs))]
    for peer, blob in pairs:
        parts += [struct.pack(">II", peer, len(blob)), blob]
    return b"".join(parts)


@dataclass(frozen=True)
class MessageFormat:
    """The framing of one protocol's messages.

    Parameters
    ----------
    magic : bytes
        The four bytes every message starts with.
    version : int
        The format version, the header's second field.
    header : struct.Struct
        The header's layout: ``4s`` (magic), ``B`` (version), then the protocol's fields.
    protocol : str
        The protocol's name in the bad-magic error (``"not a {protocol} message"``).
    error : type of Exception
        The protocol's ``MalformedMessageError``.
    """

    magic: bytes
    version: int
    header: struct.Struct
    protocol: str
    error: type[Exception]

    def pack_header(self, *fields: Any) -> bytes:
        """The header: magic, version, then ``fields`` in the layout's order."""
        return self.header.pack(self.magic, self.version, *fields)

    def unpack_header(self, data: object) -> tuple[tuple[Any, ...], WireReader]:
        """Check a message's type, length, magic and version.

        Parameters
        ----------
        data : bytes-like
            One whole message.

        Returns
        -------
        fields : tuple
            The header's fields after the magic and the version.
        reader : WireReader
            A reader of the body.

        Raises
        ------
        Exception
            :attr:`error`, if ``data`` is not bytes, is shorter than the header, or has another
            magic or version.
        """
        if not isinstance(data, bytes | bytearray | memoryview):
            raise self.error(f"expected bytes, got {type(data).__name__}")
        raw = bytes(data)
        if len(raw) < self.header.size:
            raise self.error("message shorter than its header")
        magic, version, *fields = self.header.unpack_from(raw)
        if magic != self.magic:
            raise self.error(f"bad magic: not a {self.protocol} message")
        if version != self.version:
            raise self.error(f"unsupported version {version}")
        return tuple(fields), WireReader(raw, self.header.size, self.error)
