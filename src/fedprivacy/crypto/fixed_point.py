"""Fixed-point quantisation with unbiased stochastic rounding into the ring ``Z_{2**bits}``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedprivacy._validation import require_int, require_positive_float
from fedprivacy.crypto.prg import mask_dtype
from fedprivacy.errors import OverflowRiskError, ParameterError

__all__ = ["MIN_SCALE_EXPONENT", "FixedPointCodec"]

MIN_SCALE_EXPONENT = -20
"""Smallest power-of-two exponent :meth:`FixedPointCodec.for_sum` will try for the scale."""

_MAX_SCALE_EXPONENT = 1023


def _require_integer_array(name: str, value: object) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise ParameterError(name, f"must hold integers, got dtype {arr.dtype}")
    return arr


@dataclass(frozen=True)
class FixedPointCodec:
    """Fixed-point codec: reals in ``[-clip, clip]`` to integers modulo ``2**bits``.

    A real ``x`` becomes the integer ``floor(x * scale + U)`` with ``U`` uniform on ``[0, 1)``
    (unbiased stochastic rounding), stored modulo ``2**bits`` in two's-complement style. Sums of
    up to :meth:`capacity` encodings decode exactly.

    Attributes
    ----------
    clip : float
        Inputs must satisfy ``|x| <= clip``.
    scale : float
        Integer units per 1.0.
    bits : int
        The modulus is ``2**bits``, ``2 <= bits <= 64``.

    Raises
    ------
    ParameterError
        If ``clip`` or ``scale`` is not a finite positive number or ``bits`` is out of range.
    """

    clip: float
    scale: float
    bits: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "clip", require_positive_float("clip", self.clip))
        object.__setattr__(self, "scale", require_positive_float("scale", self.scale))
        object.__setattr__(self, "bits", require_int("bits", self.bits, 2, 64))
        if not math.isfinite(self.clip * self.scale):
            raise ParameterError(
                "scale", f"clip * scale overflows ({self.clip!r} x {self.scale!r})"
            )

    @property
    def max_magnitude(self) -> int:
        """int: ``ceil(clip * scale)``, the largest ``|integer|`` one entry can become."""
        return math.ceil(self.clip * self.scale)

    @property
    def dtype(self) -> np.dtype[np.unsignedinteger[Any]]:
        """numpy.dtype: unsigned dtype of encoded vectors (see :func:`~.prg.mask_dtype`)."""
        return mask_dtype(self.bits)

    @property
    def _range(self) -> int:
        return 2 * self.max_magnitude + 1

    def capacity(self) -> int:
        """Return how many encodings can be summed without wrapping.

        Returns
        -------
        int
            The largest ``K`` with ``K * (2 * max_magnitude + 1) <= 2**bits`` (0 if even a
            single entry does not fit).
        """
        return (1 << self.bits) // self._range

    def check_capacity(self, summands: int) -> None:
        """Check that a sum of ``summands`` encodings cannot wrap around the modulus.

        Parameters
        ----------
        summands : int
            Number of encoded vectors that will be summed (``>= 1``).

        Raises
        ------
        OverflowRiskError
            If ``summands * (2 * max_magnitude + 1) > 2**bits``.
        ParameterError
            If ``summands`` is not a positive integer.
        """
        k = require_int("summands", summands, 1)
        if k * self._range > 1 << self.bits:
            raise OverflowRiskError(
                "summands",
                f"a sum of {k} entries, each an integer in [-{self.max_magnitude}, "
                f"{self.max_magnitude}] (clip={self.clip!r} x scale={self.scale!r}), spans "
                f"{k * self._range} values, more than the modulus 2**{self.bits}, so it could "
                f"wrap; at most {self.capacity()} summands fit. Lower the scale (see "
                "FixedPointCodec.for_sum), lower the clip or the number of summands, "
                "or increase bits.",
            )

    @classmethod
    def for_sum(cls, clip: float, summands: int, bits: int) -> FixedPointCodec:
        """Build the codec with the largest power-of-two scale that fits a sum.

        Parameters
        ----------
        clip : float
            Inputs must satisfy ``|x| <= clip``.
        summands : int
            Number of encoded vectors that will be summed (``>= 1``).
        bits : int
            Modulus exponent, ``2 <= bits <= 64``.

        Returns
        -------
        FixedPointCodec
            A codec whose ``scale`` is the largest ``2**e`` (``e >= -20``, possibly negative)
            for which :meth:`check_capacity` accepts ``summands``.

        Raises
        ------
        OverflowRiskError
            If not even the scale ``2**-20`` fits.
        ParameterError
            If a parameter is out of range.
        """
        k = require_int("summands", summands, 1)
        smallest = cls(clip=clip, scale=2.0**MIN_SCALE_EXPONENT, bits=bits)
        # Above this exponent clip * scale >= 2**(bits + 1), which never fits.
        top = min(_MAX_SCALE_EXPONENT, smallest.bits - math.frexp(smallest.clip)[1] + 2)
        for exponent in range(top, MIN_SCALE_EXPONENT - 1, -1):
            codec = cls(clip=smallest.clip, scale=math.ldexp(1.0, exponent), bits=smallest.bits)
            if k * codec._range <= 1 << codec.bits:
                return codec
        raise OverflowRiskError(
            "summands",
            f"{k} summands with clip={smallest.clip!r} do not fit modulo 2**{smallest.bits} "
            f"even at scale 2**{MIN_SCALE_EXPONENT}; increase bits or lower the clip or "
            "the number of summands.",
        )

    def quantize(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Quantise reals to integers with unbiased stochastic rounding.

        Parameters
        ----------
        x : numpy.ndarray
            Real values with ``|x| <= clip``.
        rng : numpy.random.Generator
            Source of the rounding randomness (not secret).

        Returns
        -------
        numpy.ndarray
            ``int64`` array ``floor(x * scale + U)``, ``U ~ U[0, 1)``, of the shape of ``x``,
            with entries in ``[-max_magnitude, max_magnitude]``.

        Raises
        ------
        ParameterError
            If an entry is not finite or exceeds ``clip`` in absolute value.
        OverflowRiskError
            If a single entry cannot be represented modulo ``2**bits``.
        """
        self.check_capacity(1)
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ParameterError("x", f"must be an array of real numbers ({exc})") from exc
        finite = np.isfinite(arr)
        if not np.all(finite):
            raise ParameterError(
                "x", f"{int(arr.size - np.count_nonzero(finite))} entries are NaN or infinite"
            )
        magnitude = np.abs(arr)
        over = magnitude > self.clip
        if np.any(over):
            raise ParameterError(
                "x",
                f"{int(np.count_nonzero(over))} entries exceed clip={self.clip!r} in absolute "
                f"value (largest |x| = {float(magnitude.max())!r}); clip the input first",
            )
        scaled = arr * self.scale
        scaled += rng.random(arr.shape)
        np.floor(scaled, out=scaled)
        # Rounding of the float addition can push an entry one unit past the bound.
        bound = float(self.max_magnitude)
        np.clip(scaled, -bound, bound, out=scaled)
        return scaled.astype(np.int64)

    def to_field(self, q: np.ndarray) -> np.ndarray:
        """Map signed integers into ``Z_{2**bits}`` (two's-complement style).

        Parameters
        ----------
        q : numpy.ndarray
            Integer array (read as ``int64``).

        Returns
        -------
        numpy.ndarray
            Array of dtype :attr:`dtype` holding ``q mod 2**bits``.

        Raises
        ------
        ParameterError
            If ``q`` does not hold integers.
        """
        arr = _require_integer_array("q", q).astype(np.int64, copy=False)
        wide = arr.view(np.uint64) & np.uint64((1 << self.bits) - 1)
        return wide.astype(self.dtype, copy=False)

    def encode(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Quantise and map into ``Z_{2**bits}``: ``to_field(quantize(x, rng))``.

        Same parameters and errors as :meth:`quantize`.
        """
        return self.to_field(self.quantize(x, rng))

    def decode_integers(self, v: np.ndarray) -> np.ndarray:
        """Interpret values modulo ``2**bits`` as signed integers.

        Parameters
        ----------
        v : numpy.ndarray
            Integer array; it is reduced modulo ``2**bits`` first (not modified).

        Returns
        -------
        numpy.ndarray
            ``int64`` array in ``[-2**(bits-1), 2**(bits-1))``: residues ``>= 2**(bits-1)`` are
            negative.

        Raises
        ------
        ParameterError
            If ``v`` does not hold integers.
        """
        arr = _require_integer_array("v", v)
        if arr.dtype.kind == "u":
            wide = arr.astype(np.uint64, copy=False)
        else:
            wide = arr.astype(np.int64, copy=False).view(np.uint64)
        shift = np.uint64(64 - self.bits)
        # Sign-extend the low ``bits`` bits: shift them to the top, then shift back arithmetically.
        return (wide << shift).view(np.int64) >> np.int64(64 - self.bits)

    def decode_sum(self, v: np.ndarray, summands: int) -> np.ndarray:
        """Decode a sum of ``summands`` encodings into reals.

        Parameters
        ----------
        v : numpy.ndarray
            The sum, as integers modulo ``2**bits`` (reduced here if needed).
        summands : int
            How many encodings were summed.

        Returns
        -------
        numpy.ndarray
            ``float64`` array: the signed integer sum divided by ``scale``.

        Raises
        ------
        OverflowRiskError
            If the sum could have wrapped (see :meth:`check_capacity`).
        ParameterError
            If ``v`` does not hold integers.
        """
        self.check_capacity(summands)
        arr = _require_integer_array("v", v)
        width = 8 * arr.dtype.itemsize
        if arr.dtype.kind == "u" and width == self.bits and width in (32, 64):
            # fast path: the two's-complement view of a full-width word is the signed residue
            signed = arr.view(np.int32 if width == 32 else np.int64)
            out = signed.astype(np.float64)
        else:
            out = self.decode_integers(arr).astype(np.float64)
        out /= self.scale
        return out
