"""Paillier on gmpy2: correctness, cross-checks against phe, CRT paths, fixed-base tables."""

from __future__ import annotations

import secrets
import warnings
from concurrent.futures import ThreadPoolExecutor

import gmpy2
import numpy as np
import phe
import pytest

from fedprivacy.crypto.fixed_base import (
    FixedBaseTable,
    build_tables,
    choose_window,
    product_of_powers,
)
from fedprivacy.crypto.key_size import MIN_KEY_BITS, check_key_bits
from fedprivacy.crypto.paillier import PaillierPrivateKey, generate_keypair
from fedprivacy.crypto.paillier_public import PaillierPublicKey
from fedprivacy.crypto.parallel import powmod_many
from fedprivacy.errors import CryptoError, InvalidKeyError, ParameterError, WeakKeyWarning


@pytest.fixture(scope="module")
def key() -> PaillierPrivateKey:
    return generate_keypair(768, insecure_small_key=True)


@pytest.fixture(scope="module")
def phe_key(key: PaillierPrivateKey) -> tuple[phe.PaillierPublicKey, phe.PaillierPrivateKey]:
    pub = phe.PaillierPublicKey(key.public_key.n)
    return pub, phe.PaillierPrivateKey(pub, key.p, key.q)


@pytest.fixture(scope="module")
def pool() -> ThreadPoolExecutor:
    with ThreadPoolExecutor(2) as ex:
        yield ex


def test_keygen_sizes_and_primes(key: PaillierPrivateKey) -> None:
    n = key.public_key.n
    assert n.bit_length() == 768 and n == key.p * key.q and key.p != key.q
    assert key.p.bit_length() == key.q.bit_length() == 384
    assert gmpy2.is_prime(key.p, 50) and gmpy2.is_prime(key.q, 50)
    assert gmpy2.gcd(n, (key.p - 1) * (key.q - 1)) == 1
    small = generate_keypair(MIN_KEY_BITS, insecure_small_key=True)
    assert small.public_key.bits == MIN_KEY_BITS


@pytest.mark.parametrize("bits", [256, 511, 513, 0, -4])
def test_keygen_rejects_small_or_odd_sizes(bits: int) -> None:
    with pytest.raises(ParameterError, match="bits"):
        generate_keypair(bits, insecure_small_key=True)


@pytest.mark.parametrize("bits", [512, 1024, 2046])
def test_keys_below_2048_bits_need_the_insecure_option(bits: int) -> None:
    with pytest.raises(ParameterError, match="insecure_small_key"):
        generate_keypair(bits)
    with pytest.raises(ParameterError, match="insecure_small_key"):
        check_key_bits(bits, "yes")  # type: ignore[arg-type]
    assert check_key_bits(bits, insecure_small_key=True) == bits


def test_2048_bit_keys_warn_3072_do_not() -> None:
    with pytest.warns(WeakKeyWarning, match="2048-bit"):
        assert check_key_bits(2048) == 2048
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_key_bits(3072) == 3072
        assert check_key_bits(4096) == 4096


def test_invalid_keys_rejected(key: PaillierPrivateKey) -> None:
    with pytest.raises(InvalidKeyError):
        PaillierPublicKey(key.public_key.n + 1)  # even
    with pytest.raises(InvalidKeyError):
        PaillierPublicKey(2**300 + 1)  # too small
    with pytest.raises(InvalidKeyError):
        PaillierPrivateKey(key.p, key.p)
    with pytest.raises(InvalidKeyError):
        PaillierPrivateKey(key.p, key.q + 1)  # not prime (even)
    assert PaillierPrivateKey(key.q, key.p) == key


