"""Certified lower bounds on ``T_weak`` from the minimum distance of the row space modulo a prime.

``T_weak(P)`` is the minimum (weighted) support of a nonzero vector of the rational row space of
``P``: the minimum distance of the linear code it spans. Two facts turn that into a computation
over a finite field:

1. **Reduction modulo p.** If ``rank_p(P) == rank_Q(P)``, the row space of ``P mod p`` is the
   reduction of the saturated lattice ``rowspace_Q(P) ∩ Zⁿ``. A lightest rational vector, scaled
   to a primitive integer vector, reduces to a *nonzero* vector of that space whose support is no
   larger. Hence the minimum distance ``d_p`` over GF(p) satisfies ``d_p <= T_weak``. (The
   converse can fail, so a light GF(p) codeword is only a candidate; it is checked in exact
   rational arithmetic before it lowers the upper bound.)
2. **Brouwer-Zimmermann enumeration.** Let ``I_1, ..., I_m`` be disjoint sets of independent
   columns of ranks ``r_j`` (``I_j`` is an information set when ``r_j = r``, the rank) and let each
   be extended to an information set. If every codeword with at most ``w`` nonzeros on the
   ``j``-th extended set has been examined, every codeword not examined has at least
   ``w + 1 - (r - r_j)`` nonzeros inside ``I_j``, so its weight is at least the sum over ``j`` of
   that many of the smallest column weights of ``I_j``.

The codewords with at most ``w`` nonzeros on an information set are the nonzero combinations of
``w`` rows of the systematic generator. Over a large field they cannot be listed, so each
``w``-dimensional subcode is searched geometrically: the codeword with coefficients ``a`` vanishes
on column ``c`` exactly when ``a`` is orthogonal to the column's restriction ``x_c`` to those
rows. For ``w = 2`` the lightest codeword is the most frequent ratio of ``x_c``. For ``w = 3`` a
codeword lighter than ``b + 1`` leaves at most ``b`` columns off its plane, so among any ``b + 2``
nonzero columns two lie on the plane and, when they are not parallel, determine it: ``C(b+2, 2)``
candidate planes per triple instead of all of them (triples where the argument needs parallel
columns are searched over every pair).

The field is ``GF(2**31 - 1)`` (or the next prime below when the ranks disagree there): products of
two residues stay exact in int64. Systematic forms come from FLINT's ``nmod_mat.rref``.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import flint
import numpy as np
from numpy.typing import NDArray

from fedprivacy.linalg import cross3_mod, dot3_mod, inverse_mod, mulmod

__all__ = ["ModularBound", "modular_lower_bound"]

PRIMES = (2_147_483_647, 2_147_483_629, 2_147_483_587)
_CHUNK = 1024  # subsets of rows examined per vectorised step
_MAX_SUBSETS = 400_000  # per information set and level; larger levels are not attempted
_ORDERS = 8  # column orders tried for the greedy partition into independent sets

Offer = Callable[[NDArray[np.intp]], object]


@dataclass(frozen=True)
class ModularBound:
    """Outcome of :func:`modular_lower_bound`.

    Attributes
    ----------
    lower : int
        A certified lower bound on ``T_weak`` (0 when no prime had the rational rank).
    prime : int or None
        The field used.
    level : int
        The Brouwer-Zimmermann level completed on every useful information set.
    sets : tuple of int
        Ranks of the disjoint column sets used.
    lightest_modular : int or None
        Weight of the lightest GF(p) codeword that the exact check did not confirm (None if
        every light codeword found was also a rational one).
    """

    lower: int
    prime: int | None
    level: int
    sets: tuple[int, ...]
    lightest_modular: int | None


@dataclass
class _Code:
    """The row space modulo ``p`` with one systematic generator per disjoint column set."""

    prime: int
    weights: NDArray[np.int64]
    sets: list[NDArray[np.intp]]  # disjoint independent column sets
    generators: list[NDArray[np.int64]]  # r x D, identity on an information set containing I_j

    @property
    def ranks(self) -> list[int]:
        """Rank of each set (its size: the columns are independent)."""
        return [int(s.size) for s in self.sets]

    def bound(self, rank: int, level: int) -> int:
        """Weight of every codeword not examined once ``level`` is done on every set."""
        return _partition_bound(self.sets, self.weights, rank, level)


def _nmod(matrix: NDArray[np.int64], p: int) -> flint.nmod_mat:
    rows, cols = matrix.shape
    return flint.nmod_mat(int(rows), int(cols), (matrix % p).ravel().tolist(), p)


def _rref(
    matrix: NDArray[np.int64], p: int, *, full: bool = True
) -> tuple[NDArray[np.int64], list[int]]:
    """Row echelon form modulo ``p`` (nonzero rows; reduced when ``full``) and its pivot columns.

    Row operations on int64 residues: ``p < 2**31`` keeps every product exact.
    """
    m = matrix % p
    pivots: list[int] = []
    row = 0
    for col in range(m.shape[1]):
        if row == m.shape[0]:
            break
        below = np.flatnonzero(m[row:, col])
        if below.size == 0:
            continue
        k = row + int(below[0])
        m[[row, k]] = m[[k, row]]
        m[row] = (m[row] * pow(int(m[row, col]), p - 2, p)) % p
        rows = np.flatnonzero(m[:, col]) if full else row + 1 + np.flatnonzero(m[row + 1 :, col])
        rows = rows[rows != row]
        m[rows] = (m[rows] - (m[rows, col : col + 1] * m[row]) % p) % p
        pivots.append(col)
        row += 1
    return m[:row], pivots


def _build(matrix: NDArray[np.int64], weights: NDArray[np.int64]) -> _Code | None:
    """Disjoint column sets greedily, with systematic generators; None if no prime fits."""
    rank, cols = matrix.shape
    for p in PRIMES:
        if _nmod(matrix, p).rank() == rank:
            break
    else:
        return None
    sets = _disjoint_sets(matrix, p, weights)
    generators = []
    for chosen in sets:
        order = np.concatenate([chosen, np.setdiff1d(np.arange(cols), chosen)])
        reduced, _ = _rref(matrix[:, order], p)
        generator = np.empty_like(reduced)
        generator[:, order] = reduced
        generators.append(generator)
    return _Code(p, weights, sets, generators)


def _greedy_sets(
    matrix: NDArray[np.int64], p: int, order: NDArray[np.intp]
) -> list[NDArray[np.intp]]:
    """Disjoint independent column sets, each the pivots of the columns left, in ``order``."""
    sets: list[NDArray[np.intp]] = []
    remaining = order
    while remaining.size:
        _, piv = _rref(matrix[:, remaining], p, full=False)
        if not piv:
            break
        sets.append(remaining[piv])
        remaining = np.delete(remaining, piv)
    return sets


def _disjoint_sets(
    matrix: NDArray[np.int64], p: int, weights: NDArray[np.int64]
) -> list[NDArray[np.intp]]:
    """The greedy partition (over a few seeded column orders) with the best level-3 bound."""
    rank, cols = matrix.shape
    rng = np.random.default_rng(cols)
    orders = [np.arange(cols)] + [rng.permutation(cols) for _ in range(_ORDERS - 1)]
    best: list[NDArray[np.intp]] = []
    for order in orders:
        sets = _greedy_sets(matrix, p, order)
        if not best or _partition_bound(sets, weights, rank, 3) > _partition_bound(
            best, weights, rank, 3
        ):
            best = sets
        if all(chosen.size == rank for chosen in best[: cols // rank]):
            break  # as many full sets as the columns allow
    return best


def _optimistic_bound(rank: int, weights: NDArray[np.int64], level: int) -> int:
    """The bound of a perfect partition (``D // rank`` full sets and the rest independent)."""
    cols = weights.size
    light = np.sort(weights)
    full, rest = divmod(cols, rank)
    return int(full * light[: level + 1].sum() + light[: max(0, level + 1 - (rank - rest))].sum())


def _partition_bound(
    sets: list[NDArray[np.intp]], weights: NDArray[np.int64], rank: int, level: int
) -> int:
    """Weight every codeword not yet examined must have after ``level`` is done on every set."""
    total = 0
    for chosen in sets:
        need = level + 1 - (rank - chosen.size)
        if need > 0:
            total += int(np.sort(weights[chosen])[:need].sum())
    return total


class _Enumerator:
    """Examines the subcodes spanned by ``w`` rows of one systematic generator."""

    def __init__(self, code: _Code, offer: Offer, upper: Callable[[], int]) -> None:
        self.code = code
        self.offer = offer
        self.upper = upper
        self.lightest_modular: int | None = None

    def threshold(self) -> int:
        """Codewords lighter than this are worth reporting."""
        bound = self.upper()
        if self.lightest_modular is not None:
            bound = min(bound, self.lightest_modular)
        return bound

    def found(self, support: NDArray[np.intp]) -> None:
        weight = int(self.code.weights[support].sum())
        before = self.upper()
        self.offer(support)
        if self.upper() >= before and weight < before:
            self.lightest_modular = (
                weight if self.lightest_modular is None else min(self.lightest_modular, weight)
            )

    def singles(self, g: NDArray[np.int64]) -> None:
        weights = (g != 0).astype(np.int64) @ self.code.weights
        for row in np.flatnonzero(weights < self.threshold()):
            self.found(np.flatnonzero(g[row]))

    def pairs(self, g: NDArray[np.int64], deadline: float) -> bool:
        p, w = self.code.prime, self.code.weights
        inverse = inverse_mod(g, p)
        idx = np.array(list(itertools.combinations(range(g.shape[0]), 2)), dtype=np.intp)
        total = w.sum()
        for start in range(0, len(idx), _CHUNK):
            if time.perf_counter() > deadline:
                return False
            s, t = idx[start : start + _CHUNK, 0], idx[start : start + _CHUNK, 1]
            xs, xt = g[s], g[t]
            # projective key of (x_s, x_t): x_s / x_t, or p for x_t = 0; -1 for the zero column
            key = np.where(xt != 0, mulmod(xs, inverse[t], p), p)
            key = np.where((xs == 0) & (xt == 0), -1, key)
            zero_weight = ((key == -1) * w).sum(axis=1)
            best = _heaviest_class(key, w)
            off = total - zero_weight - best
            for i in np.flatnonzero(off < self.threshold()):
                self._pair_witness(key[i])
        return True

    def _pair_witness(self, key: NDArray[np.int64]) -> None:
        w = self.code.weights
        classes = np.unique(key[key >= 0])
        sums = np.array([w[key == k].sum() for k in classes])
        on = (key == -1) | (key == classes[int(np.argmax(sums))])
        self.found(np.flatnonzero(~on))

    def triples(self, g: NDArray[np.int64], deadline: float) -> bool:
        w = self.code.weights
        nonzero = (g != 0).astype(np.int8)
        idx = np.array(list(itertools.combinations(range(g.shape[0]), 3)), dtype=np.intp)
        for start in range(0, len(idx), _CHUNK):
            if time.perf_counter() > deadline:
                return False
            block = idx[start : start + _CHUNK]
            # with every coefficient nonzero (the others were examined at level 2), a column
            # that only one of the three rows touches is off the plane
            budget = self.threshold() - 1 - (nonzero[block].sum(axis=1) == 1) @ w
            for b in np.unique(budget[budget >= 0]):
                rows = block[budget == b]
                points = np.stack([g[rows[:, 0]], g[rows[:, 1]], g[rows[:, 2]]], axis=-1)
                for i in self._screen(points, int(b)):
                    self._planes(points[i])
        return True

    def _screen(self, points: NDArray[np.int64], budget: int) -> NDArray[np.intp]:
        """Triples (``points`` of shape (n, D, 3)) that :meth:`_planes` must examine.

        The vectorised form of its last case: planes through two of the first ``budget + 2``
        shared columns. Triples where that case does not settle the question (fewer shared
        columns, or parallel ones among the first) are passed on whole.
        """
        p, w = self.code.prime, self.code.weights
        shared = (points != 0).sum(axis=2) >= 2
        ws = shared * w
        take = budget + 2
        order = np.argsort(~shared, axis=1, kind="stable")[:, :take]
        short = shared.sum(axis=1) < take
        first = np.take_along_axis(points, order[:, :, None], axis=1)
        i, j = np.triu_indices(first.shape[1], 1)
        normals = cross3_mod(first[:, i], first[:, j], p)  # (n, pairs, 3)
        parallel: NDArray[np.bool_] = np.logical_not(normals.any(axis=2))
        dots = dot3_mod(normals[:, :, None, :], points[:, None, :, :], p)
        off = ((dots != 0) * ws[:, None, :]).sum(axis=2)
        hit = (normals.all(axis=2) & (off <= budget)).any(axis=1)
        return np.flatnonzero(hit | short | parallel.any(axis=1))

    def _planes(self, points: NDArray[np.int64]) -> None:
        """Codewords of one triple's subcode with every coefficient nonzero (shape (D, 3)).

        Such a codeword is off every column that one row alone touches; a column two or three
        rows touch is on it when the coefficient vector ``a`` is orthogonal to the column. A plane
        with at most ``b`` columns off holds no shared column, or one projective class of them, or
        it is spanned by two classes; among any ``b + 2`` classes, two are then on it.
        """
        p, w = self.code.prime, self.code.weights
        count = (points != 0).sum(axis=1)
        alone = np.flatnonzero(count == 1)
        shared = np.flatnonzero(count >= 2)
        base = int(w[alone].sum())
        budget = self.threshold() - 1 - base
        if budget < 0:
            return
        x = points[shared]
        ws = w[shared]
        if int(ws.sum()) <= budget:  # a plane holding no shared column
            self.found(np.concatenate([alone, shared]))
        together: NDArray[np.bool_] = np.logical_not(
            cross3_mod(x[:, None, :], x[None, :, :], p).any(axis=2)
        )
        class_weight = together.astype(np.int64) @ ws
        # a plane holding one class of parallel shared columns (and a generic normal)
        for k in np.flatnonzero(ws.sum() - class_weight <= budget):
            self.found(np.concatenate([alone, shared[~together[k]]]))
        # a plane spanned by two classes: among any budget + 2 classes, two are on it
        reps = np.flatnonzero(np.argmax(together, axis=1) == np.arange(x.shape[0]))[: budget + 2]
        i, j = np.triu_indices(reps.size, 1)
        normals = cross3_mod(x[reps[i]], x[reps[j]], p)
        normals = normals[normals.all(axis=1)]
        dots = dot3_mod(normals[:, None, :], x[None, :, :], p)
        off = (dots != 0) @ ws
        for k in np.flatnonzero(off <= budget):
            self.found(np.concatenate([alone, shared[dots[k] != 0]]))


def _heaviest_class(key: NDArray[np.int64], w: NDArray[np.int64]) -> NDArray[np.int64]:
    """Per row of ``key``, the largest total weight of one nonnegative key value."""
    n, d = key.shape
    order = np.argsort(key, axis=1, kind="stable")
    sk = np.take_along_axis(key, order, axis=1)
    sw = w[order]
    starts = np.ones((n, d), dtype=bool)
    starts[:, 1:] = sk[:, 1:] != sk[:, :-1]
    flat_starts = np.flatnonzero(starts.ravel())
    sums = np.add.reduceat(sw.ravel(), flat_starts)
    valid = sk.ravel()[flat_starts] >= 0
    rows = flat_starts // d
    best = np.zeros(n, dtype=np.int64)
    np.maximum.at(best, rows[valid], sums[valid])
    return best


_LEVELS: dict[int, Callable[[_Enumerator, NDArray[np.int64], float], bool]] = {
    2: _Enumerator.pairs,
    3: _Enumerator.triples,
}


def modular_lower_bound(
    matrix: NDArray[np.int64],
    weights: NDArray[np.int64],
    *,
    upper: Callable[[], int],
    offer: Offer,
    deadline: float,
    max_level: int = 3,
    known_lower: int = 0,
) -> ModularBound:
    """Certified lower bound on the minimum weighted support of the row space of ``matrix``.

    Parameters
    ----------
    matrix : ndarray of int64, shape (rank, D)
        Linearly independent integer rows (over the rationals).
    weights : ndarray of int64, shape (D,)
        Positive weight of each column (users sharing a column).
    upper : callable
        Returns the best exact (rational) upper bound known; codewords at least that heavy are
        not reported.
    offer : callable
        Called with the support of every light GF(p) codeword found, for the exact check (which
        may lower ``upper()``).
    deadline : float
        ``time.perf_counter()`` value after which no new level is started.
    max_level : int
        Deepest Brouwer-Zimmermann level (1 to 3).
    known_lower : int
        A bound already proved; the search is skipped when it cannot do better.

    Returns
    -------
    ModularBound

    Examples
    --------
    Two rounds of five users in four disjoint information sets: no combination is lighter than a
    round.

    >>> import numpy as np
    >>> a = np.array([[1, 1, 1, 1, 0, 1, 0, 1], [0, 1, 0, 1, 1, 1, 1, 0]], dtype=np.int64)
    >>> modular_lower_bound(a, np.ones(8, np.int64), upper=lambda: 5, offer=lambda s: None,
    ...                     deadline=float("inf")).lower
    5
    """
    rank = int(matrix.shape[0])
    if _optimistic_bound(rank, weights, max_level) <= known_lower:
        return ModularBound(known_lower, None, 0, (), None)
    code = _build(matrix, weights)
    if code is None:
        return ModularBound(0, None, 0, (), None)
    enum = _Enumerator(code, offer, upper)
    level = 0
    for w in range(1, max_level + 1):
        if min(code.bound(rank, level), enum.threshold()) >= upper():
            break
        useful = [j for j, r_j in enumerate(code.ranks) if w + 1 - (rank - r_j) > 0]
        if code.bound(rank, w) <= code.bound(rank, level):
            break  # this level cannot raise the bound
        if time.perf_counter() > deadline or math.comb(rank, w) > _MAX_SUBSETS:
            break
        complete = True
        for j in useful:
            g = code.generators[j]
            if w == 1:
                enum.singles(g)
            elif not _LEVELS[w](enum, g, deadline):
                complete = False
                break
        if not complete:
            break
        level = w
    lower = min(code.bound(rank, level), enum.threshold(), upper())
    return ModularBound(lower, code.prime, level, tuple(code.ranks), enum.lightest_modular)
