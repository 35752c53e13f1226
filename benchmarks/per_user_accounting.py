"""Per-user accounting of a whole ledger: the closed-form PLD and RDP against dp-accounting's PLD.

Each user composes the rounds it was aggregated in, each with that round's noise multiplier
(distributed DP: it depends on how many parties were really aggregated, so it varies by round;
here uniform in [1, 3]). Ledgers of ``users x rounds`` with 10 % of the users a round.

Arms, all on the same ledger and noise:

* ``pld``: :func:`fedprivacy.dp.per_user.per_user_epsilons_by_round` with ``"pld"`` (one matrix
  product for ``sum z_t^-2``, then the closed-form privacy profile, vectorised over users);
* ``rdp``: the same with ``"rdp"`` (dp-accounting's RDP once per distinct user total);
* baseline ``dp-accounting``: dp-accounting's ``PLDAccountant`` per user on the user's rounds
  merged into one Gaussian (``z = (sum z_t^-2)^(-1/2)``; what fedprivacy's ``"pld"`` did before
  the closed form). It is timed on ``--sample`` users and scaled to all of them (its cost is per
  distinct user); the ratio is baseline / ``pld``. Both must agree within 1 % with
  dp-accounting composing one ``GaussianDpEvent`` per round on 3 users (checked; the largest
  relative difference is printed). That event-by-event composition costs 2-30 s a user here.

Usage: python benchmarks/per_user_accounting.py [--quick] [--sample S]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import dp_accounting
import numpy as np
from dp_accounting.pld import PLDAccountant

from fedprivacy.dp.per_user import per_user_epsilons_by_round

DELTA = 1e-5


def ledger(users: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """``rounds x users`` booleans: 10 % of the users, uniformly, each round."""
    m = np.zeros((rounds, users), dtype=bool)
    k = max(1, users // 10)
    for r in range(rounds):
        m[r, rng.choice(users, size=k, replace=False)] = True
    return m


def dp_accounting_user(noises: np.ndarray) -> float:
    """One user's epsilon by dp-accounting's PLD, one event per round."""
    acc = PLDAccountant(value_discretization_interval=1e-4)
    for z in noises:
        acc.compose(dp_accounting.GaussianDpEvent(float(z)))
    return float(acc.get_epsilon(DELTA))


def dp_accounting_merged(noises: np.ndarray) -> float:
    """One user's epsilon by dp-accounting's PLD of its rounds merged into one Gaussian."""
    acc = PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.GaussianDpEvent(float(np.sum(noises**-2.0) ** -0.5)))
    return float(acc.get_epsilon(DELTA))


def measure(users: int, rounds: int, sample: int, rng: np.random.Generator) -> None:
    """One row: the three arms' seconds, the ratio and the agreement."""
    m = ledger(users, rounds, rng)
    noise = rng.uniform(1.0, 3.0, rounds)
    t0 = time.perf_counter()
    pld = per_user_epsilons_by_round(m, noise, DELTA, "pld")
    t_pld = time.perf_counter() - t0
    t0 = time.perf_counter()
    rdp = per_user_epsilons_by_round(m, noise, DELTA, "rdp")
    t_rdp = time.perf_counter() - t0
    picked = rng.choice(users, size=min(sample, users), replace=False)
    t0 = time.perf_counter()
    base = np.array([dp_accounting_merged(noise[m[:, u]]) for u in picked])
    t_base = (time.perf_counter() - t0) * users / picked.size
    exact = np.array([dp_accounting_user(noise[m[:, u]]) for u in picked[:3]])
    gap = float(
        np.max(np.abs(np.r_[pld[picked[:3]], base[:3]] - np.r_[exact, exact]) / np.r_[exact, exact])
    )
    assert gap < 0.01 and np.all(pld <= rdp + 1e-12), (gap, "PLD above RDP?")
    print(
        f"| {users:,} | {rounds:,} | {t_pld:.3f} | {t_rdp:.2f} | {t_base:.1f} "
        f"| {t_base / t_pld:,.0f}x | {gap:.1e} | {np.median(rdp / np.maximum(pld, 1e-300)):.3f} |",
        flush=True,
    )


def main() -> None:
    """Print the table for the sizes asked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the small sizes")
    parser.add_argument("--sample", type=int, default=40, help="users timed for the baseline")
    args = parser.parse_args()
    print(f"# {platform.machine()} {platform.processor()}, {os.cpu_count()} cores, {time.ctime()}")
    print(
        "| users | rounds | pld s | rdp s | dp-accounting s (scaled) | ratio | max rel. gap "
        "| median RDP / PLD |"
    )
    print("|---|---|---|---|---|---|---|---|")
    sizes = (
        [(1_000, 100), (1_000, 1_000)]
        if args.quick
        else [(1_000, 100), (1_000, 1_000), (10_000, 100), (10_000, 1_000)]
    )
    rng = np.random.default_rng(0)
    for users, rounds in sizes:
        measure(users, rounds, args.sample, rng)


if __name__ == "__main__":
    main()
