"""The exact search behind ``T_weak``: the reduced ledger, small supports, GF(p) and MILP bounds.

:func:`fedprivacy.participation.privacy.t_weak` (one matrix) and
:func:`fedprivacy.participation.curve.t_weak_curve` (every prefix of a ledger) run it: reduce the
matrix to its distinct columns and a row basis (:func:`reduce_ledger`), narrow the certified
interval (:func:`solve`) and state it (:func:`search_result`, a :class:`TWeakResult`). The facts
each step rests on are listed in :mod:`fedprivacy.participation.privacy`.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import flint
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import qr
from scipy.optimize import Bounds, LinearConstraint, milp

from fedprivacy.linalg import integer_combination, left_null_vector, pivot_rows
from fedprivacy.participation.min_distance import modular_lower_bound

__all__ = [
    "Reduced",
    "Search",
    "TWeakResult",
    "official_rref_upper",
    "reduce_ledger",
    "search_result",
    "solve",
]

_SINGULAR_TOL = 1e-9
_MAX_TRIPLES = 3_000_000


@dataclass(frozen=True)
class TWeakResult:
    """Certified weak multi-round privacy of a participation matrix.

    Attributes
    ----------
    lower, upper : int or None
        ``lower <= T_weak <= upper``. Both are ``None`` when nobody was ever aggregated (the server
        has learned nothing, ``T_weak`` is infinite).
    witness : tuple of int
        Integer coefficients ``z``, one per round of the input matrix, with ``|supp(zᵀP)| ==
        upper``. Empty when ``upper`` is None.
    support : tuple of int
        The users in ``supp(zᵀP)``.
    official_upper : int or None
        What the paper's code reports: the smallest row support of ``rref(P)``. Always
        ``>= upper``.
    rank : int
        Rank of ``P`` over the rationals.
    seconds : float
        Wall-clock time spent.
    """

    lower: int | None
    upper: int | None
    witness: tuple[int, ...] = ()
    support: tuple[int, ...] = ()
    official_upper: int | None = None
    rank: int = 0
    seconds: float = 0.0

    @property
    def exact(self) -> bool:
        """Whether the interval collapsed to a single value."""
        return self.lower == self.upper

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form: ``{"lower", "upper", "exact", ...}``."""
        return {
            "lower": self.lower,
            "upper": self.upper,
            "exact": self.exact,
            "official_rref_upper": self.official_upper,
            "rank": self.rank,
            "witness": list(self.witness),
            "support": list(self.support),
            "seconds": round(self.seconds, 4),
        }


@dataclass
class Reduced:
    """A participation matrix reduced to its basis rows and distinct nonzero columns."""

    pivots: list[int]  # rows of the original matrix forming a basis of its row space
    matrix: NDArray[np.int64]  # rank x D: basis rows restricted to distinct columns
    weights: NDArray[np.int64]  # multiplicity of each distinct column
    members: list[NDArray[np.intp]]  # original users of each distinct column
    num_rounds: int
    num_users: int
    _null_projector: NDArray[np.float64] | None = field(default=None, repr=False)
    _row_basis: NDArray[np.float64] | None = field(default=None, repr=False)

    @property
    def rank(self) -> int:
        """Rows of the basis."""
        return int(self.matrix.shape[0])

    @property
    def num_columns(self) -> int:
        """Distinct nonzero columns ``D``."""
        return int(self.matrix.shape[1])

    def row_basis(self) -> NDArray[np.float64]:
        """Orthonormal basis (D x rank) of the row space, in column-space-of-Aᵀ form."""
        if self._row_basis is None:
            q, _ = qr(self.matrix.T.astype(np.float64), mode="economic")
            self._row_basis = np.ascontiguousarray(q[:, : self.rank])
        return self._row_basis

    def null_projector(self) -> NDArray[np.float64]:
        """Orthogonal projector (D x D) onto the null space of the reduced matrix."""
        if self._null_projector is None:
            q = self.row_basis()
            self._null_projector = np.eye(self.num_columns) - q @ q.T
        return self._null_projector