def test_roundtrip_and_cross_decryption_with_phe(
    key: PaillierPrivateKey, phe_key: tuple[phe.PaillierPublicKey, phe.PaillierPrivateKey]
) -> None:
    pub, priv = phe_key
    pk = key.public_key
    for m in [0, 1, 2, pk.n - 1, pk.n // 2, *(secrets.randbelow(pk.n) for _ in range(5))]:
        ours_public = pk.encrypt(m)  # r^n mod n^2, no factorisation
        ours_crt = key.encrypt(m)  # CRT randomiser
        theirs = pub.raw_encrypt(m)
        assert priv.raw_decrypt(int(ours_public)) == m
        assert priv.raw_decrypt(int(ours_crt)) == m
        assert key.decrypt(theirs) == m
        assert key.decrypt(ours_public) == key.decrypt(ours_crt) == m
    # high-level phe numbers too (its EncodedNumber with exponent 0)
    enc = pub.encrypt(12345)
    assert key.decrypt(enc.ciphertext()) == 12345


def test_homomorphic_operations_agree_with_phe(
    key: PaillierPrivateKey, phe_key: tuple[phe.PaillierPublicKey, phe.PaillierPrivateKey]
) -> None:
    pub, priv = phe_key
    pk, n = key.public_key, key.public_key.n
    a, b, k = secrets.randbelow(n), secrets.randbelow(n), secrets.randbelow(n)
    ca, cb = pk.encrypt(a), key.encrypt(b)
    assert key.decrypt(pk.add(ca, cb)) == (a + b) % n
    assert key.decrypt(pk.add_plain(ca, -7)) == (a - 7) % n
    assert key.decrypt(pk.mul_plain(ca, k)) == a * k % n
    assert key.decrypt(pk.mul_plain(ca, -3)) == -3 * a % n
    # the same operation done by phe on the same ciphertext
    theirs = phe.EncryptedNumber(pub, int(ca)) + phe.EncryptedNumber(pub, int(cb))
    assert priv.raw_decrypt(theirs.ciphertext(be_secure=False)) == (a + b) % n
    re = pk.rerandomise(ca)
    assert re != ca and key.decrypt(re) == a


def test_randomisers_encrypt_zero(key: PaillierPrivateKey, pool: ThreadPoolExecutor) -> None:
    pk = key.public_key
    for executor in (None, pool):
        for r in pk.randomisers(3, executor) + key.randomisers(3, executor):
            assert pk.is_ciphertext(r) and key.decrypt(r) == 0 and r % pk.n != 1
    assert key.randomisers(0) == [] and pk.randomisers(0) == []


def test_crt_randomisers_are_nth_residues(key: PaillierPrivateKey) -> None:
    # an n-th residue x = y^n has x^(lambda) = 1 mod n^2 (its order divides lambda = lcm(p-1,q-1))
    lam = (key.p - 1) * (key.q - 1) // gmpy2.gcd(key.p - 1, key.q - 1)
    n2 = key.public_key.n_square
    for r in key.randomisers(4):
        assert gmpy2.powmod(r, lam, n2) == 1


def test_decrypt_many_parallel_matches(key: PaillierPrivateKey, pool: ThreadPoolExecutor) -> None:
    ms = [secrets.randbelow(key.public_key.n) for _ in range(9)]
    cs = key.encrypt_many(ms, pool)
    assert key.decrypt_many(cs, pool) == ms == key.decrypt_many(cs)


def test_ciphertext_validation_and_serialisation(key: PaillierPrivateKey) -> None:
    pk = key.public_key
    c = pk.encrypt(5)
    assert pk.ciphertext_from_bytes(pk.ciphertext_to_bytes(c)) == c
    assert PaillierPublicKey.from_bytes(pk.to_bytes()) == pk
    for bad in [0, pk.n_square, key.p * 12345, pk.n]:
        assert not pk.is_ciphertext(bad)
        with pytest.raises(CryptoError):
            key.decrypt(bad)
    with pytest.raises(CryptoError):
        pk.ciphertext_from_bytes(int(key.p).to_bytes(pk.ciphertext_bytes, "big"))
    with pytest.raises(CryptoError):
        pk.ciphertext_from_bytes(b"\x01" * (pk.ciphertext_bytes - 1))


def test_fixed_base_table_matches_powmod(key: PaillierPrivateKey) -> None:
    n2 = key.public_key.n_square
    base = key.encrypt(42)
    for window in (1, 3, 4, 7):
        table = FixedBaseTable(base, n2, 40, window)
        assert table.exponent_bits >= 40
        for e in [0, 1, 2**40 - 1, 2**39, *(secrets.randbits(40) for _ in range(5))]:
            assert table.pow(e) == gmpy2.powmod(base, e, n2)
    with pytest.raises(ParameterError):
        table.pow(2**table.exponent_bits)
    with pytest.raises(ParameterError):
        table.pow(-1)
    with pytest.raises(ParameterError):
        FixedBaseTable(base, 1, 8, 4)


def test_product_of_powers_matches_naive(key: PaillierPrivateKey, pool: ThreadPoolExecutor) -> None:
    n2 = key.public_key.n_square
    bases = [key.encrypt(i) for i in range(5)]
    rng = np.random.default_rng(1)
    exps = rng.integers(0, 2**35, size=(5, 7), dtype=np.uint64)
    for executor in (None, pool):
        tables = build_tables(bases, n2, 35, choose_window(35, 7), executor)
        got = product_of_powers(tables, exps, executor)
        for j in range(7):
            want = 1
            for u in range(5):
                want = want * gmpy2.powmod(bases[u], int(exps[u, j]), n2) % n2
            assert got[j] == want
    assert product_of_powers([], np.zeros((0, 3), dtype=np.uint64)) == [1, 1, 1]
    with pytest.raises(ParameterError):
        product_of_powers(tables, exps[:4])
    with pytest.raises(ParameterError):
        product_of_powers(tables, exps.astype(np.int64))
    big = FixedBaseTable(bases[0], n2, 8, 4)
    with pytest.raises(ParameterError):
        product_of_powers([big], np.array([[2**9]], dtype=np.uint64))


def test_powmod_many_and_window_choice(key: PaillierPrivateKey, pool: ThreadPoolExecutor) -> None:
    n2 = key.public_key.n_square
    bases = [key.encrypt(i) for i in range(5)]
    assert powmod_many(bases, 12345, n2, pool) == [gmpy2.powmod(b, 12345, n2) for b in bases]
    assert powmod_many([], 3, n2, pool) == []
    assert choose_window(35, 16) in (3, 4)
    assert choose_window(53, 1000) > choose_window(53, 1)
