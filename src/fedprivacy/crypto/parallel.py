"""Thread-parallel big-integer work on gmpy2: maps and batched modular exponentiations.

gmpy2 releases the GIL in ``powmod_base_list`` and, inside a context with
``allow_release_gil=True``, in ordinary mpz arithmetic, so a thread pool runs on every core
without pickling big integers to worker processes. :func:`parallel_map` runs a function in such a
context on a :class:`concurrent.futures.Executor`; :func:`powmod_many` raises many bases to one
exponent, one slice of the bases per thread. The Paillier keys (:mod:`fedprivacy.crypto.paillier`,
:mod:`fedprivacy.crypto.paillier_public`) and the fixed-base tables
(:mod:`fedprivacy.crypto.fixed_base`) use both.

Examples
--------
>>> from fedprivacy.crypto.parallel import parallel_map, powmod_many
>>> parallel_map(lambda x: x * x, [1, 2, 3])
[1, 4, 9]
>>> [int(x) for x in powmod_many([2, 3], 5, 7, None)]
[4, 5]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import TypeVar

import gmpy2
from gmpy2 import mpz

__all__ = ["chunks", "parallel_map", "powmod_many", "worker_count"]

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


def chunks(items: Sequence[_T], parts: int) -> list[Sequence[_T]]:
    """Cut ``items`` into at most ``parts`` consecutive slices of nearly equal length.

    Parameters
    ----------
    items : sequence
        The items (a list or a ``range``).
    parts : int
        Wanted number of slices; clipped to ``[1, len(items)]``.

    Returns
    -------
    list of sequence
        Consecutive slices of ``items`` covering it in order; empty when ``items`` is.

    Examples
    --------
    >>> chunks(range(5), 2)
    [range(0, 3), range(3, 5)]
    >>> chunks([], 4)
    []
    """
    if not items:
        return []
    parts = max(1, min(parts, len(items)))
    size = -(-len(items) // parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def worker_count(executor: Executor | None) -> int:
    """Number of threads of ``executor`` (its ``_max_workers``), 1 when unknown or ``None``.

    Parameters
    ----------
    executor : concurrent.futures.Executor or None
        The thread pool.

    Returns
    -------
    int
        How many pieces to split work into.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(3) as pool:
    ...     worker_count(pool)
    3
    >>> worker_count(None)
    1
    """
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
    parts = chunks(list(bases), worker_count(executor))
    if not parts:
        return []

    def work(chunk: Sequence[int | mpz]) -> list[mpz]:
        return list(gmpy2.powmod_base_list([mpz(b) for b in chunk], e, m))

    out: list[mpz] = []
    for piece in parallel_map(work, parts, executor):
        out.extend(piece)
    return out
