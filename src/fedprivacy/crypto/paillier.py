"""The Paillier cryptosystem on gmpy2: key pairs, CRT decryption and key generation.

Textbook Paillier with ``g = n + 1`` (encryption and the homomorphic operations are on the public
key, :class:`fedprivacy.crypto.paillier_public.PaillierPublicKey`). The key holder knows the
primes ``p``, ``q`` of ``n = pq`` (:class:`PaillierPrivateKey`) and uses them for two exact
speed-ups:

* **CRT decryption** with the precomputed ``h_p = L_p(g^(p-1) mod p^2)^-1 mod p`` (and ``h_q``): two
  exponentiations by ``p - 1`` modulo ``p^2`` instead of one by ``lambda`` modulo ``n^2``.
* **CRT randomisers**: the ``n``-th residues modulo ``n^2`` are, by the CRT, the pairs
  (order-``(p-1)`` subgroup of ``Z_{p^2}^*``, order-``(q-1)`` subgroup of ``Z_{q^2}^*``); so
  ``a^p mod p^2`` and ``b^q mod q^2`` for uniform ``a``, ``b`` give a uniform ``n``-th residue, with
  exponents of half the size modulo numbers of half the size (about 3x cheaper than
  ``r^n mod n^2``).

The two CRT halves run in parallel on a thread pool (:mod:`fedprivacy.crypto.parallel`).
:func:`generate_keypair` draws the primes from :mod:`secrets` under the modulus-size policy of
:mod:`fedprivacy.crypto.key_size`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from concurrent.futures import Executor

import gmpy2
from gmpy2 import mpz

from fedprivacy._validation import require_int
from fedprivacy.crypto.key_size import DEFAULT_KEY_BITS, check_key_bits
from fedprivacy.crypto.paillier_public import PaillierPublicKey, random_unit
from fedprivacy.crypto.parallel import parallel_map
from fedprivacy.errors import CryptoError, InvalidKeyError

__all__ = ["MILLER_RABIN_ROUNDS", "PaillierPrivateKey", "generate_keypair"]

MILLER_RABIN_ROUNDS = 64
"""``reps`` given to GMP's ``mpz_probab_prime_p`` (Baillie-PSW plus ``reps - 24`` Miller-Rabin)."""


