"""The Paillier cryptosystem on gmpy2, with CRT decryption and fixed-base exponentiation tables.

Textbook Paillier with ``g = n + 1``: a plaintext ``m`` in ``Z_n`` encrypts to
``c = (1 + m n) r^n mod n^2`` with ``r`` uniform in ``Z_n^*``; ciphertexts multiply to add their
plaintexts and a ciphertext raised to ``k`` encrypts ``k m mod n``. Every secret (primes,
randomness) comes from :mod:`secrets`, i.e. the operating system; gmpy2 (GMP) does the arithmetic.

Speed-ups, each exact:

* **CRT decryption** with the precomputed ``h_p = L_p(g^(p-1) mod p^2)^-1 mod p`` (and ``h_q``): two
  exponentiations by ``p - 1`` modulo ``p^2`` instead of one by ``lambda`` modulo ``n^2``.
* **CRT randomisers** for the key holder: the ``n``-th residues modulo ``n^2`` are, by the CRT, the
  pairs (order-``(p-1)`` subgroup of ``Z_{p^2}^*``, order-``(q-1)`` subgroup of ``Z_{q^2}^*``); so
  ``a^p mod p^2`` and ``b^q mod q^2`` for uniform ``a``, ``b`` give a uniform ``n``-th residue, with
  exponents of half the size modulo numbers of half the size (about 3x cheaper than
  ``r^n mod n^2``).
* **Fixed-base tables** (:class:`FixedBaseTable`): when one base is raised to many exponents (an
  encrypted weight multiplied into every parameter of a model), ``base^(d 2^(w k))`` is tabulated
  once for every window ``k`` and digit ``d``; each power then costs one multiplication per window.
* **Both cores**: gmpy2 releases the GIL in ``powmod_base_list`` and, inside a context with
  ``allow_release_gil=True``, in ordinary mpz arithmetic, so a thread pool runs on every core
  without pickling big integers to worker processes.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TypeVar

import gmpy2
import numpy as np
from gmpy2 import mpz

from fedprivacy._validation import require_int
from fedprivacy.crypto.key_size import (
    DEFAULT_KEY_BITS,
    MIN_KEY_BITS,
    SECURE_MIN_KEY_BITS,
    check_key_bits,
)
from fedprivacy.errors import CryptoError, InvalidKeyError, ParameterError

__all__ = [
    "DEFAULT_KEY_BITS",
    "MILLER_RABIN_ROUNDS",
    "MIN_KEY_BITS",
    "SECURE_MIN_KEY_BITS",
    "FixedBaseTable",
    "PaillierPrivateKey",
    "PaillierPublicKey",
    "build_tables",
    "check_key_bits",
    "choose_window",
    "generate_keypair",
    "parallel_map",
    "powmod_many",
    "product_of_powers",
]

MILLER_RABIN_ROUNDS = 64
"""``reps`` given to GMP's ``mpz_probab_prime_p`` (Baillie-PSW plus ``reps - 24`` Miller-Rabin)."""

_ONE = mpz(1)
_T = TypeVar("_T")
_R = TypeVar("_R")


def _with_released_gil(fn: Callable[[_T], _R]) -> Callable[[_T], _R]:
    def run(item: _T) -> _R:
        with gmpy2.context(allow_release_gil=True):
            return fn(item)

    return run


def parallel_map(
    fn: Callable[[_T], _R], items: Sequence[_T], executor: Executor | None = None
) -> list[_R]:
    """Map ``fn`` over ``items``, on ``executor`` when one is given, with the GIL released.

    Parameters
    ----------
    fn : callable
        The function; it runs inside a gmpy2 context with ``allow_release_gil=True``.
    items : sequence
        The arguments.
    executor : concurrent.futures.Executor, optional
        A thread pool; ``None`` runs in the calling thread.

    Returns
    -------
    list
        ``[fn(x) for x in items]`` in order.
    """
    wrapped = _with_released_gil(fn)
    if executor is None or len(items) <= 1:
        return [wrapped(x) for x in items]
    return list(executor.map(wrapped, items))


