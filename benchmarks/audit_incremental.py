"""Per-round cost of the incremental audit, against re-running the batch audit each round.

:class:`fedprivacy.participation.incremental.IncrementalAudit` takes one round at a time. Logs:
``random`` (100 users drawn uniformly a round) and ``batches`` (10 whole batches of 10 fixed
users a round, Multi-RoundSecAgg's shape), at N = 1,000 / 10,000 / 100,000 users. For every
window of rounds the mean seconds a round is printed with the rank, the number of classes and the
memory the echelon basis holds. Baseline, named ``batch``: what a run would do without it,
:func:`fedprivacy.participation.audit.audit_ledger` on the whole log so far (timed after the
window's last round, its bounds only: ``SEARCH_CELLS = 0``); the ratio is batch / incremental,
and the two must agree on the exposed users and ``T_strong`` (checked).

Usage: python benchmarks/audit_incremental.py [--quick] [--rounds R] [--window W]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from fedprivacy.participation import audit as audit_module
from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.incremental import IncrementalAudit
from fedprivacy.participation.ledger import ParticipationLedger


def round_users(kind: str, users: int, rng: np.random.Generator) -> np.ndarray:
    """One round of ``kind``: 100 users, uniformly or as 10 whole batches of 10."""
    if kind == "random":
        return rng.choice(users, size=100, replace=False)
    batches = rng.choice(users // 10, size=10, replace=False)
    return (batches[:, None] * 10 + np.arange(10)[None, :]).ravel()


def batch_seconds(ledger: ParticipationLedger, audit: IncrementalAudit) -> float:
    """Seconds of the batch audit's bounds on the whole log; checks it agrees with ``audit``."""
    audit_module.SEARCH_CELLS = 0
    started = time.perf_counter()
    batch = audit_ledger(ledger, time_limit=600)
    seconds = time.perf_counter() - started
    view = audit.view()
    assert view.exposed == tuple(batch.exposure.exposed.tolist()), "exposed users differ"
    assert view.t_strong == batch.exposure.t_strong, "T_strong differs"
    return seconds


def run(kind: str, users: int, rounds: int, window: int) -> None:
    rng = np.random.default_rng(users)
    ledger = ParticipationLedger(users)
    audit = IncrementalAudit(users)
    for start in range(0, rounds, window):
        started = time.perf_counter()
        for _ in range(window):
            chosen = round_users(kind, users, rng)
            ledger.record(chosen)
            view = audit.add_round(chosen)
        per_round = (time.perf_counter() - started) / window
        batch = batch_seconds(ledger, audit)
        basis_mb = audit.rank * view.classes * 8 / 2**20
        print(
            f"{kind:8s} N={users:>7,} rounds {start + 1:>5}-{start + window:<5} "
            f"rank {view.rank:>5} classes {view.classes:>7,} basis {basis_mb:8.1f} MB  "
            f"incremental {per_round * 1e3:9.2f} ms/round  batch {batch * 1e3:9.1f} ms  "
            f"ratio {batch / per_round:7.1f}x  T_weak {view.t_weak} exposed {len(view.exposed)}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1,000 and 10,000, 200 rounds")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--window", type=int, default=250)
    args = parser.parse_args()
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    sizes = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    rounds = 200 if args.quick else args.rounds
    window = min(args.window, rounds)
    for kind in ("random", "batches"):
        for users in sizes:
            run(kind, users, rounds, window)


if __name__ == "__main__":
    main()