def reduce_ledger(p: NDArray[np.uint8], pivots: Sequence[int] | None = None) -> Reduced:
    """``p`` on a basis of its rows (``pivots``, or its pivot rows) and its distinct columns."""
    piv = list(pivot_rows(p)) if pivots is None else list(pivots)
    basis = p[piv].astype(np.int64)
    used = np.flatnonzero(basis.any(axis=0))
    if used.size == 0:
        return Reduced(piv, np.zeros((0, 0), np.int64), np.zeros(0, np.int64), [], *p.shape)
    cols, inverse, counts = np.unique(
        basis[:, used].T, axis=0, return_inverse=True, return_counts=True
    )
    inverse = np.asarray(inverse).ravel()
    order = np.argsort(inverse, kind="stable")
    splits = np.cumsum(counts)[:-1]
    members = [used[g] for g in np.split(order, splits)]
    return Reduced(piv, cols.T.copy(), counts.astype(np.int64), members, *p.shape)


class Search:
    """Best witness found so far for one reduced matrix, kept exact."""

    def __init__(self, red: Reduced) -> None:
        self.red = red
        self.upper: int | None = None
        self.z: list[int] | None = None  # coefficients on the basis rows
        self.official: int | None = None  # the paper code's rref bound, once computed

    def offer_support(self, columns: ArrayLike) -> bool:
        """Try a set of distinct columns; keep it if a row-space vector lives inside it."""
        cols = np.unique(np.asarray(columns, dtype=np.intp))
        if cols.size == 0:
            return False
        rest = np.setdiff1d(np.arange(self.red.num_columns), cols)
        z = left_null_vector(self.red.matrix[:, rest])
        if z is None:
            return False
        return self.offer_coefficients(z)

    def offer_coefficients(self, z: Sequence[int]) -> bool:
        """Keep ``zᵀA`` if it is nonzero and lighter than the current best (exact check)."""
        v = integer_combination(z, self.red.matrix)
        support = np.flatnonzero(np.asarray([x != 0 for x in v], dtype=bool))
        if support.size == 0:
            return False
        weight = int(self.red.weights[support].sum())
        if self.upper is None or weight < self.upper:
            self.upper, self.z = weight, list(z)
            return True
        return False


def _offer_all(search: Search, supports: Sequence[ArrayLike], deadline: float) -> bool:
    """Offer each support in turn (each an exact solve); ``False`` if the deadline cut it short."""
    for support in supports:
        if time.perf_counter() > deadline:
            return False
        search.offer_support(support)
    return True


def _smallest_dependent_sets(
    red: Reduced, search: Search, max_size: int, deadline: float = math.inf
) -> int:
    """Exhaustively test supports of at most ``max_size`` distinct columns.

    Only candidates lighter than the best so far are solved exactly (lightest first), and none
    after ``deadline``. Returns the largest ``s`` such that every set of at most ``s`` columns
    was tested.
    """
    nproj = red.null_projector()
    d = red.num_columns
    diag = np.clip(np.diag(nproj).copy(), 0.0, None)
    # size 1: coloops (e_j in the row space)
    coloops = np.flatnonzero(diag <= _SINGULAR_TOL)
    if not _offer_all(search, [[j] for j in _cheapest(coloops, red.weights, search)], deadline):
        return 0
    if max_size < 2 or d < 2:
        return min(max_size, d)
    # size 2: det N[{i,j}] = N_ii N_jj - N_ij^2 relative to N_ii N_jj
    iu, ju = np.triu_indices(d, 1)
    prod = diag[iu] * diag[ju]
    det2 = prod - nproj[iu, ju] ** 2
    hits = np.flatnonzero((det2 <= _SINGULAR_TOL * np.maximum(prod, 1e-300)) & (prod > 0))
    pairs = _cheapest(hits, red.weights[iu] + red.weights[ju], search)
    if not _offer_all(search, [[iu[h], ju[h]] for h in pairs], deadline):
        return 1
    if max_size < 3 or d < 3 or math.comb(d, 3) > _MAX_TRIPLES:
        return 2
    trip = _triples(d)
    a, b, c = trip[:, 0], trip[:, 1], trip[:, 2]
    naa, nbb, ncc = diag[a], diag[b], diag[c]
    nab, nac, nbc = nproj[a, b], nproj[a, c], nproj[b, c]
    det3 = (
        naa * (nbb * ncc - nbc**2) - nab * (nab * ncc - nbc * nac) + nac * (nab * nbc - nbb * nac)
    )
    scale = naa * nbb * ncc
    hits = np.flatnonzero((det3 <= _SINGULAR_TOL * np.maximum(scale, 1e-300)) & (scale > 0))
    weights3 = red.weights[a] + red.weights[b] + red.weights[c]
    if not _offer_all(search, [trip[h] for h in _cheapest(hits, weights3, search)], deadline):
        return 2
    return 3


