"""The Paillier public key on gmpy2: encryption, homomorphic operations and serialisation.

Textbook Paillier with ``g = n + 1``: a plaintext ``m`` in ``Z_n`` encrypts to
``c = (1 + m n) r^n mod n^2`` with ``r`` uniform in ``Z_n^*``; ciphertexts multiply to add their
plaintexts and a ciphertext raised to ``k`` encrypts ``k m mod n``. Every secret (primes,
randomness) comes from :mod:`secrets`, i.e. the operating system; gmpy2 (GMP) does the arithmetic.

:class:`PaillierPublicKey` encrypts (with randomisers ``r^n mod n^2`` batched on a thread pool,
:mod:`fedprivacy.crypto.parallel`), adds and scales ciphertexts, and checks and serialises them.
The key holder's side, CRT decryption, CRT randomisers and key generation, is in
:mod:`fedprivacy.crypto.paillier`; fixed-base exponentiation tables are in
:mod:`fedprivacy.crypto.fixed_base`.
"""

from __future__ import annotations

import secrets
from concurrent.futures import Executor
from dataclasses import dataclass, field

import gmpy2
from gmpy2 import mpz

from fedprivacy._validation import require_int
from fedprivacy.crypto.key_size import MIN_KEY_BITS
from fedprivacy.crypto.parallel import powmod_many
from fedprivacy.errors import CryptoError, InvalidKeyError

__all__ = ["PaillierPublicKey", "random_unit"]

_ONE = mpz(1)


def random_unit(modulus: mpz) -> mpz:
    """Return a uniform element of ``Z_modulus^*`` (rejection sampling from :mod:`secrets`).

    Parameters
    ----------
    modulus : mpz
        The modulus (``> 1``).

    Returns
    -------
    mpz
        ``r`` with ``0 < r < modulus`` and ``gcd(r, modulus) = 1``.
    """
    while True:
        r = mpz(secrets.randbelow(int(modulus)))
        if r != 0 and gmpy2.gcd(r, modulus) == 1:
            return r


def _int_bytes(bits: int) -> int:
    return (bits + 7) // 8


