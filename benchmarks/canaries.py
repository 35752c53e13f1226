"""What canaries cost: the same run with and without them, in `train`, `uldp` and the drop-in.

Baseline: the same configuration without canaries, run in the same process. For growing runs
(rounds), each kind's median wall time over ``--repeats`` runs, with and without canaries
(interleaved, after one untimed run of each), and the ratio; the users' largest epsilon of both
(the canaries change none). Prints a Markdown table.

* ``train``: digits, compose-digits' setting (60 users, 12 a round in batches of 2, SecAgg,
  distributed DP at 0.8), 20 canaries (4 a round);
* ``uldp``: ULDP-AVG-s on Heart Disease (100 users, q = 0.1), 50 canaries (needs
  ``$FEDPRIVACY_DATA``);
* ``run_private_fedavg``: a 2-layer MLP over 12 users, 4 a round in batches of 2, distributed
  DP, 6 canaries (2 a round) as nodes of the same ClientApp.

Usage: python benchmarks/canaries.py [--repeats 3] [--rounds 10,40]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch
from torch.utils.data import TensorDataset

from fedprivacy.experiments.training_run import run_training
from fedprivacy.fl.training_config import TrainConfig
from fedprivacy.flower import PrivateFedAvgConfig, run_private_fedavg
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.run import run_uldp

#: A run of ``rounds`` rounds with ``canaries`` canaries -> the users' largest epsilon.
Run = Callable[[int, int], float]


def _train(rounds: int, canaries: int) -> float:
    config = TrainConfig(
        dataset="digits",
        users=60,
        per_round=12,
        rounds=rounds,
        scheme="multiround",
        target_privacy=2,
        secagg=True,
        dp="distributed",
        noise_multiplier=0.8,
        clip=1.0,
        eval_every=rounds,
        metrics="none",
        canaries=canaries,
    )
    return float(run_training(config, None).report.epsilon or 0.0)


def _uldp(rounds: int, canaries: int) -> float:
    config = UldpConfig(
        dataset="heart_disease", method="ULDP-AVG-s", users=100, rounds=rounds, canaries=canaries
    )
    return float(run_uldp(config).privacy_report().epsilon or 0.0)


def _dropin(rounds: int, canaries: int) -> float:
    g = torch.Generator().manual_seed(0)
    users = [
        TensorDataset(torch.randn(40, 20, generator=g), torch.randint(0, 4, (40,), generator=g))
        for _ in range(12)
    ]
    model = torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    config = PrivateFedAvgConfig(
        users=12,
        per_round=4,
        rounds=rounds,
        scheme="multiround",
        target_privacy=2,
        dp="distributed",
        noise_multiplier=1.0,
        clip=1.0,
        canaries=canaries,
    )
    return float(run_private_fedavg(model, users, config).report().epsilon or 0.0)


HEADER = "| run | rounds | canaries | s without | s with | ratio | users' epsilon (without, with) |"
KINDS: dict[str, tuple[Run, int]] = {"train": (_train, 20), "uldp": (_uldp, 50)}
KINDS["run_private_fedavg"] = (_dropin, 6)


def _timed(run: Run, rounds: int, canaries: int, repeats: int) -> list[tuple[float, float]]:
    """Median seconds without and with canaries (interleaved), and the users' largest epsilon.

    One run of each first, not timed (imports, data, caches).
    """
    seconds: dict[int, list[float]] = {0: [], canaries: []}
    epsilon: dict[int, float] = {}
    for count in (0, canaries):
        run(rounds, count)
    for _ in range(repeats):
        for count in (0, canaries):
            started = time.perf_counter()
            epsilon[count] = run(rounds, count)
            seconds[count].append(time.perf_counter() - started)
    return [(statistics.median(seconds[c]), epsilon[c]) for c in (0, canaries)]


def main() -> None:
    """Time every kind at every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", default="10,40")
    parser.add_argument("--only", default=",".join(KINDS))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; 1 thread")
    print(HEADER)
    print("|---|---|---|---|---|---|---|")
    for name in args.only.split(","):
        run, canaries = KINDS[name]
        for rounds in (int(r) for r in args.rounds.split(",")):
            (base, eps), (with_, eps_with) = _timed(run, rounds, canaries, args.repeats)
            print(
                f"| {name} | {rounds} | {canaries} | {base:.2f} | {with_:.2f} | "
                f"{with_ / base:.3f} | {eps:.4g} / {eps_with:.4g} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
