"""Fixed-base exponentiation: windowed tables of one base's powers, and products of such powers.

When one base is raised to many exponents (an encrypted weight multiplied into every parameter
of a model), ``base^(d 2^(w k))`` is tabulated once for every window ``k`` and digit ``d``
(:class:`FixedBaseTable`); each power then costs one multiplication per window instead of a
square-and-multiply. :func:`choose_window` picks the digit width ``w`` from the number of uses,
:func:`build_tables` builds many tables and :func:`product_of_powers` multiplies the powers of
several tables, column by column, on a thread pool (:mod:`fedprivacy.crypto.parallel`). Every
result is exact.

Examples
--------
>>> from fedprivacy.crypto.fixed_base import FixedBaseTable, choose_window
>>> table = FixedBaseTable(3, 1000003, 20, choose_window(20, 100))
>>> int(table.pow(12345)) == pow(3, 12345, 1000003)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor

import numpy as np
from gmpy2 import mpz

from fedprivacy._validation import require_int
from fedprivacy.crypto.parallel import chunks, parallel_map, worker_count
from fedprivacy.errors import ParameterError

__all__ = ["FixedBaseTable", "build_tables", "choose_window", "product_of_powers"]

_ONE = mpz(1)


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
        columns_product, chunks(range(columns), worker_count(executor)), executor
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