@functools.lru_cache(maxsize=8)
def _triples(d: int) -> NDArray[np.intp]:
    """All increasing index triples of ``range(d)`` (cached: the curve reuses a few sizes)."""
    out = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(d), 3)),
        dtype=np.intp,
        count=3 * math.comb(d, 3),
    ).reshape(-1, 3)
    out.setflags(write=False)
    return out


def _cheapest(
    hits: NDArray[np.intp], weights: NDArray[np.int64], search: Search, limit: int = 64
) -> list[int]:
    """The lightest candidate sets first, at most ``limit`` of them, that can still improve."""
    if hits.size == 0:
        return []
    order = hits[np.argsort(weights[hits], kind="stable")]
    if search.upper is not None:
        order = order[weights[order] < search.upper]
    return [int(h) for h in order[:limit]]


def _rref_supports(red: Reduced) -> list[NDArray[np.intp]]:
    """Supports of the rows of ``rref(P)`` (exact), lightest first."""
    reduced, rank = flint.fmpq_mat(red.rank, red.num_columns, red.matrix.ravel().tolist()).rref()
    supports = [
        np.array([j for j in range(red.num_columns) if reduced[i, j] != 0], np.intp)
        for i in range(int(rank))
    ]
    return sorted(supports, key=lambda sup: int(red.weights[sup].sum()))


def official_rref_upper(red: Reduced) -> int | None:
    """Smallest support of a row of rref(P): the upper bound reported by the paper's code."""
    if red.rank == 0:
        return None
    return int(red.weights[_rref_supports(red)[0]].sum())


def _nullity_candidate(red: Reduced, search: Search) -> None:
    """Any ``nullity + 1`` columns carry a row-space vector: take the lightest ones."""
    nullity = red.num_columns - red.rank
    order = np.argsort(red.weights, kind="stable")[: nullity + 1]
    if search.upper is None or int(red.weights[order].sum()) < search.upper:
        search.offer_support(order)


def _milp_anchor(
    red: Reduced, anchor: int, cutoff: int, time_limit: float
) -> tuple[str, float, NDArray[np.intp] | None]:
    """Lightest row-space vector whose largest entry (in magnitude) sits at ``anchor``.

    Solves ``min Σ w_j y_j`` over ``v = Q x`` with ``v_anchor = 1``, ``-y <= v <= y``, binary
    ``y`` and ``Σ w_j y_j <= cutoff``. Returns ``(status, bound, support)``, status one of
    ``"optimal"``, ``"infeasible"`` (no vector within the cutoff) or ``"timeout"``; ``bound`` is a
    valid lower bound on the anchor's optimum.
    """
    q = red.row_basis()
    d, r = q.shape
    w = red.weights.astype(np.float64)
    eye = np.eye(d)
    zeros_r = np.zeros(r)
    cons = [
        LinearConstraint(np.hstack([q, -eye]), -np.inf, 0.0),
        LinearConstraint(np.hstack([q, eye]), 0.0, np.inf),
        LinearConstraint(np.concatenate([q[anchor], np.zeros(d)])[None, :], 1.0, 1.0),
        LinearConstraint(np.concatenate([zeros_r, w])[None, :], -np.inf, float(cutoff)),
    ]
    lb = np.concatenate([np.full(r, -np.inf), np.zeros(d)])
    ub = np.concatenate([np.full(r, np.inf), np.ones(d)])
    lb[r + anchor] = 1.0
    integrality = np.concatenate([np.zeros(r), np.ones(d)])
    res = milp(
        np.concatenate([zeros_r, w]),
        constraints=cons,
        bounds=Bounds(lb, ub),
        integrality=integrality,
        options={"time_limit": max(time_limit, 1e-3), "disp": False},
    )
    support = None
    if res.x is not None:
        support = np.flatnonzero(res.x[r:] > 0.5)
    if res.status == 0:
        return "optimal", float(res.fun), support
    if res.status == 2:
        return "infeasible", float(cutoff) + 1.0, None
    bound = getattr(res, "mip_dual_bound", None)
    if bound is None or not np.isfinite(bound):
        bound = 0.0
    return "timeout", float(bound), support


