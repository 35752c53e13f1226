"""AES-256-CTR pseudorandom expansion of a key into a numpy vector of masks modulo ``2**bits``."""

from __future__ import annotations

from typing import Any

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedprivacy._validation import require_int
from fedprivacy.crypto.keys import require_key_bytes
from fedprivacy.errors import ParameterError

__all__ = ["PRG_KEY_BYTES", "MaskExpander", "mask_dtype", "reduce"]

PRG_KEY_BYTES = 32
"""Length of a mask-expansion key (AES-256)."""

_ZERO_COUNTER = bytes(16)
# Slack after the keystream so that ``update_into`` is happy on versions of cryptography that
# demand ``len(out) >= len(in) + block_size - 1``.
_SLACK = 16


def mask_dtype(bits: int) -> np.dtype[np.unsignedinteger[Any]]:
    """Return the unsigned dtype used for values modulo ``2**bits``.

    Parameters
    ----------
    bits : int
        Modulus exponent, between 1 and 64.

    Returns
    -------
    numpy.dtype
        ``uint32`` if ``bits <= 32``, else ``uint64``.

    Raises
    ------
    ParameterError
        If ``bits`` is not an integer in ``[1, 64]``.
    """
    b = require_int("bits", bits, 1, 64)
    if b <= 32:
        return np.dtype(np.uint32)
    return np.dtype(np.uint64)


def reduce(values: np.ndarray, bits: int) -> np.ndarray:
    """Reduce unsigned integers modulo ``2**bits`` in place.

    Parameters
    ----------
    values : numpy.ndarray
        An unsigned-integer array whose width is at least ``bits``; it is modified.
    bits : int
        Modulus exponent, between 1 and 64.

    Returns
    -------
    numpy.ndarray
        ``values`` itself, now holding ``values & (2**bits - 1)``.

    Raises
    ------
    ParameterError
        If ``values`` is not an unsigned-integer array wide enough for ``bits``.
    """
    b = require_int("bits", bits, 1, 64)
    if not isinstance(values, np.ndarray) or values.dtype.kind != "u":
        raise ParameterError("values", "must be a numpy array of unsigned integers")
    width = 8 * values.dtype.itemsize
    if b > width:
        raise ParameterError("bits", f"{b} bits do not fit in dtype {values.dtype}")
    if b < width:
        np.bitwise_and(values, values.dtype.type((1 << b) - 1), out=values)
    return values