class PaillierPrivateKey:
    """A Paillier key pair: the primes ``p``, ``q`` and CRT precomputations.

    Parameters
    ----------
    p, q : int
        Distinct primes of the same bit length with ``gcd(pq, (p-1)(q-1)) = 1``.

    Raises
    ------
    InvalidKeyError
        If the primes do not satisfy these conditions.

    Attributes
    ----------
    public_key : PaillierPublicKey
        The matching public key ``n = pq``.
    """

    def __init__(self, p: int, q: int) -> None:
        pp, qq = mpz(p), mpz(q)
        if pp == qq:
            raise InvalidKeyError("p and q must be distinct")
        if pp.bit_length() != qq.bit_length():
            raise InvalidKeyError("p and q must have the same bit length")
        for name, v in (("p", pp), ("q", qq)):
            if v < 3 or not gmpy2.is_prime(v, MILLER_RABIN_ROUNDS):
                raise InvalidKeyError(f"{name} is not prime")
        n = pp * qq
        if gmpy2.gcd(n, (pp - 1) * (qq - 1)) != 1:
            raise InvalidKeyError("gcd(pq, (p-1)(q-1)) != 1")
        if pp < qq:  # canonical order, so that equal keys compare equal
            pp, qq = qq, pp
        self._p, self._q = pp, qq
        self.public_key = PaillierPublicKey(int(n))
        self._p2, self._q2 = pp * pp, qq * qq
        g = n + 1
        self._hp = gmpy2.invert((gmpy2.powmod(g, pp - 1, self._p2) - 1) // pp, pp)
        self._hq = gmpy2.invert((gmpy2.powmod(g, qq - 1, self._q2) - 1) // qq, qq)
        self._q_inv_p = gmpy2.invert(qq, pp)
        self._q2_inv_p2 = gmpy2.invert(self._q2, self._p2)

    def __repr__(self) -> str:
        return f"PaillierPrivateKey(bits={self.public_key.bits})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PaillierPrivateKey):
            return NotImplemented
        return bool(self._p == other._p and self._q == other._q)

    def __hash__(self) -> int:
        return hash((int(self._p), int(self._q)))

    @property
    def p(self) -> int:
        """int: The larger prime."""
        return int(self._p)

    @property
    def q(self) -> int:
        """int: The smaller prime."""
        return int(self._q)

    # ------------------------------------------------------------------ encryption (fast)
    def randomisers(self, count: int, executor: Executor | None = None) -> list[mpz]:
        """Return ``count`` uniform ``n``-th residues modulo ``n^2``, computed by the CRT.

        ``a^p mod p^2`` is uniform in the order-``(p-1)`` subgroup of ``Z_{p^2}^*`` when ``a`` is
        uniform in ``Z_{p^2}^*`` (the map ``a -> a^p`` is onto it, every image hit ``p`` times);
        with the same for ``q`` the CRT gives a uniform ``n``-th residue, the distribution of
        ``r^n mod n^2`` for uniform ``r`` in ``Z_n^*``.

        Parameters
        ----------
        count : int
            How many.
        executor : concurrent.futures.Executor, optional
            Thread pool (the two primes' halves run in parallel).

        Returns
        -------
        list of mpz
            The randomisers.
        """
        k = require_int("count", count, 0)
        if k == 0:
            return []
        a = [random_unit(self._p2) for _ in range(k)]
        b = [random_unit(self._q2) for _ in range(k)]
        jobs = [(a, self._p, self._p2), (b, self._q, self._q2)]

        def half(job: tuple[list[mpz], mpz, mpz]) -> list[mpz]:
            bases, e, m = job
            return list(gmpy2.powmod_base_list(bases, e, m))

        xp, xq = parallel_map(half, jobs, executor)
        return [self._crt_square(u, v) for u, v in zip(xp, xq, strict=True)]

    def _crt_square(self, xp: mpz, xq: mpz) -> mpz:
        """The element of ``Z_{n^2}`` that is ``xp mod p^2`` and ``xq mod q^2``."""
        return xq + self._q2 * ((xp - xq) * self._q2_inv_p2 % self._p2)

    def encrypt_many(
        self, plaintexts: Sequence[int], executor: Executor | None = None
    ) -> list[mpz]:
        """Encrypt many plaintexts with CRT-computed randomisers.

        Parameters
        ----------
        plaintexts : sequence of int
            Values, reduced modulo ``n``.
        executor : concurrent.futures.Executor, optional
            Thread pool.

        Returns
        -------
        list of mpz
            Fresh ciphertexts.
        """
        pk = self.public_key
        rns = self.randomisers(len(plaintexts), executor)
        return [pk.encrypt(m, r) for m, r in zip(plaintexts, rns, strict=True)]

    def encrypt(self, m: int) -> mpz:
        """Encrypt one plaintext (see :meth:`encrypt_many`)."""
        return self.encrypt_many([m])[0]

    # ------------------------------------------------------------------ decryption
    def decrypt(self, c: int | mpz) -> int:
        """Decrypt one ciphertext with the CRT (see :meth:`decrypt_many`: same errors)."""
        return self.decrypt_many([c])[0]

    def decrypt_many(
        self, ciphertexts: Sequence[int | mpz], executor: Executor | None = None
    ) -> list[int]:
        """Decrypt many ciphertexts (the two CRT halves in parallel on ``executor``).

        Parameters
        ----------
        ciphertexts : sequence of int
            Ciphertexts in ``Z_{n^2}^*``.
        executor : concurrent.futures.Executor, optional
            Thread pool.

        Returns
        -------
        list of int
            Plaintexts in ``[0, n)``.

        Raises
        ------
        CryptoError
            If a value is not in ``Z_{n^2}^*``.
        """
        pk = self.public_key
        cs = [mpz(c) for c in ciphertexts]
        for c in cs:
            if not pk.is_ciphertext(c):
                raise CryptoError("cannot decrypt: the value is not in Z_{n^2}^*")
        jobs = [
            ([c % self._p2 for c in cs], self._p, self._p2, self._hp),
            ([c % self._q2 for c in cs], self._q, self._q2, self._hq),
        ]

        def half(job: tuple[list[mpz], mpz, mpz, mpz]) -> list[mpz]:
            bases, prime, square, h = job
            powers = gmpy2.powmod_base_list(bases, prime - 1, square)
            return [(x - 1) // prime * h % prime for x in powers]

        mp, mq = parallel_map(half, jobs, executor)
        return [
            int(b + self._q * ((a - b) * self._q_inv_p % self._p))
            for a, b in zip(mp, mq, strict=True)
        ]


def _random_prime(bits: int) -> mpz:
    """A random prime of exactly ``bits`` bits whose two top bits are set."""
    top = mpz(3) << (bits - 2)
    while True:
        candidate = mpz(secrets.randbits(bits)) | top | 1
        p = gmpy2.next_prime(candidate)
        if p.bit_length() == bits and gmpy2.is_prime(p, MILLER_RABIN_ROUNDS):
            return mpz(p)


def generate_keypair(
    bits: int = DEFAULT_KEY_BITS, *, insecure_small_key: bool = False
) -> PaillierPrivateKey:
    """Generate a Paillier key pair from operating-system randomness.

    Each prime is the next prime after a ``bits / 2``-bit number from :func:`secrets.randbits`
    with its two top bits set (so that ``n`` has exactly ``bits`` bits), confirmed by GMP's
    Baillie-PSW test plus Miller-Rabin rounds (:data:`MILLER_RABIN_ROUNDS`).

    Parameters
    ----------
    bits : int
        Bit length of ``n``: even, at least 2048 (default 3072; 2048 warns).
    insecure_small_key : bool
        Allow ``MIN_KEY_BITS <= bits < 2048`` (tests only, see :func:`check_key_bits`).

    Returns
    -------
    PaillierPrivateKey
        The key pair.

    Raises
    ------
    ParameterError
        If ``bits`` is odd, below :data:`MIN_KEY_BITS`, or below 2048 without
        ``insecure_small_key``.

    Warns
    -----
    WeakKeyWarning
        For ``2048 <= bits < 3072``.
    """
    b = check_key_bits(bits, insecure_small_key)
    half = b // 2
    while True:
        p, q = _random_prime(half), _random_prime(half)
        if p == q or (p * q).bit_length() != b or gmpy2.gcd(p * q, (p - 1) * (q - 1)) != 1:
            continue  # pragma: no cover - probability ~2**-half
        return PaillierPrivateKey(int(p), int(q))