def _known(search: Search) -> int:
    assert search.upper is not None
    return search.upper


def solve(
    red: Reduced,
    *,
    time_limit: float,
    hint_upper: Sequence[int] | None,
    hint_lower: int | None,
    search_exact: bool = True,
) -> tuple[int, Search]:
    """Certified lower bound and best exact witness for a reduced matrix."""
    deadline = time.perf_counter() + time_limit
    search = Search(red)
    if hint_upper is not None:
        search.offer_coefficients(hint_upper)
    weights_sorted = np.sort(red.weights)
    supports = _rref_supports(red)
    search.official = int(red.weights[supports[0]].sum())
    search.offer_support(supports[0])  # rows of rref(P) are row-space vectors
    _nullity_candidate(red, search)
    tested = _smallest_dependent_sets(red, search, 3, deadline)
    assert search.upper is not None  # the rref rows always give a candidate
    # every set of more than `tested` columns weighs at least the `tested + 1` lightest weights
    lower = int(weights_sorted[: tested + 1].sum()) if tested < red.num_columns else search.upper
    if hint_lower is not None:
        lower = max(lower, hint_lower)
    lower = min(lower, search.upper)
    if lower >= search.upper:
        return search.upper, search
    modular = modular_lower_bound(
        red.matrix,
        red.weights,
        upper=lambda: _known(search),
        offer=search.offer_support,
        deadline=deadline,
        max_level=3 if search_exact else 2,
        known_lower=lower,
    )
    lower = max(lower, min(modular.lower, search.upper))
    if lower >= search.upper or not search_exact:
        return min(lower, search.upper), search
    # exact search: one MILP per anchor column
    anchor_bounds: list[float] = []
    order = np.argsort(-red.weights, kind="stable")
    for idx, anchor in enumerate(order):
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            anchor_bounds.extend([float(lower)] * (len(order) - idx))
            break
        if red.weights[anchor] >= search.upper:
            continue  # a support containing this column is never lighter than the best
        status, bound, support = _milp_anchor(red, int(anchor), search.upper - 1, remaining)
        if support is not None and support.size:
            search.offer_support(support)
        if status == "optimal":
            anchor_bounds.append(bound)
        elif status == "infeasible":
            anchor_bounds.append(float(search.upper))
        else:
            anchor_bounds.append(max(bound, float(lower)))
    if anchor_bounds:
        proved = math.ceil(min(anchor_bounds) - 1e-6)
        lower = max(lower, min(proved, search.upper))
    else:
        lower = search.upper
    return min(lower, search.upper), search


def search_result(
    red: Reduced,
    lower: int,
    search: Search,
    p: NDArray[np.uint8],
    official: int | None,
    started: float,
) -> TWeakResult:
    """The certified interval ``[lower, search.upper]``, its witness checked in exact arithmetic."""
    assert search.z is not None and search.upper is not None
    z_full = [0] * red.num_rounds
    for row, coeff in zip(red.pivots, search.z, strict=True):
        z_full[row] = int(coeff)
    combo = integer_combination(z_full, p)
    support = tuple(int(i) for i, x in enumerate(combo) if x != 0)
    if len(support) != search.upper:  # pragma: no cover - guarded by exact arithmetic
        raise AssertionError("witness does not attain the reported upper bound")
    return TWeakResult(
        lower=lower,
        upper=search.upper,
        witness=tuple(z_full),
        support=support,
        official_upper=official,
        rank=red.rank,
        seconds=time.perf_counter() - started,
    )
