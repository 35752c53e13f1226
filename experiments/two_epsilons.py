"""The two epsilons of a compose-digits run over rounds: against the server and the observers.

Usage: python experiments/two_epsilons.py RUN_DIR [--every 5] [--out docs/results/numbers]

``RUN_DIR`` is a Multi-RoundSecAgg run of ``fedprivacy reproduce compose-digits`` (for instance
``results/compose-digits/multiround-t2-seed0``). After every ``--every`` rounds, from the run's
ledger (``participation.csv``) and each round's released noise (``metrics.csv``): the largest
per-user epsilon against the server (the rounds each user was aggregated in, by RDP as the report
accounts distributed DP) and the epsilon against whoever sees only the models (random allocation
over the batch schedule, ``fedprivacy.dp.allocation``; batches of T consecutive users, as the
in-process run groups them); the users' columns only (``summary.json``'s ``users``: canaries
come after them).
Writes ``two_epsilons.png`` and ``two_epsilons.csv`` into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from fedprivacy.dp.allocation import AllocationSchedule, allocation_epsilon
from fedprivacy.dp.per_user import per_user_epsilons_by_round

DELTA = 1e-5


def curves(run_dir: Path, every: int, batch_size: int) -> list[tuple[int, float, float]]:
    """``(rounds, server epsilon, observers' epsilon)`` after every ``every`` rounds."""
    p = np.loadtxt(run_dir / "participation.csv", delimiter=",", skiprows=1, ndmin=2).astype(bool)
    users = json.loads((run_dir / "summary.json").read_text())["users"]
    p = p[:, :users]  # the canaries' columns (after the users') are no user's
    with (run_dir / "metrics.csv").open() as fh:
        noise = np.array([float(r["noise_multiplier"] or "nan") for r in csv.DictReader(fh)])
    batches = np.arange(p.shape[1]).reshape(-1, batch_size)
    rows = []
    for r in range(every, p.shape[0] + 1, every):
        server = float(per_user_epsilons_by_round(p[:r], noise[:r], DELTA, "rdp").max())
        released = np.isfinite(noise[:r]) & p[:r].any(axis=1)
        runs = p[:r][released][:, batches].any(axis=2)
        schedule = AllocationSchedule(runs, noise[:r][released])
        observers = allocation_epsilon(schedule, DELTA, samples=200_000, seed=0).epsilon
        rows.append((r, server, observers))
        print(f"round {r}: server {server:.3g}, observers {observers:.3g}", file=sys.stderr)
    return rows


def main() -> None:
    """Compute the curves, write the CSV and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("docs/results/numbers"))
    args = parser.parse_args()
    rows = curves(args.run_dir, args.every, args.batch_size)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "two_epsilons.csv").open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["rounds", "epsilon_server", "epsilon_models_observers"])
        w.writerows((r, f"{s:.4g}", f"{o:.4g}") for r, s, o in rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    x = [r for r, _, _ in rows]
    ax.plot(x, [s for _, s, _ in rows], "o-", label="against the server")
    ax.plot(x, [o for _, _, o in rows], "s-", label="against whoever sees only the models")
    ax.set_xlabel("rounds")
    ax.set_ylabel(f"largest per-user epsilon (delta {DELTA:g})")
    ax.set_title("compose-digits, Multi-RoundSecAgg T = 2", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "two_epsilons.png", dpi=120)
    print(args.out / "two_epsilons.png")


if __name__ == "__main__":
    main()
