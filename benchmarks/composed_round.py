"""What one training round costs as selection, secure aggregation and DP are composed.

Runs ``fedprivacy train``'s round (``FederatedTraining.step``: availability, selection, local
training, mechanism, aggregation, ledger, update) on the bundled digits (MLP, 9,610 parameters)
with ``N`` users and ``K`` per round, in five configurations of the same run:

* ``plaintext`` (the baseline): random selection, fixed-point sum in the clear, no DP;
* ``secagg``: the real SecAgg protocol;
* ``secagg + central``: plus the server's Gaussian noise;
* ``secagg + distributed``: the parties' discrete Gaussian inside SecAgg instead;
* ``MR T=2 + secagg + distributed``: Multi-RoundSecAgg batches of two as well (the composed run).

It prints the mean seconds per round (after one warm-up round), the training and aggregation
parts, and each configuration's ratio to the baseline and to ``secagg``: the price of each layer.
These are also the numbers a unified round loop has to match.

Usage: python benchmarks/composed_round.py [--users N] [--per-round K] [--rounds R]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from fedprivacy.fl.training_config import TrainConfig, build_training

CONFIGS: dict[str, dict[str, object]] = {
    "plaintext": {},
    "secagg": {"secagg": True},
    "secagg + central": {"secagg": True, "dp": "central", "noise_multiplier": 1.0},
    "secagg + distributed": {"secagg": True, "dp": "distributed", "noise_multiplier": 1.0},
    "MR T=2 + secagg + distributed": {
        "scheme": "multiround",
        "target_privacy": 2,
        "secagg": True,
        "dp": "distributed",
        "noise_multiplier": 1.0,
    },
}


def measure(users: int, per_round: int, rounds: int, options: dict[str, object]) -> list[float]:
    """Mean seconds per round: total, training, aggregation (after one warm-up round)."""
    config = TrainConfig(
        users=users,
        per_round=per_round,
        rounds=rounds + 1,
        dropout=0.0,
        metrics="none",
        eval_every=10_000,
        **options,  # type: ignore[arg-type]
    )
    training = build_training(config)
    training.step()  # warm-up: first vectorised call, codec, protocol keys
    total, train, aggregate = [], [], []
    for _ in range(rounds):
        start = time.perf_counter()
        record = training.step()
        total.append(time.perf_counter() - start)
        train.append(record.get("train_seconds"))
        aggregate.append(record.get("aggregate_seconds"))
    return [float(np.mean(total)), float(np.mean(train)), float(np.mean(aggregate))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=60)
    parser.add_argument("--per-round", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    print(
        f"# composed round, digits MLP, N = {args.users}, K = {args.per_round}, "
        f"{args.rounds} rounds, {platform.machine()}, {time.strftime('%Y-%m-%d')}\n"
    )
    print("| configuration | s / round | training | aggregation | vs plaintext | vs secagg |")
    print("|---|---|---|---|---|---|")
    results = {
        name: measure(args.users, args.per_round, args.rounds, options)
        for name, options in CONFIGS.items()
    }
    base, secure = results["plaintext"][0], results["secagg"][0]
    for name, (total, train, aggregate) in results.items():
        print(
            f"| {name} | {total:.3f} | {train:.3f} | {aggregate:.3f} | {total / base:.2f}x | "
            f"{total / secure:.2f}x |"
        )


if __name__ == "__main__":
    main()
