"""``T_weak`` after every round of a participation matrix, as certified intervals.

``T_weak`` (see :mod:`fedprivacy.participation.privacy`) never increases over rounds and only
changes when the rank of ``P`` grows, so a curve needs at most ``rank(P)`` evaluations and a bound
proved at one round transfers to others by monotonicity.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from fedprivacy._validation import require_binary_matrix
from fedprivacy.errors import ParameterError
from fedprivacy.linalg import pivot_rows
from fedprivacy.participation.t_weak_search import (
    TWeakResult,
    official_rref_upper,
    reduce_ledger,
    search_result,
    solve,
)

_FAST_SHARE = 0.4  # of a curve's time limit, for the pass of fast bounds over every round


@dataclass(frozen=True)
class TWeakCurve:
    """``T_weak`` after every round, as certified intervals.

    Attributes
    ----------
    lower, upper : ndarray of float, shape (rounds,)
        Bounds after each round (NaN before the first aggregate).
    official_upper : ndarray of float, shape (rounds,)
        The paper code's bound (smallest row support of ``rref(P)``) after each round.
    change_rounds : list of int
        Rounds at which the rank of ``P`` grew (the only rounds where ``T_weak`` can change).
    evaluations : dict of int to TWeakResult
        The results at the change rounds that were evaluated, keyed by round.
    seconds : float
        Wall-clock time spent.
    """

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    official_upper: NDArray[np.float64]
    change_rounds: list[int]
    evaluations: dict[int, TWeakResult]
    seconds: float

    @property
    def exact(self) -> bool:
        """Whether every round's interval collapsed."""
        mask = ~np.isnan(self.lower)
        return bool(np.all(self.lower[mask] == self.upper[mask]))

    @property
    def final(self) -> TWeakResult | None:
        """The evaluation at the last change round (``T_weak`` of the whole matrix)."""
        if not self.change_rounds:
            return None
        return self.evaluations.get(self.change_rounds[-1])


