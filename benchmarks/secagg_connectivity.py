"""Rounds lost to the connectivity invariant: plain against batch-aware SecAgg+ graph.

Runs :func:`fedprivacy.fl.secure_selection.run_secure_selection` (the real protocol, every message
through its bytes) with the Multi-RoundSecAgg selector (``N = 2K``, uniform mode, no availability
dropout), the ``atomic`` batch policy and protocol dropout ``p`` (each selected user drops before
a uniformly random stage), once on the plain random Harary ring and once on the batch-aware ring
(``SecAggParameters.ring_block = T``), with the same selection and dropout draws per seed (the
graph seed itself is the OS-random session id). For each setting and degree rule it prints, side
by side and summed over the seeds, the rounds aborted for connectivity, the rounds shrunk for
connectivity (completed with fewer users), all aborted rounds, and the mean number of users
aggregated per round (aborted rounds count 0). The degree rules: ``default`` is
``default_degree(K)`` (``2 ceil(log2 K)``), ``batch`` is ``batch_degree(K, T)``
(``max(default, 2T + 2)``, capped at ``K - 1``; printed only where it differs). The per-user
degree is the number of pairwise masks and Shamir share pairs each user handles.

Usage: python benchmarks/secagg_connectivity.py [--quick] [--seeds S] [--rounds R]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedprivacy.fl.secure_selection import SecureSelectionConfig, run_secure_selection
from fedprivacy.participation.availability import BernoulliDropout
from fedprivacy.participation.selectors import BatchPartitionSelector
from fedprivacy.secagg.params import batch_degree, default_degree

DEGREE_RULES: dict[str, Callable[[int, int], int]] = {
    "default": lambda k, t: default_degree(k),
    "batch": batch_degree,
}


@dataclass(frozen=True)
class Counts:
    """Totals over the seeds of one (setting, degree, graph) cell."""

    rounds: int
    aborted_conn: int
    shrunk_conn: int
    aborted: int
    users: float  # mean users aggregated per round


def run_cell(
    k: int, t: int, degree: int, dropout: float, rounds: int, seeds: int, batch_ring: bool
) -> Counts:
    """Sum the connectivity counts of ``seeds`` runs of ``rounds`` rounds."""
    config = SecureSelectionConfig(
        dimension=1,
        protocol_dropout=dropout,
        batch_policy="atomic",
        users_per_batch=t,
        secagg_degree=degree,
        batch_ring=batch_ring,
    )
    totals = np.zeros(4)
    for seed in range(seeds):
        selector = BatchPartitionSelector(2 * k, k, t)
        _, report = run_secure_selection(
            selector, BernoulliDropout(2 * k, 0.0), rounds, np.random.default_rng(seed), config
        )
        summary = report.summary()
        totals += [
            float(summary["rounds_aborted_for_connectivity"]),  # type: ignore[arg-type]
            float(summary["rounds_shrunk_for_connectivity"]),  # type: ignore[arg-type]
            float(summary["rounds_aborted"]),  # type: ignore[arg-type]
            float(sum(r.aggregated for r in report.records)),
        ]
    n = rounds * seeds
    return Counts(n, int(totals[0]), int(totals[1]), int(totals[2]), totals[3] / n)


def main() -> None:
    """Print the before/after table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="K = 24 only, 3 seeds x 30 rounds")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--dropout", type=float, default=0.3)
    args = parser.parse_args()
    settings = [(24, 4), (24, 6), (120, 6)]
    seeds, rounds = args.seeds, args.rounds
    if args.quick:
        settings, seeds, rounds = [(24, 4)], 3, 30
    print(f"atomic policy, protocol dropout {args.dropout:.0%}, {seeds} seeds x {rounds} rounds")
    print(
        f"{'K':>4} {'T':>3} {'rule':>8} {'deg':>4} | {'conn-abort':>10} {'shrunk':>9} "
        f"{'aborted':>9} {'users/rnd':>11} | plain -> batch-aware"
    )
    for k, t in settings:
        degrees = {rule: choose(k, t) for rule, choose in DEGREE_RULES.items()}
        for rule, degree in degrees.items():
            if rule != "default" and degree == degrees["default"]:
                continue  # same graphs as the default rule
            started = time.perf_counter()
            cells = [
                run_cell(k, t, degree, args.dropout, rounds, seeds, ring) for ring in (False, True)
            ]
            before, after = cells
            print(
                f"{k:>4} {t:>3} {rule:>8} {degree:>4} | "
                f"{before.aborted_conn:>4} -> {after.aborted_conn:<3} "
                f"{before.shrunk_conn:>3} -> {after.shrunk_conn:<3} "
                f"{before.aborted:>3} -> {after.aborted:<3} "
                f"{before.users:>4.1f} -> {after.users:<4.1f} | "
                f"of {before.rounds} rounds ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
