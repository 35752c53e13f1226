"""Key derivation and uniform sampling in ``Z_n`` / ``Z_n^*`` from a cryptographic PRG.

Every key comes from HKDF-SHA256 (:func:`fedprivacy.crypto.keys.derive_key`) over an X25519 shared
secret or the 32-byte shared seed ``R``, bound to the protocol, the session, the purpose and (for
round masks) the round. A key is expanded with AES-256-CTR
(:class:`fedprivacy.crypto.prg.MaskExpander`) into candidates of ``bitlen(n)`` bits, and a
candidate is kept only if it lies below ``n`` (and is a unit, for ``Z_n^*``): rejection sampling,
so every value is exactly uniform, never biased by a reduction modulo ``n``. Since
``n >= 2^(bits-1)`` at least half the candidates are kept.
"""

from __future__ import annotations

import gmpy2
from gmpy2 import mpz

from fedprivacy.crypto.keys import derive_key, encode_context
from fedprivacy.crypto.prg import MaskExpander
from fedprivacy.secagg.private_weighting.errors import NotInvertibleError

__all__ = [
    "PREFIX",
    "UniformSampler",
    "blind_key",
    "check_unit",
    "histogram_mask_key",
    "pairwise_mask_totals",
    "round_mask_key",
    "seed_associated_data",
    "seed_encryption_key",
]

PREFIX = "fedprivacy/uldp-private-weighting/v1"
_CANDIDATES_PER_BLOCK = 8


def check_unit(r: int | mpz, n: int | mpz, what: str) -> None:
    """Check ``gcd(r, n) = 1`` (and ``r != 0``).

    Parameters
    ----------
    r : int
        The value.
    n : int
        The modulus.
    what : str
        What ``r`` is, for the message.

    Raises
    ------
    NotInvertibleError
        If ``r`` has no inverse modulo ``n``.
    """
    if r == 0 or gmpy2.gcd(mpz(r), mpz(n)) != 1:
        raise NotInvertibleError(f"{what} is not invertible modulo n (gcd(value, n) != 1)")


class UniformSampler:
    """A stream of uniform integers in ``[0, n)`` (or ``Z_n^*``) expanded from a 32-byte key.

    Parameters
    ----------
    key : bytes
        A 32-byte key used for this stream only (blocks are keyed by HKDF of it and an index).
    modulus : int
        ``n > 1``.
    units : bool
        Draw from ``Z_n^*`` (reject ``0`` and non-units) instead of ``Z_n``.
    """

    def __init__(self, key: bytes, modulus: int | mpz, *, units: bool = False) -> None:
        self._key = bytes(key)
        self._n = mpz(modulus)
        self._bits = int(self._n.bit_length())
        self._units = units
        self._words = -(-self._bits // 64)
        self._expander = MaskExpander(self._words * _CANDIDATES_PER_BLOCK, 64)
        self._block = 0
        self._pending: list[mpz] = []

    def _refill(self) -> None:
        block_key = derive_key(self._key, PREFIX, "sampler-block", self._block)
        self._block += 1
        raw = self._expander.expand(block_key).tobytes()
        step = 8 * self._words
        top = (1 << self._bits) - 1
        for i in range(_CANDIDATES_PER_BLOCK):
            v = mpz(int.from_bytes(raw[i * step : (i + 1) * step], "little") & top)
            if v >= self._n:
                continue
            if self._units and (v == 0 or gmpy2.gcd(v, self._n) != 1):
                continue
            self._pending.append(v)
        self._pending.reverse()  # pop() from the end keeps stream order

    def take(self, count: int) -> list[mpz]:
        """Return the next ``count`` values of the stream.

        Parameters
        ----------
        count : int
            How many values.

        Returns
        -------
        list of mpz
            Independent uniform values.
        """
        out: list[mpz] = []
        while len(out) < count:
            if not self._pending:
                self._refill()
                continue
            out.append(self._pending.pop())
        return out


def seed_encryption_key(agreement: bytes, session_id: bytes, recipient: int) -> bytes:
    """AES-GCM key under which silo 0 sends the shared seed to ``recipient``."""
    return derive_key(agreement, PREFIX, "seed-key", session_id, 0, recipient)


def seed_associated_data(session_id: bytes, sender: int, recipient: int) -> bytes:
    """Associated data of the sealed seed: protocol, session, sender and recipient."""
    return encode_context(PREFIX, "seed", session_id, sender, recipient)


def blind_key(seed: bytes, session_id: bytes) -> bytes:
    """PRG key of the multiplicative blinds ``r_u`` (one stream, users in order)."""
    return derive_key(seed, PREFIX, "multiplicative-blind", session_id)


def histogram_mask_key(agreement: bytes, session_id: bytes, a: int, b: int) -> bytes:
    """PRG key of the pairwise additive masks on the histograms of silos ``a`` and ``b``."""
    lo, hi = min(a, b), max(a, b)
    return derive_key(agreement, PREFIX, "histogram-mask", session_id, lo, hi)


def round_mask_key(agreement: bytes, session_id: bytes, round_index: int, a: int, b: int) -> bytes:
    """PRG key of the pairwise additive masks of silos ``a`` and ``b`` in one round."""
    lo, hi = min(a, b), max(a, b)
    return derive_key(agreement, PREFIX, "round-mask", session_id, round_index, lo, hi)


def pairwise_mask_totals(
    me: int, keys: dict[int, bytes], modulus: int | mpz, count: int
) -> list[mpz]:
    """Sum of a silo's pairwise masks: ``sum_{s' > me} r_{me,s'} - sum_{s' < me} r_{s',me}``.

    The lower-numbered silo of each pair adds the mask and the higher one subtracts it, so the
    masks of all silos cancel modulo ``n`` in the server's sum (Appendix D.4).

    Parameters
    ----------
    me : int
        This silo.
    keys : dict of int to bytes
        Peer silo -> PRG key of the pair's masks (``me`` itself excluded).
    modulus : int
        ``n``.
    count : int
        Vector length.

    Returns
    -------
    list of mpz
        ``count`` residues modulo ``n``.
    """
    n = mpz(modulus)
    total = [mpz(0)] * count
    for peer, key in sorted(keys.items()):
        masks = UniformSampler(key, n).take(count)
        sign = 1 if me < peer else -1
        total = [(t + sign * m) % n for t, m in zip(total, masks, strict=True)]
    return total