class MaskExpander:
    """Expands a 32-byte key into ``length`` uniform integers modulo ``2**bits``.

    The expansion is AES-256-CTR with an all-zero initial counter block: every key must be used
    for exactly one vector, which holds when keys come from HKDF bound to the session, round and
    vector name. Keystream bytes are read little-endian as ``uint32`` (``bits <= 32``) or
    ``uint64`` words and the top bits are masked off, so each word is uniform modulo ``2**bits``.
    One internal buffer is reused (cryptography's ``update_into``) so no allocation happens
    per call.

    Parameters
    ----------
    length : int
        Number of integers per vector (``>= 0``).
    bits : int
        Modulus exponent, between 1 and 64.

    Attributes
    ----------
    length : int
        Number of integers per vector.
    bits : int
        Modulus exponent.
    """

    def __init__(self, length: int, bits: int) -> None:
        self.length: int = require_int("length", length, 0)
        self.bits: int = require_int("bits", bits, 1, 64)
        self._dtype = mask_dtype(self.bits)
        width = 8 * self._dtype.itemsize
        self._mask = self._dtype.type((1 << self.bits) - 1)
        self._needs_mask = self.bits < width
        nbytes = self.length * self._dtype.itemsize
        self._zeros = bytes(nbytes)
        # A bytearray owns the memory (cryptography's typed ``update_into`` wants a buffer it
        # knows); numpy views it without copying.
        self._out = bytearray(nbytes + _SLACK)
        self._words: np.ndarray = np.frombuffer(self._out, dtype=self._dtype, count=self.length)

    @property
    def dtype(self) -> np.dtype[np.unsignedinteger[Any]]:
        """numpy.dtype: ``uint32`` if ``bits <= 32`` else ``uint64``."""
        return self._dtype

    @property
    def modulus_mask(self) -> np.unsignedinteger[Any]:
        """numpy.unsignedinteger: ``2**bits - 1`` as a scalar of :attr:`dtype`."""
        return self._mask

    def _fill(self, key: bytes, *, masked: bool = True) -> np.ndarray:
        data = require_key_bytes("mask key", key, PRG_KEY_BYTES)
        encryptor = Cipher(algorithms.AES(data), modes.CTR(_ZERO_COUNTER)).encryptor()
        encryptor.update_into(self._zeros, self._out)
        words = self._words
        if not np.little_endian:  # pragma: no cover - keystream words are read little-endian
            words.byteswap(inplace=True)
        if masked and self._needs_mask:
            np.bitwise_and(words, self._mask, out=words)
        return words

    def expand(self, key: bytes) -> np.ndarray:
        """Expand ``key`` into the internal buffer.

        Parameters
        ----------
        key : bytes
            A 32-byte key.

        Returns
        -------
        numpy.ndarray
            A read-only view of shape ``(length,)`` and dtype :attr:`dtype` with entries in
            ``[0, 2**bits)``; it is overwritten by the next call on this expander.

        Raises
        ------
        InvalidKeyError
            If ``key`` is not 32 bytes.
        """
        view = self._fill(key).view()
        view.flags.writeable = False
        return view

    def expand_copy(self, key: bytes) -> np.ndarray:
        """Expand ``key`` into a fresh array of shape ``(length,)`` and dtype :attr:`dtype`.

        :meth:`expand` without the shared buffer: same parameter and errors.
        """
        return self._fill(key).copy()

    def _check_acc(self, acc: object) -> np.ndarray:
        if not isinstance(acc, np.ndarray):
            raise ParameterError("acc", f"must be a numpy array, got {type(acc).__name__}")
        if acc.dtype != self._dtype:
            raise ParameterError("acc", f"must have dtype {self._dtype}, got {acc.dtype}")
        if acc.shape != (self.length,):
            raise ParameterError("acc", f"must have shape ({self.length},), got {acc.shape}")
        return acc

    def combine(self, acc: np.ndarray, key: bytes, sign: int) -> None:
        """Add (``sign=1``) or subtract (``sign=-1``) the mask of ``key`` in ``acc`` in place.

        The arithmetic wraps around the dtype; the result is correct modulo ``2**bits``, so call
        :func:`reduce` on the final sum.

        Parameters
        ----------
        acc : numpy.ndarray
            Accumulator of shape ``(length,)`` and dtype :attr:`dtype`.
        key : bytes
            A 32-byte key.
        sign : int
            ``1`` to add the mask, ``-1`` to subtract it.

        Raises
        ------
        ParameterError
            If ``acc`` has the wrong dtype or shape, or ``sign`` is not 1 or -1.
        InvalidKeyError
            If ``key`` is not 32 bytes.
        """
        target = self._check_acc(acc)
        if sign not in (1, -1) or isinstance(sign, bool):
            raise ParameterError("sign", f"must be 1 or -1, got {sign!r}")
        # the unmasked keystream word is congruent to the mask modulo 2**bits, and 2**bits
        # divides the dtype's wrap-around modulus, so skipping the masking pass is exact
        op = np.add if sign == 1 else np.subtract
        op(target, self._fill(key, masked=False), out=target)

    def add_into(self, acc: np.ndarray, key: bytes) -> None:
        """Add the mask expanded from ``key`` to ``acc`` in place (wrapping arithmetic).

        :meth:`combine` with ``sign=1``: same parameters and errors. The result is correct
        modulo ``2**bits``; call :func:`reduce` on the final sum.
        """
        self.combine(acc, key, 1)

    def subtract_from(self, acc: np.ndarray, key: bytes) -> None:
        """Subtract the mask expanded from ``key`` from ``acc`` in place (wrapping arithmetic).

        :meth:`combine` with ``sign=-1``: same parameters and errors.
        """
        self.combine(acc, key, -1)
