"""Scale of ``fedprivacy audit``: wall time and peak memory against users and rounds.

Random logs (every user aggregated in a round with probability q, q = 0.1 % .. 1 %) and
batch-structured ones (batches of 10 users, as Multi-RoundSecAgg aggregates). Each size is
audited with :func:`fedprivacy.participation.audit.audit_ledger` (exposed users and T_strong
exact, T_weak certified). Baseline, named ``old``: the per-user exact rank of
:func:`fedprivacy.participation.metrics.exposed_users` (what the audit ran before), on the sizes
where it finishes (at most ``--baseline-limit`` users and 500,000 cells); there its answer is
the independent check of the exposed users and the ratio is printed.

``--fixed-batches``: the logs Multi-RoundSecAgg produces, 800 fixed batches of 2, 3 or 5 users,
8 whole batches a round, 800 rounds (and the same log with one column per batch), where the
audit must report T_weak exactly (the batch size; 1 when batches are single columns).

Usage: python benchmarks/audit.py [--quick | --fixed-batches] [--time-limit S]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

import numpy as np

from fedprivacy.participation.audit import audit_ledger
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.metrics import exposed_users, t_strong


def random_log(users: int, rounds: int, q: float, seed: int) -> ParticipationLedger:
    """Each user aggregated in each round with probability ``q``."""
    rng = np.random.default_rng(seed)
    ledger = ParticipationLedger(users)
    k = max(1, round(q * users))
    for _ in range(rounds):
        ledger.record(rng.choice(users, size=rng.binomial(users, q) or k, replace=False))
    return ledger


def batch_log(users: int, rounds: int, q: float, seed: int, batch: int = 10) -> ParticipationLedger:
    """Rounds aggregate whole batches of ``batch`` consecutive users (a few batches drop out)."""
    rng = np.random.default_rng(seed)
    ledger = ParticipationLedger(users)
    batches = users // batch
    per_round = max(1, round(q * batches))
    for _ in range(rounds):
        chosen = rng.choice(batches, size=per_round, replace=False)
        members = (chosen[:, None] * batch + np.arange(batch)[None, :]).ravel()
        if rng.random() < 0.05 and members.size > 1:  # one dropout breaks the batch
            members = members[1:]
        ledger.record(members)
    return ledger


def fixed_batch_log(batch: int, seed: int = 0) -> ParticipationLedger:
    """800 fixed batches of ``batch`` users, 8 whole batches a round, 800 rounds, no dropout."""
    rng = np.random.default_rng(seed)
    ledger = ParticipationLedger(800 * batch)
    for _ in range(800):
        chosen = rng.choice(800, size=8, replace=False)
        ledger.record((chosen[:, None] * batch + np.arange(batch)[None, :]).ravel())
    return ledger


def fixed_batches(time_limit: float) -> None:
    """Audit the fixed-batch logs; T_weak must be exact."""
    print("# batch  users  rounds     time   path    T_strong  T_weak  exposed")
    for batch in (1, 2, 3, 5):
        ledger = fixed_batch_log(batch)
        t0 = time.perf_counter()
        res = audit_ledger(ledger, time_limit=time_limit)
        tw, path = res.t_weak, "bounds" if res.fast_t_weak else "search"
        print(
            f"{batch:7d} {ledger.num_users:6d} {ledger.rounds:7d} {time.perf_counter() - t0:7.2f}s "
            f"{path:>7s} {res.exposure.t_strong:9d}  [{tw.lower},{tw.upper}]  "
            f"{res.exposure.exposed.size}",
            flush=True,
        )


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far (ru_maxrss, KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(
    kind: str, users: int, rounds: int, q: float, time_limit: float, baseline_limit: int
) -> None:
    make = random_log if kind == "random" else batch_log
    ledger = make(users, rounds, q, seed=users + rounds)
    t0 = time.perf_counter()
    res = audit_ledger(ledger, time_limit=time_limit)
    seconds = time.perf_counter() - t0
    tw = res.t_weak
    line = (
        f"{kind:7s} {users:>7d} {rounds:>6d} {q * 100:5.2f}% {seconds:8.2f}s "
        f"{peak_rss_mib():8.0f}MiB  exposed={res.exposure.exposed.size:<5d} "
        f"T_strong={res.exposure.t_strong} T_weak=[{tw.lower},{tw.upper}] "
        f"block={res.exposure.largest_block}"
    )
    if users <= baseline_limit and users * rounds <= 500_000:
        p = ledger.matrix()
        t1 = time.perf_counter()
        ref = exposed_users(p)
        old = time.perf_counter() - t1
        agree = (
            ref.tolist() == res.exposure.exposed.tolist() and t_strong(p) == res.exposure.t_strong
        )
        check = "ok" if agree else "MISMATCH"
        line += f"  old={old:.2f}s ratio={old / max(seconds, 1e-9):.1f}x check={check}"
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (about a minute)")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--baseline-limit", type=int, default=1000, help="max users for old")
    parser.add_argument("--fixed-batches", action="store_true", help="the fixed-batch logs only")
    args = parser.parse_args()
    if args.fixed_batches:
        fixed_batches(args.time_limit)
        return
    if args.quick:
        args.baseline_limit = min(args.baseline_limit, 500)
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    print("# kind      users rounds      q     time     peak")
    if args.quick:
        cases = [
            ("random", 200, 100, 0.02),
            ("random", 1000, 500, 0.005),
            ("batch", 1000, 500, 0.01),
            ("random", 2000, 1000, 0.005),
        ]
    else:
        cases = [
            ("random", 400, 200, 0.01),
            ("random", 1000, 500, 0.005),
            ("batch", 1000, 1000, 0.01),
            ("random", 1000, 10000, 0.005),
            ("random", 5000, 2500, 0.002),
            ("batch", 10000, 5000, 0.01),
            ("random", 10000, 5000, 0.001),
            ("random", 10000, 5000, 0.002),
            ("random", 100000, 10000, 0.001),
            ("batch", 100000, 10000, 0.001),
        ]
    for kind, users, rounds, q in cases:
        try:
            run_case(kind, users, rounds, q, args.time_limit, args.baseline_limit)
        except Exception as exc:  # a case that cannot be certified is reported, not fatal
            print(f"{kind:7s} {users:>7d} {rounds:>6d} {q * 100:5.2f}%  FAILED: {exc}", flush=True)


if __name__ == "__main__":
    main()