@dataclass(frozen=True)
class PaillierPublicKey:
    """A Paillier public key ``n`` (with ``g = n + 1``).

    Attributes
    ----------
    n : int
        The modulus, a product of two distinct primes of equal size.

    Raises
    ------
    InvalidKeyError
        If ``n`` is not an odd integer of at least :data:`MIN_KEY_BITS` bits.
    """

    n: int
    _n: mpz = field(init=False, repr=False, compare=False)
    _n2: mpz = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int | type(_ONE)):
            raise InvalidKeyError(f"Paillier modulus must be an integer, got {type(self.n)!r}")
        n = int(self.n)
        if n.bit_length() < MIN_KEY_BITS or n % 2 == 0:
            raise InvalidKeyError(
                f"Paillier modulus must be odd with at least {MIN_KEY_BITS} bits, got a "
                f"{n.bit_length()}-bit {'even' if n % 2 == 0 else 'odd'} number"
            )
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "_n", mpz(n))
        object.__setattr__(self, "_n2", mpz(n) * mpz(n))

    @property
    def bits(self) -> int:
        """int: Bit length of ``n``."""
        return self.n.bit_length()

    @property
    def n_mpz(self) -> mpz:
        """mpz: ``n`` as a gmpy2 integer."""
        return self._n

    @property
    def n_square(self) -> mpz:
        """mpz: ``n^2``, the ciphertext modulus."""
        return self._n2

    @property
    def plaintext_bytes(self) -> int:
        """int: Bytes of a big-endian element of ``Z_n``."""
        return _int_bytes(self.bits)

    @property
    def ciphertext_bytes(self) -> int:
        """int: Bytes of a big-endian element of ``Z_{n^2}``."""
        return _int_bytes(2 * self.bits)

    # ------------------------------------------------------------------ encryption
    def randomisers(self, count: int, executor: Executor | None = None) -> list[mpz]:
        """Return ``count`` fresh uniform ``n``-th residues ``r^n mod n^2``.

        Parameters
        ----------
        count : int
            How many.
        executor : concurrent.futures.Executor, optional
            Thread pool for the exponentiations.

        Returns
        -------
        list of mpz
            Independent uniform ``n``-th residues (encryptions of zero).
        """
        k = require_int("count", count, 0)
        return powmod_many([random_unit(self._n) for _ in range(k)], self._n, self._n2, executor)

    def encode_plaintext(self, m: int) -> mpz:
        """Return ``g^m = 1 + (m mod n) n mod n^2`` (a trivial, unrandomised encryption).

        Parameters
        ----------
        m : int
            Any integer; it is reduced modulo ``n``.

        Returns
        -------
        mpz
            ``1 + (m mod n) n``.
        """
        return _ONE + (mpz(m) % self._n) * self._n

    def encrypt(self, m: int, randomiser: int | mpz | None = None) -> mpz:
        """Encrypt ``m mod n``.

        Parameters
        ----------
        m : int
            The plaintext (reduced modulo ``n``; negative values wrap).
        randomiser : int, optional
            A precomputed ``r^n mod n^2`` (see :meth:`randomisers`); fresh when omitted.

        Returns
        -------
        mpz
            The ciphertext in ``Z_{n^2}^*``.
        """
        return self.rerandomise(self.encode_plaintext(m), randomiser)

    # ------------------------------------------------------------------ homomorphism
    def add(self, c1: int | mpz, c2: int | mpz) -> mpz:
        """Return a ciphertext of the sum of the two plaintexts.

        Parameters
        ----------
        c1, c2 : int
            Ciphertexts.

        Returns
        -------
        mpz
            ``c1 c2 mod n^2``.
        """
        return mpz(c1) * mpz(c2) % self._n2

    def add_plain(self, c: int | mpz, m: int) -> mpz:
        """Return a ciphertext of ``plaintext(c) + m``.

        Parameters
        ----------
        c : int
            A ciphertext.
        m : int
            An integer (reduced modulo ``n``).

        Returns
        -------
        mpz
            ``c (1 + m n) mod n^2``; the randomness of ``c`` is kept.
        """
        return mpz(c) * self.encode_plaintext(m) % self._n2

    def mul_plain(self, c: int | mpz, k: int) -> mpz:
        """Return a ciphertext of ``k plaintext(c) mod n``.

        Parameters
        ----------
        c : int
            A ciphertext.
        k : int
            The scalar (reduced modulo ``n``; negative values wrap).

        Returns
        -------
        mpz
            ``c^(k mod n) mod n^2``.
        """
        return gmpy2.powmod(mpz(c), mpz(k) % self._n, self._n2)

    def rerandomise(self, c: int | mpz, randomiser: int | mpz | None = None) -> mpz:
        """Multiply ``c`` by a fresh encryption of zero.

        Parameters
        ----------
        c : int
            A ciphertext.
        randomiser : int, optional
            A precomputed ``r^n mod n^2``; fresh when omitted.

        Returns
        -------
        mpz
            A ciphertext of the same plaintext, independent of ``c``'s randomness.
        """
        rn = self.randomisers(1)[0] if randomiser is None else mpz(randomiser)
        return mpz(c) * rn % self._n2

    def is_ciphertext(self, c: int | mpz) -> bool:
        """Check that ``c`` lies in ``Z_{n^2}^*``.

        Parameters
        ----------
        c : int
            Candidate ciphertext.

        Returns
        -------
        bool
            ``0 < c < n^2`` and ``gcd(c, n) = 1``.
        """
        v = mpz(c)
        return bool(0 < v < self._n2 and gmpy2.gcd(v, self._n) == 1)

    # ------------------------------------------------------------------ serialisation
    def to_bytes(self) -> bytes:
        """Return ``n`` big-endian in :attr:`plaintext_bytes` bytes."""
        return self.n.to_bytes(self.plaintext_bytes, "big")

    @classmethod
    def from_bytes(cls, data: bytes) -> PaillierPublicKey:
        """Parse :meth:`to_bytes`.

        Parameters
        ----------
        data : bytes
            Big-endian ``n``.

        Returns
        -------
        PaillierPublicKey
            The key.

        Raises
        ------
        InvalidKeyError
            If the number is not a plausible modulus.
        """
        return cls(int.from_bytes(bytes(data), "big"))

    def ciphertext_to_bytes(self, c: int | mpz) -> bytes:
        """Return ``c`` big-endian in :attr:`ciphertext_bytes` bytes."""
        return int(c).to_bytes(self.ciphertext_bytes, "big")

    def ciphertext_from_bytes(self, data: bytes) -> mpz:
        """Parse a ciphertext, checking that it lies in ``Z_{n^2}^*``.

        Parameters
        ----------
        data : bytes
            :attr:`ciphertext_bytes` big-endian bytes.

        Returns
        -------
        mpz
            The ciphertext.

        Raises
        ------
        CryptoError
            If the length is wrong or the value is not in ``Z_{n^2}^*``.
        """
        raw = bytes(data)
        if len(raw) != self.ciphertext_bytes:
            raise CryptoError(
                f"a ciphertext is {self.ciphertext_bytes} bytes for this key, got {len(raw)}"
            )
        c = mpz(int.from_bytes(raw, "big"))
        if not self.is_ciphertext(c):
            raise CryptoError("not a Paillier ciphertext: the value is not in Z_{n^2}^*")
        return c