class _CurveSearch:
    """The evidence on the change rounds of one matrix: proved bounds, witnesses, evaluations.

    Change round ``k`` (1-based) is the round of the ``k``-th pivot row, where the rank of ``P``
    reaches ``k``.
    """

    def __init__(
        self,
        p: NDArray[np.uint8],
        deadline: float,
        point_time_limit: float,
        progress: Callable[[int], None] | None,
    ) -> None:
        """Start with no evidence on the matrix ``p``."""
        self.p = p
        self.deadline = deadline
        self.point_time_limit = point_time_limit
        self.progress = progress
        self.pivots = pivot_rows(p)
        self.rank = len(self.pivots)
        self.lo: dict[int, int] = {}
        self.hi: dict[int, int] = {}
        self.hints: dict[int, list[int]] = {}  # z on the first k basis rows attaining hi[k]
        self.evals: dict[int, TWeakResult] = {}

    def bounds(self, k: int) -> tuple[int, int]:
        """Certified interval at change round ``k`` from every evaluation (monotonicity)."""
        lo, hi = self.lo, self.hi
        up = min(hi[a] for a in hi if a <= k)
        return min(max(lo[b] for b in lo if b >= k), up), up

    def evaluate(self, k: int, exact: bool) -> None:
        """Bound ``T_weak`` at change round ``k``, with the exact search if ``exact``."""
        lo, hi, hints, pivots = self.lo, self.hi, self.hints, self.pivots
        t0 = time.perf_counter()
        budget = max(min(self.point_time_limit, self.deadline - t0), 1e-3)
        prefix = self.p[: pivots[k - 1] + 1]
        red = reduce_ledger(prefix, pivots[:k])
        below = [a for a in hi if a <= k]
        hint = None
        if below:  # the lightest witness known on a prefix of the basis rows
            z = hints[min(below, key=lambda a: hi[a])]
            hint = z + [0] * (k - len(z))
        above = [lo[b] for b in lo if b >= k]
        lower, search = solve(
            red,
            time_limit=budget,
            hint_upper=hint,
            hint_lower=max(above) if above else None,
            search_exact=exact,
        )
        assert search.z is not None and search.upper is not None
        lo[k], hi[k], hints[k] = max(lower, lo.get(k, 0)), search.upper, list(search.z)
        self.evals[pivots[k - 1]] = search_result(red, lo[k], search, prefix, search.official, t0)
        if self.progress is not None:
            self.progress(1)

    def fill(self, a: int, b: int, until: float) -> None:
        """Fast bounds between evaluated change rounds ``a < b``, by bisection, until ``until``."""
        # invariant: a < b evaluated; T(k) for a < k < b lies in [lo[b], hi[a]]
        if b - a <= 1 or self.lo[b] >= self.hi[a] or time.perf_counter() > until:
            return
        mid = (a + b) // 2
        self.evaluate(mid, exact=False)
        self.fill(a, mid, until)
        self.fill(mid, b, until)

    def push_exact(self) -> None:
        """Exact searches push the proved region up, by bisection over the open change rounds."""
        # (a bound proved at a round holds for every earlier one)
        open_ranks = [k for k in range(1, self.rank + 1) if not _settled(self.bounds(k))]
        first, last = 0, len(open_ranks) - 1
        while first <= last and time.perf_counter() < self.deadline:
            mid = (first + last) // 2
            self.evaluate(open_ranks[mid], exact=True)
            if _settled(self.bounds(open_ranks[mid])):
                first = mid + 1
            else:
                last = mid - 1

    def arrays(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """The lower, upper and paper-code bounds after every round."""
        p, pivots, rank = self.p, self.pivots, self.rank
        rounds = p.shape[0]
        lower = np.full(rounds, np.nan)
        upper = np.full(rounds, np.nan)
        official = np.full(rounds, np.nan)
        # propagate by monotonicity: T(k) <= hi[a] for a <= k, T(k) >= lo[b] for b >= k
        for k in range(1, rank + 1):
            low, up = self.bounds(k)
            start = pivots[k - 1]
            stop = pivots[k] if k < rank else rounds
            lower[start:stop] = low
            upper[start:stop] = up
            res = self.evals.get(start)
            if res is not None:
                official[start:stop] = res.official_upper
            else:
                official[start:stop] = official_rref_upper(reduce_ledger(p[:stop], pivots[:k]))
        return lower, upper, official


def t_weak_curve(
    participation: ArrayLike,
    *,
    time_limit: float = 60.0,
    point_time_limit: float = 5.0,
    search_exact: bool = True,
    progress: Callable[[int], None] | None = None,
) -> TWeakCurve:
    """``T_weak`` of every prefix ``P[:t+1]`` of a participation matrix.

    ``T_weak`` only changes at rounds where the rank of ``P`` grows, and it never increases, so a
    lower bound proved at a change round holds for every earlier round and an upper bound attained
    holds for every later one. The curve is computed in two phases: the fast bounds at the change
    rounds, by bisection (a stretch whose ends agree is settled without evaluation), within 40 %
    of the time limit; then exact searches at the unsettled change rounds, by bisection for the
    highest one they can settle (the hard region lies in the middle of the rank range, and a
    round settled there settles the earlier ones with the same upper bound).

    Parameters
    ----------
    participation : array_like, shape (rounds, users)
        0/1 participation matrix.
    time_limit : float
        Total seconds for the whole curve.
    point_time_limit : float
        Seconds for the exact search at one change round.
    search_exact : bool
        If False, only the fast bounds are computed (rref rows, small supports, nullity): the
        intervals stay certified but may be wider.
    progress : callable, optional
        Called with 1 after each evaluation.

    Returns
    -------
    TWeakCurve
    """
    started = time.perf_counter()
    p = require_binary_matrix("participation", participation)
    if not (time_limit > 0 and point_time_limit > 0):
        raise ParameterError("time_limit", "time limits must be positive")
    deadline = started + time_limit
    curve = _CurveSearch(p, deadline, point_time_limit, progress)
    rank = curve.rank
    if rank:
        # phase 1: exact ends, fast bounds everywhere between (bisection)
        curve.evaluate(1, search_exact)
        if rank > 1:
            curve.evaluate(rank, search_exact)
            curve.fill(1, rank, started + _FAST_SHARE * time_limit if search_exact else deadline)
        # phase 2: exact searches at the open change rounds
        if search_exact:
            curve.push_exact()
    lower, upper, official = curve.arrays()
    return TWeakCurve(
        lower,
        upper,
        official,
        [int(x) for x in curve.pivots],
        curve.evals,
        time.perf_counter() - started,
    )


def _settled(interval: tuple[int, int]) -> bool:
    return interval[0] >= interval[1]
