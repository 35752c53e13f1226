"""The random-allocation accountant: importance sampling against plain Monte Carlo, same draws.

Baseline: the same estimator of ``delta(eps)`` from draws of the mixture itself (one level, no
tilt: what ``allocation_epsilon`` would do without importance sampling). For schedules of growing
size (rounds x batches, Multi-RoundSecAgg's uniform selection), at the accountant's epsilon for
delta 1e-5: each estimator's relative standard error at the same number of draws, its seconds,
and the draws plain sampling would need for the importance sampler's error (the error falls as
``1 / sqrt(draws)``). Prints a Markdown table with the ratios.

Usage: python benchmarks/allocation.py [--draws 200000]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from fedprivacy.dp import allocation
from fedprivacy.dp.allocation import AllocationSchedule, allocation_epsilon

DELTA = 1e-5


def _schedule(rounds: int, batches: int, per_round: int, seed: int = 0) -> AllocationSchedule:
    rng = np.random.default_rng(seed)
    runs = np.zeros((rounds, batches), dtype=bool)
    for t in range(rounds):
        runs[t, rng.choice(batches, per_round, replace=False)] = True
    return AllocationSchedule(runs, np.full(rounds, 1.05))


def _relative_error(
    schedule: AllocationSchedule, eps: float, draws: int, levels: int
) -> tuple[float, float]:
    """The remove direction's relative standard error at ``eps``, and seconds (levels 1 or 4)."""
    saved = allocation._LEVELS
    allocation._LEVELS = levels  # 1: every draw from the mixture itself (no tilt)
    try:
        started = time.perf_counter()
        loss, weight = allocation._draws(schedule, draws, 1.0, np.random.default_rng(1))
        d, s = allocation._delta_at(eps, loss, weight, 1.0)
        return (s / d if d > 0 else float("inf")), time.perf_counter() - started
    finally:
        allocation._LEVELS = saved


def main() -> None:
    """Run every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200_000)
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; draws {args.draws:,}")
    print(
        "| rounds x batches (a round) | epsilon | IS error | plain error | IS s | plain s "
        "| plain draws for IS's error | ratio |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for rounds, batches, per_round in ((10, 10, 2), (30, 20, 4), (60, 30, 6), (120, 60, 12)):
        schedule = _schedule(rounds, batches, per_round)
        eps = allocation_epsilon(schedule, DELTA, samples=args.draws, seed=0).point
        tilted, t_is = _relative_error(schedule, eps, args.draws, 4)
        plain, t_plain = _relative_error(schedule, eps, args.draws, 1)
        needed = args.draws * (plain / tilted) ** 2
        print(
            f"| {rounds} x {batches} ({per_round}) | {eps:.3g} | {tilted:.2%} | {plain:.2%} | "
            f"{t_is:.2f} | {t_plain:.2f} | {needed:,.0f} | {needed / args.draws:.0f}x |"
        )


if __name__ == "__main__":
    main()
