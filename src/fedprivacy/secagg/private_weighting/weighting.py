"""The encrypted-domain weighting of step 2(b): ``prod_u W_u^(E_{u,j})`` for every parameter.

``W_u = Enc(B_inv(N_u))^(k_u)`` with the setup scalar ``k_u = n_{s,u} r_u C_LCM mod n`` encrypts
``n_{s,u} C_LCM / N_u``; one fixed-base table of each ``W_u``
(:class:`fedprivacy.crypto.fixed_base.FixedBaseTable`) serves every parameter, and
:class:`WeightTables` keeps them while the server sends the same ciphertexts (sessions without
sub-sampling). Negative exponents are handled by an offset: ``W_u^(E + 2^b)`` with ``2^b > |E|``,
times ``(prod_u W_u^(2^b))^-1``, one inversion per round (:func:`weighted_products`).
"""

from __future__ import annotations

from concurrent.futures import Executor

import gmpy2
import numpy as np
from gmpy2 import mpz

from fedprivacy.crypto.fixed_base import FixedBaseTable, product_of_powers
from fedprivacy.crypto.parallel import parallel_map
from fedprivacy.errors import CryptoError

__all__ = ["WeightTables", "weighted_products"]


class WeightTables:
    """Fixed-base tables of ``W_u = c_u^(k_u) mod n^2``, rebuilt only for changed ``c_u``.

    Parameters
    ----------
    n_square : mpz
        ``n^2``.
    exponent_bits : int
        Bit length of the shifted exponents ``E + 2^b``.
    window : int
        Digit width of the tables.
    executor : concurrent.futures.Executor, optional
        Thread pool for the full exponentiations.
    """

    def __init__(
        self, n_square: mpz, exponent_bits: int, window: int, executor: Executor | None
    ) -> None:
        self._n2 = n_square
        self._bits = exponent_bits
        self.window = window
        self._executor = executor
        self._cache: dict[int, tuple[mpz, FixedBaseTable]] = {}

    def tables(self, weights: list[mpz], scalars: list[mpz]) -> list[FixedBaseTable]:
        """The tables of ``weights[u]^(scalars[u])``, reused while ``weights[u]`` repeats.

        Parameters
        ----------
        weights : list of mpz
            The round's ``Enc(B_inv(N_u))``.
        scalars : list of mpz
            ``k_u`` for every user.

        Returns
        -------
        list of FixedBaseTable
            One per user.
        """
        n2, bits, window = self._n2, self._bits, self.window
        cache = self._cache
        stale = [u for u, c in enumerate(weights) if u not in cache or cache[u][0] != c]
        if stale:
            jobs = [(weights[u], scalars[u]) for u in stale]

            def build(job: tuple[mpz, mpz]) -> FixedBaseTable:
                c, k = job
                w = gmpy2.powmod_base_list([c], k, n2)[0]
                return FixedBaseTable(w, n2, bits, window)

            for u, table in zip(stale, parallel_map(build, jobs, self._executor), strict=True):
                cache[u] = (weights[u], table)
        return [cache[u][1] for u in range(len(weights))]


def weighted_products(
    tables: list[FixedBaseTable],
    exps: np.ndarray,
    offset_bits: int,
    n_square: mpz,
    executor: Executor | None,
) -> list[mpz]:
    """``prod_u W_u^(E_{u,j}) mod n^2`` for every parameter ``j`` (signed ``E``).

    Parameters
    ----------
    tables : list of FixedBaseTable
        The tables of ``W_u`` (one per user, same window).
    exps : numpy.ndarray
        ``int64`` exponents ``E``, shape ``(users, params)``, ``|E| < 2^offset_bits``.
    offset_bits : int
        ``b``.
    n_square : mpz
        ``n^2``.
    executor : concurrent.futures.Executor, optional
        Thread pool.

    Returns
    -------
    list of mpz
        One ciphertext per parameter.
    """
    shifted = (exps + np.int64(1 << offset_bits)).astype(np.uint64)
    products = product_of_powers(tables, shifted, executor)
    # prod_u W_u^(2^b): the digit 2^(b mod w) of window b // w of every table
    k_top, digit = divmod(offset_bits, tables[0].window)
    offset = mpz(1)
    for t in tables:
        offset = offset * t.rows[k_top][1 << digit] % n_square
    try:
        offset_inv = gmpy2.invert(offset, n_square)
    except ZeroDivisionError as exc:  # pragma: no cover - a unit times units
        raise CryptoError("the offset product is not invertible modulo n^2") from exc
    return [c * offset_inv % n_square for c in products]
