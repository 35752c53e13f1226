"""The removable noise a client keeps between its masked input and its unmask reply, as bytes.

Part of a client's state (:mod:`fedprivacy.secagg.state`) in the exact noise mode
(:mod:`fedprivacy.dp.noise_modes`): the draw and every component the client added, so that a
restored client removes exactly the excess the original would. The encoding, big-endian::

    flag (1: 0 none, 1 present) | variance length (2) | variance (unsigned) | components (2)
    | kept total (4) | dimension (4) | components x dimension int64 (little-endian)

**Security.** The components are secret like the self-mask seed: whoever knows them can remove
the client's noise from the sum. They stay on the node with the rest of the state.
"""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np

from fedprivacy.dp.noise_modes import NoiseDraw
from fedprivacy.dp.party_noise import Components
from fedprivacy.errors import FedPrivacyError, ParameterError
from fedprivacy.secagg.errors import MalformedMessageError
from fedprivacy.wire import WireReader

__all__ = ["KeptNoise", "noise_bytes", "read_noise"]

KeptNoise = tuple[NoiseDraw, Components]
"""What a client keeps: the draw and its components."""

_LE_INT64 = np.dtype("<i8")


def noise_bytes(noise: KeptNoise | None) -> list[bytes]:
    """The encoding of the module docstring.

    Raises
    ------
    ParameterError
        If a component is not an int64 vector (variances above ``2^60`` draw Python integers,
        which the state does not carry).
    """
    if noise is None:
        return [b"\x00"]
    draw, components = noise
    assert draw.kept_total is not None
    arrays = [c for c in components if isinstance(c, np.ndarray) and c.dtype == np.int64]
    if len(arrays) != len(components) or len({a.shape for a in arrays}) != 1:
        raise ParameterError("noise", "only int64 components of one shape are kept in the state")
    v = int(draw.variance)
    raw = v.to_bytes((v.bit_length() + 7) // 8, "big")
    head = struct.pack(">BH", 1, len(raw)) + raw
    head += struct.pack(">HII", draw.components, draw.kept_total, arrays[0].size)
    return [head, *(a.astype(_LE_INT64, copy=False).tobytes() for a in arrays)]


def read_noise(r: WireReader) -> KeptNoise | None:
    """Inverse of :func:`noise_bytes`; :class:`MalformedMessageError` on anything inconsistent."""
    flag = r.u8("noise flag")
    if flag > 1:
        raise MalformedMessageError(f"unknown noise flag {flag}")
    if not flag:
        return None
    variance = int.from_bytes(r.take(r.u16("variance length"), "variance"), "big")
    count, kept, dimension = r.u16("components"), r.u32("kept total"), r.u32("dimension")
    try:
        draw = NoiseDraw(Fraction(variance), count, kept)
    except FedPrivacyError as exc:
        raise MalformedMessageError(f"bad kept noise: {exc}") from exc
    components: Components = []
    for _ in range(count):
        raw = r.take(8 * dimension, "noise component")
        components.append(np.frombuffer(raw, dtype=_LE_INT64).astype(np.int64))
    return draw, components