def _chunks(items: Sequence[_T], parts: int) -> list[Sequence[_T]]:
    if not items:
        return []
    parts = max(1, min(parts, len(items)))
    size = -(-len(items) // parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _workers(executor: Executor | None) -> int:
    if executor is None:
        return 1
    count = getattr(executor, "_max_workers", 1)
    return int(count) if isinstance(count, int) and count > 0 else 1


def powmod_many(
    bases: Sequence[int | mpz], exponent: int | mpz, modulus: int | mpz, executor: Executor | None
) -> list[mpz]:
    """Raise many bases to one exponent, split over the executor's threads.

    Parameters
    ----------
    bases : sequence of int
        The bases.
    exponent : int
        The common exponent (``>= 0``).
    modulus : int
        The modulus.
    executor : concurrent.futures.Executor or None
        Thread pool; gmpy2's ``powmod_base_list`` releases the GIL.

    Returns
    -------
    list of mpz
        ``[pow(b, exponent, modulus) for b in bases]``.
    """
    e, m = mpz(exponent), mpz(modulus)
    parts = _chunks(list(bases), _workers(executor))
    if not parts:
        return []

    def work(chunk: Sequence[int | mpz]) -> list[mpz]:
        return list(gmpy2.powmod_base_list([mpz(b) for b in chunk], e, m))

    out: list[mpz] = []
    for piece in parallel_map(work, parts, executor):
        out.extend(piece)
    return out


def _random_unit(modulus: mpz) -> mpz:
    """Uniform element of ``Z_modulus^*`` (rejection sampling from ``secrets``)."""
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
    def random_unit(self) -> mpz:
        """Return a uniform element of ``Z_n^*`` drawn from :mod:`secrets`.

        Returns
        -------
        mpz
            ``r`` with ``0 < r < n`` and ``gcd(r, n) = 1``.
        """
        return _random_unit(self._n)

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
        return powmod_many([self.random_unit() for _ in range(k)], self._n, self._n2, executor)

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
        rn = self.randomisers(1)[0] if randomiser is None else mpz(randomiser)
        return self.encode_plaintext(m) * rn % self._n2

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
        a = [_random_unit(self._p2) for _ in range(k)]
        b = [_random_unit(self._q2) for _ in range(k)]
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
        return [
            pk.encode_plaintext(m) * r % pk.n_square for m, r in zip(plaintexts, rns, strict=True)
        ]

    def encrypt(self, m: int) -> mpz:
        """Encrypt one plaintext (see :meth:`encrypt_many`)."""
        return self.encrypt_many([m])[0]

    # ------------------------------------------------------------------ decryption
    def decrypt(self, c: int | mpz) -> int:
        """Decrypt with the CRT.

        Parameters
        ----------
        c : int
            A ciphertext in ``Z_{n^2}^*``.

        Returns
        -------
        int
            The plaintext in ``[0, n)``.

        Raises
        ------
        CryptoError
            If ``c`` is not in ``Z_{n^2}^*``.
        """
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


# ---------------------------------------------------------------------- fixed-base tables
def choose_window(exponent_bits: int, uses: int) -> int:
    """Window width minimising the cost of a table used ``uses`` times.

    Building costs about ``ceil(b / w) 2^w`` multiplications and each use ``ceil(b / w)``.

    Parameters
    ----------
    exponent_bits : int
        ``b``, the bit length of the exponents.
    uses : int
        Expected number of exponentiations with the table.

    Returns
    -------
    int
        The best ``w`` in ``[1, 10]``.
    """
    b = require_int("exponent_bits", exponent_bits, 1)
    n = require_int("uses", uses, 1)
    return min(range(1, 11), key=lambda w: (-(-b // w)) * ((1 << w) + n))


class FixedBaseTable:
    """Powers ``base^(d 2^(w k))`` for every window ``k`` and digit ``0 <= d < 2^w``.

    ``base^e`` for ``0 <= e < 2^(w K)`` is then the product of one table entry per non-zero
    digit of ``e`` in base ``2^w``: at most ``K = ceil(exponent_bits / w)`` multiplications,
    against about ``1.2 exponent_bits`` for square-and-multiply.

    Parameters
    ----------
    base : int
        The fixed base (reduced modulo ``modulus``).
    modulus : int
        The modulus (``> 1``).
    exponent_bits : int
        Largest exponent bit length to support (``>= 1``).
    window : int
        Digit width ``w`` in bits (``1..16``).

    Attributes
    ----------
    modulus : mpz
        The modulus.
    window : int
        The digit width.
    windows : int
        ``K``, the number of digits.
    rows : list of list of mpz
        ``rows[k][d] = base^(d 2^(w k)) mod modulus``.
    """

    __slots__ = ("modulus", "rows", "window", "windows")

    def __init__(
        self, base: int | mpz, modulus: int | mpz, exponent_bits: int, window: int
    ) -> None:
        m = mpz(modulus)
        if m <= 1:
            raise ParameterError("modulus", f"must be > 1, got {int(m)}")
        bits = require_int("exponent_bits", exponent_bits, 1)
        w = require_int("window", window, 1, 16)
        self.modulus = m
        self.window = w
        self.windows = -(-bits // w)
        size = 1 << w
        b = mpz(base) % m
        rows: list[list[mpz]] = []
        for k in range(self.windows):
            row = [_ONE % m, b]
            x = b
            for _ in range(size - 2):
                x = x * b % m
                row.append(x)
            rows.append(row)
            if k + 1 < self.windows:
                b = x * b % m  # base^(2^(w (k+1)))
        self.rows = rows

    @property
    def exponent_bits(self) -> int:
        """int: Exponents below ``2^(window * windows)`` are supported."""
        return self.window * self.windows

    def pow(self, exponent: int) -> mpz:
        """Return ``base^exponent mod modulus``.

        Parameters
        ----------
        exponent : int
            ``0 <= exponent < 2^exponent_bits``.

        Returns
        -------
        mpz
            The power.

        Raises
        ------
        ParameterError
            If the exponent is out of range.
        """
        e = require_int("exponent", exponent, 0)
        if e >> self.exponent_bits:
            raise ParameterError("exponent", f"must be below 2**{self.exponent_bits}")
        mask, w, m = (1 << self.window) - 1, self.window, self.modulus
        acc = _ONE % m
        for k, row in enumerate(self.rows):
            d = (e >> (w * k)) & mask
            if d:
                acc = acc * row[d] % m
        return acc


def product_of_powers(
    tables: Sequence[FixedBaseTable],
    exponents: np.ndarray,
    executor: Executor | None = None,
) -> list[mpz]:
    """Fixed-base multi-exponentiation: ``prod_u base_u^(e[u, j])`` for every column ``j``.

    Parameters
    ----------
    tables : sequence of FixedBaseTable
        One table per row of ``exponents``; all with the same modulus and window.
    exponents : numpy.ndarray
        Unsigned integers of shape ``(len(tables), columns)``, each below every table's
        ``2^exponent_bits`` (at most 64 bits).
    executor : concurrent.futures.Executor, optional
        Thread pool; the columns are split between its threads.

    Returns
    -------
    list of mpz
        One product per column.

    Raises
    ------
    ParameterError
        If the shapes, windows or moduli disagree, or an exponent is too large.
    """
    e = np.asarray(exponents)
    if e.ndim != 2 or e.shape[0] != len(tables):
        raise ParameterError(
            "exponents", f"must have shape ({len(tables)}, columns), got {e.shape}"
        )
    if e.dtype.kind != "u":
        raise ParameterError("exponents", f"must be unsigned integers, got dtype {e.dtype}")
    columns = e.shape[1]
    if not tables:
        return [_ONE] * columns
    w, windows, m = tables[0].window, tables[0].windows, tables[0].modulus
    if any(t.window != w or t.windows != windows or t.modulus != m for t in tables):
        raise ParameterError("tables", "all tables need the same modulus, window and size")
    wide = e.astype(np.uint64, copy=False)
    if w * windows < 64 and wide.size and int(wide.max()) >> (w * windows):
        raise ParameterError("exponents", f"an exponent has more than {w * windows} bits")
    mask = np.uint64((1 << w) - 1)
    # digits[k][u][j] as Python ints (fast indexing in the loop below)
    digits = [((wide >> np.uint64(w * k)) & mask).tolist() for k in range(windows)]
    rows = [t.rows for t in tables]
    users = range(len(tables))

    def columns_product(cols: Sequence[int]) -> list[mpz]:
        out: list[mpz] = []
        for j in cols:
            acc = _ONE
            for u in users:
                row_u = rows[u]
                for k in range(windows):
                    d = digits[k][u][j]
                    if d:
                        acc = acc * row_u[k][d] % m
            out.append(acc)
        return out

    result: list[mpz] = []
    for piece in parallel_map(
        columns_product, _chunks(range(columns), _workers(executor)), executor
    ):
        result.extend(piece)
    return result


def build_tables(
    bases: Sequence[int | mpz],
    modulus: int | mpz,
    exponent_bits: int,
    window: int,
    executor: Executor | None = None,
) -> list[FixedBaseTable]:
    """Build one :class:`FixedBaseTable` per base, split over the executor's threads.

    Parameters
    ----------
    bases : sequence of int
        The bases.
    modulus : int
        Common modulus.
    exponent_bits : int
        Exponent bit length to support.
    window : int
        Digit width.
    executor : concurrent.futures.Executor, optional
        Thread pool.

    Returns
    -------
    list of FixedBaseTable
        The tables, in order.
    """
    return parallel_map(
        lambda b: FixedBaseTable(b, modulus, exponent_bits, window), list(bases), executor
    )
