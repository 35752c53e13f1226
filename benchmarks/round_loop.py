"""What the one round loop costs against the hand-written loops it replaced.

Two same-run comparisons, each against a named baseline that replays the old loop's code:

* **Selection** (``pipeline.selection.run_selection``, the loop with ``SelectionOnly``) against
  the former ``participation.simulation.run_selection`` body (availability -> selector ->
  ledger in a plain ``for``), Multi-RoundSecAgg (K = N / 10, T = 4, heterogeneous dropout),
  for growing ``N``. Both produce the same ledger (checked).
* **ULDP-FL** (``run_uldp``'s path: ``UldpAlgorithm`` in ``FederatedRun`` with Poisson
  sampling) against the former ``run_uldp`` loop (``MethodRunner.run_round`` drawing its own
  sample), ULDP-AVG-ws on Heart Disease (needs ``--data-dir``; skipped without it). Both give
  the same model bit for bit (checked).

Prints seconds and the ratio loop / baseline (1.00 = no overhead).

Usage: python benchmarks/round_loop.py [--rounds R] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch

from fedprivacy.fl.params import flatten_parameters
from fedprivacy.participation.availability import AlwaysAvailable, BernoulliDropout
from fedprivacy.participation.ledger import ParticipationLedger
from fedprivacy.participation.sampling import PoissonSampler
from fedprivacy.participation.selectors import BatchPartitionSelector
from fedprivacy.pipeline import FederatedRun
from fedprivacy.pipeline.selection import run_selection


def old_selection_loop(selector, availability, rounds, rng):  # type: ignore[no-untyped-def]
    """The body of the former ``participation.simulation.run_selection``."""
    ledger = ParticipationLedger(selector.num_users)
    frequency = ledger.frequency_view
    for r in range(rounds):
        ledger.record(selector.select(availability.sample(r, rng), frequency, rng))
    return ledger


def bench_selection(rounds: int) -> None:
    print(f"Selection, Multi-RoundSecAgg K = N/10, T = 4, {rounds} rounds (best of 3)")
    print(f"{'N':>7} {'old loop s':>11} {'FederatedRun s':>15} {'ratio':>6}")
    for n in (120, 1_200, 12_000):
        selector = BatchPartitionSelector(n, n // 10, 4)
        availability = BernoulliDropout.heterogeneous(n, np.random.default_rng(1))
        times = {"old": [], "loop": []}
        for _ in range(3):
            started = time.perf_counter()
            old = old_selection_loop(selector, availability, rounds, np.random.default_rng(0))
            times["old"].append(time.perf_counter() - started)
            started = time.perf_counter()
            new = run_selection(selector, availability, rounds, np.random.default_rng(0))
            times["loop"].append(time.perf_counter() - started)
        assert np.array_equal(old.matrix(), new.matrix())
        a, b = min(times["old"]), min(times["loop"])
        print(f"{n:>7} {a:>11.3f} {b:>15.3f} {b / a:>6.2f}")


def bench_uldp(rounds: int, data_dir: Path) -> None:
    from fedprivacy.data.tabular import load_silo_dataset
    from fedprivacy.fl.local_spec import LocalTrainingSpec
    from fedprivacy.uldp.algorithm import UldpAlgorithm
    from fedprivacy.uldp.config import UldpConfig
    from fedprivacy.uldp.federation import build_federation
    from fedprivacy.uldp.methods import MethodRunner
    from fedprivacy.uldp.rounds import RoundHyper
    from fedprivacy.uldp.run_setup import allocate

    cfg = UldpConfig(dataset="heart_disease", method="ULDP-AVG-ws", users=100).resolved()
    ds = load_silo_dataset("heart_disease", str(data_dir))
    fed = build_federation(ds, allocate(cfg, ds, np.random.default_rng(0)))
    hyper = RoundHyper(LocalTrainingSpec(10, 4, 0.05), global_lr=20.0, clip=0.1, sampling_rate=0.1)
    model = fed.task.build_model(0)
    flat0 = flatten_parameters(model)

    def old() -> torch.Tensor:
        runner = MethodRunner("ULDP-AVG-ws", fed, hyper)
        rng, nrng = np.random.default_rng(2), np.random.default_rng(3)
        flat = flat0
        for _ in range(rounds):
            flat = runner.run_round(flat, rng, nrng).flat
            runner.accounting.epsilons(runner.rounds, np.full(fed.num_users, runner.rounds))
        return flat

    def loop() -> torch.Tensor:
        runner = MethodRunner("ULDP-AVG-ws", fed, hyper)
        rng, nrng = np.random.default_rng(2), np.random.default_rng(3)
        algo = UldpAlgorithm.simulated(runner, model, flat0, rng, nrng, eval_every=10**9)
        FederatedRun(
            PoissonSampler(fed.num_users, 0.1),
            AlwaysAvailable(fed.num_users),
            algo,
            selection_rng=lambda _t: rng,
        ).run(rounds)
        return algo.flat

    times: dict[str, list[float]] = {"old": [], "loop": []}
    results = {}
    for _ in range(3):
        for name, fn in (("old", old), ("loop", loop)):
            started = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - started)
    assert torch.equal(results["old"], results["loop"])
    a, b = min(times["old"]), min(times["loop"])
    print(f"\nULDP-AVG-ws, Heart Disease, 100 users, {rounds} rounds (best of 3; final eval only)")
    print(f"{'old loop s':>11} {'FederatedRun s':>15} {'ratio':>6}")
    print(f"{a:>11.3f} {b:>15.3f} {b / a:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="selection rounds")
    parser.add_argument("--uldp-rounds", type=int, default=10)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(
        f"{platform.node()} {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, torch {torch.__version__}, "
        f"{time.strftime('%Y-%m-%d')}\n"
    )
    bench_selection(args.rounds)
    if (args.data_dir / "heart_disease").exists():
        bench_uldp(args.uldp_rounds, args.data_dir)
    else:
        print(f"\nULDP part skipped: no Heart Disease under {args.data_dir}")


if __name__ == "__main__":
    main()
