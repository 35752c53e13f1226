"""Seconds per whole FedAvg round of the engine, per trainer and encoding, on a CPU or a GPU.

Unlike ``benchmarks/training.py`` (local training alone), this times
:meth:`fedprivacy.fl.engine.FederatedTraining.step` end to end: selection, local training, the
transfer of the updates to the CPU, aggregation (fixed-point encoding or float) and, every
``eval_every`` rounds, evaluation on the test set. Setting: Table 4 of Multi-RoundSecAgg (MNIST CNN,
1,663,370 parameters, N = 120 IID users, K = 12, E = 1, batch 100, lr 0.1, random selection,
heterogeneous dropout, evaluation every 5 rounds).

Variants (``trainer/encoding``); the baseline is ``loop/fixed-point``, the engine's CPU default:

* ``loop/fixed-point``: per-client model copy and optimizer; fixed-point encoding as SecAgg sums.
* ``vectorised/fixed-point``: all clients per ``vmap`` call; the same encoding.
* ``vectorised/float``: all clients per ``vmap`` call; exact float64 weighted mean.

Each variant: one warm-up round, then ``--rounds`` timed rounds (CUDA synchronised). With
``--processes P`` the last variant is also run in P concurrent processes (how Table 4 is run on a
GPU) and the aggregate throughput in rounds per second is reported.

Usage: python benchmarks/training_rounds.py --data-dir DIR [--device cuda] [--rounds 20]
       [--processes 12]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time

import torch

from fedprivacy.data.images import load_dataset
from fedprivacy.fl.training_config import TrainConfig, build_training

VARIANTS = ("loop/fixed-point", "vectorised/fixed-point", "vectorised/float")
BASELINE = VARIANTS[0]


def config_for(variant: str, device: str, data_dir: str | None, seed: int = 0) -> TrainConfig:
    """The Table 4 IID configuration with this variant's trainer and encoding."""
    trainer, encoding = variant.split("/")
    return TrainConfig(
        dataset="mnist",
        model="mnist-cnn",
        partition="iid",
        scheme="random",
        users=120,
        per_round=12,
        rounds=1000,
        seed=seed,
        local_epochs=1,
        batch_size=100,
        local_lr=0.1,
        eval_every=5,
        trainer=trainer,
        encoding=encoding,
        device=device,
        metrics="none",
        data_dir=data_dir,
    ).validate()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_variant(variant: str, device: str, rounds: int, data_dir: str | None, seed: int) -> dict:
    """Seconds per round (mean, sd) and the parts of the last rounds."""
    config = config_for(variant, device, data_dir, seed)
    training = build_training(config, load_dataset("mnist", data_dir))
    training.step()  # warm-up
    times = []
    for _ in range(rounds):
        _sync(device)
        started = time.perf_counter()
        training.step()
        _sync(device)
        times.append(time.perf_counter() - started)
    recs = training.records[1:]
    return {
        "variant": variant,
        "mean": statistics.fmean(times),
        "sd": statistics.stdev(times) if len(times) > 1 else 0.0,
        "train": statistics.fmean(r.get("train_seconds") for r in recs),
        "aggregate": statistics.fmean(r.get("aggregate_seconds") for r in recs),
        "device": training.device_name,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--processes", type=int, default=0)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = time_variant(args.worker, args.device, args.rounds, args.data_dir, args.seed)
        print(json.dumps(result))
        return
    variants = [v for v in args.variants.split(",") if v]
    print(
        f"# {datetime.date.today()} {platform.machine()} {platform.processor()}, "
        f"torch {torch.__version__}, device {args.device}, {args.rounds} timed rounds"
    )
    results = {v: time_variant(v, args.device, args.rounds, args.data_dir, 0) for v in variants}
    base = results.get(BASELINE)
    print("| variant | s/round | train s | aggregate s | baseline / variant |")
    print("|---|---|---|---|---|")
    for v, r in results.items():
        ratio = f"{base['mean'] / r['mean']:.2f}x" if base else "-"
        print(
            f"| {v} | {r['mean']:.3f} +- {r['sd']:.3f} | {r['train']:.3f} | "
            f"{r['aggregate']:.3f} | {ratio} |"
        )
    print(f"device: {next(iter(results.values()))['device']}")
    if args.processes:
        v = variants[-1]
        cmd = [sys.executable, __file__, "--worker", v, "--device", args.device]
        cmd += ["--rounds", str(args.rounds)]
        if args.data_dir:
            cmd += ["--data-dir", args.data_dir]
        started = time.perf_counter()
        procs = [
            subprocess.Popen([*cmd, "--seed", str(i)], stdout=subprocess.PIPE, text=True)
            for i in range(args.processes)
        ]
        outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
        wall = time.perf_counter() - started
        per = statistics.fmean(o["mean"] for o in outs)
        print(
            f"{args.processes} concurrent processes of {v}: {per:.3f} s/round each, "
            f"{args.processes / per:.1f} rounds/s together "
            f"(single process {1 / results[v]['mean']:.1f} rounds/s); wall {wall:.0f} s incl. setup"
        )


if __name__ == "__main__":
    main()
