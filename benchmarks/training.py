"""Seconds per FedAvg round: the papers' per-client training loop against VectorisedTrainer.

Setting (per model): N = 120 users with an IID split of the training set, K = 12 users drawn per
round, E = 1 local epoch, plain SGD, then FedAvg (sample-size weighted mean of the K models).

* ``mnist-cnn``: MnistCNN (1,663,370 parameters) on (60000, 1, 28, 28), 500 samples per user,
  batch 100, lr 0.05. Random tensors unless ``--data-dir`` points at the MNIST IDX files.
* ``lenet``: LeNet5 on random (50000, 3, 32, 32), 416-417 samples per user, batch 50, lr 0.05.
* ``mlp``: DigitsMLP on random (12000, 1, 8, 8), 100 samples per user, batch 10, lr 0.05 (the
  regime where the arithmetic is small and per-step overhead dominates).

Methods, each run in a fresh subprocess so that its peak memory (``ru_maxrss``) is its own:

* ``baseline``: as in the papers' code: per client ``copy.deepcopy(global_model)``, a
  ``torch.optim.SGD`` and a ``DataLoader(Subset(TensorDataset), batch_size, shuffle=True)``.
* ``loop``: :func:`fedprivacy.fl.training_loops.train_groups_loop` (the same per-client loop on
  precomputed minibatch orders, without the DataLoader).
* ``vectorised``: :class:`fedprivacy.fl.local_training.VectorisedTrainer`, all clients per vmap.
* ``vectorised-c1``: the same with ``chunk_size=1`` (one client per vmap call).

One warm-up round, then ``--rounds`` timed rounds (mean +- sd). The peak RSS includes the data set
(also reported separately: RSS after setup).

Usage: python benchmarks/training.py [--rounds R] [--models mnist-cnn,lenet,mlp]
       [--methods baseline,loop,vectorised,vectorised-c1] [--data-dir DIR] [--threads T]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Subset, TensorDataset

from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.local_training import VectorisedTrainer
from fedprivacy.fl.losses import cross_entropy_loss
from fedprivacy.fl.minibatches import client_orders
from fedprivacy.fl.params import flatten_parameters, load_flat_
from fedprivacy.fl.training_loops import train_groups_loop
from fedprivacy.models.registry import build_model

METHODS = ("baseline", "loop", "vectorised", "vectorised-c1")
NUM_USERS = 120
PER_ROUND = 12


@dataclass(frozen=True)
class Setting:
    model: str
    num_samples: int
    shape: tuple[int, int, int]
    batch_size: int
    description: str


SETTINGS = {
    "mnist-cnn": Setting("mnist-cnn", 60_000, (1, 28, 28), 100, "MnistCNN, 500/user, B=100"),
    "lenet": Setting("lenet", 50_000, (3, 32, 32), 50, "LeNet5, 416-417/user, B=50"),
    "mlp": Setting("mlp", 12_000, (1, 8, 8), 10, "DigitsMLP, 100/user, B=10"),
}


def rss_now_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_data(setting: Setting, data_dir: str | None) -> tuple[torch.Tensor, torch.Tensor, str]:
    if setting.model == "mnist-cnn" and data_dir is not None:
        root = Path(data_dir) / "mnist" if (Path(data_dir) / "mnist").is_dir() else Path(data_dir)
        images = read_idx(root / "train-images-idx3-ubyte.gz")
        labels = read_idx(root / "train-labels-idx1-ubyte.gz")
        x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
        x = (x - 0.1307) / 0.3081
        return x.contiguous(), torch.from_numpy(labels.astype(np.int64)), "MNIST"
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((setting.num_samples, *setting.shape), generator=gen)
    y = torch.randint(0, 10, (setting.num_samples,), generator=gen)
    return x, y, "random"


def baseline_round(
    global_model: nn.Module,
    dataset: TensorDataset,
    users: list[np.ndarray],
    spec: LocalTrainingSpec,
    gen: torch.Generator,
) -> list[torch.Tensor]:
    """The papers' code: deepcopy, SGD and a shuffling DataLoader per client."""
    out = []
    for idx in users:
        local = copy.deepcopy(global_model)
        local.train()
        opt = torch.optim.SGD(local.parameters(), lr=spec.lr, momentum=spec.momentum)
        loader = DataLoader(
            Subset(dataset, idx.tolist()), batch_size=spec.batch_size, shuffle=True, generator=gen
        )
        for _ in range(spec.epochs):
            for xb, yb in loader:
                opt.zero_grad()
                loss = nn.functional.cross_entropy(local(xb), yb)
                loss.backward()
                opt.step()
        out.append(flatten_parameters(local))
    return out


def worker(model_name: str, method: str, rounds: int, data_dir: str | None) -> dict[str, object]:
    setting = SETTINGS[model_name]
    features, labels, source = load_data(setting, data_dir)
    rng = np.random.default_rng(0)
    users = np.array_split(rng.permutation(features.shape[0]), NUM_USERS)
    sizes = np.array([len(u) for u in users])
    spec = LocalTrainingSpec(epochs=1, batch_size=setting.batch_size, lr=0.05)
    model = build_model(model_name, setting.shape, 10, seed=0)
    global_flat = flatten_parameters(model)
    dataset = TensorDataset(features, labels)
    gen = torch.Generator().manual_seed(1)
    chunk_size = 1 if method == "vectorised-c1" else None
    trainer = VectorisedTrainer(model, cross_entropy_loss, max_rows=None, chunk_size=chunk_size)
    rss_setup = rss_now_mib()
    times = []
    for _ in range(rounds + 1):
        chosen = rng.choice(NUM_USERS, PER_ROUND, replace=False)
        client_idx = [users[k] for k in chosen]
        t0 = time.perf_counter()
        if method == "baseline":
            load_flat_(model, global_flat)
            stacked = torch.stack(baseline_round(model, dataset, client_idx, spec, gen))
        else:
            off, orders = client_orders(client_idx, spec.epochs, rng)
            data = (global_flat, features, labels, off, orders, spec)
            if method == "loop":
                stacked = global_flat + train_groups_loop(model, cross_entropy_loss, *data)
            else:
                stacked = global_flat + trainer.train(*data)
        weights = torch.from_numpy(sizes[chosen] / sizes[chosen].sum()).to(torch.float32)
        global_flat = weights @ stacked
        times.append(time.perf_counter() - t0)
    return {
        "times": times[1:],
        "warmup": times[0],
        "peak_rss_mib": peak_rss_mib(),
        "rss_setup_mib": rss_setup,
        "source": source,
        "finite": bool(torch.isfinite(global_flat).all()),
    }


def run_subprocess(
    model_name: str, method: str, rounds: int, data_dir: str | None, threads: int | None
) -> dict[str, object]:
    cmd = [sys.executable, __file__, "--worker", model_name, method, "--rounds", str(rounds)]
    if data_dir is not None:
        cmd += ["--data-dir", data_dir]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{model_name}/{method} failed:\n{proc.stderr}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (after 1 warm-up)")
    parser.add_argument("--models", default="mnist-cnn,lenet,mlp")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--data-dir", default=None, help="folder with MNIST's IDX .gz files")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--worker", nargs=2, metavar=("MODEL", "METHOD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.worker is not None:
        print(json.dumps(worker(args.worker[0], args.worker[1], args.rounds, args.data_dir)))
        return

    models = [m for m in args.models.split(",") if m]
    methods = [m for m in args.methods.split(",") if m]
    for name in models:
        if name not in SETTINGS:
            parser.error(f"unknown model {name!r}")
    for name in methods:
        if name not in METHODS:
            parser.error(f"unknown method {name!r}")
    print(f"date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(
        f"machine: {platform.platform()}, {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs; python {platform.python_version()}, torch {torch.__version__}, "
        f"torch threads {args.threads or torch.get_num_threads()}, "
        f"mkldnn {torch.backends.mkldnn.is_available()}"
    )
    print(
        f"setting: N={NUM_USERS} users, K={PER_ROUND} per round, E=1, lr 0.05, "
        f"1 warm-up + {args.rounds} timed rounds per method, each method in a fresh process"
    )
    print()
    header = (
        "| model | data | method | s/round (mean ± sd) | baseline / method "
        "| peak RSS MiB | RSS after setup MiB |"
    )
    print(header)
    print("|" + "---|" * 7)
    for name in models:
        results = {
            m: run_subprocess(name, m, args.rounds, args.data_dir, args.threads) for m in methods
        }
        base = results.get("baseline")
        base_mean = statistics.mean(base["times"]) if base else None  # type: ignore[arg-type]
        for method, res in results.items():
            times: list[float] = res["times"]  # type: ignore[assignment]
            mean = statistics.mean(times)
            sd = statistics.stdev(times) if len(times) > 1 else 0.0
            ratio = f"{base_mean / mean:.2f}x" if base_mean else "-"
            print(
                f"| {SETTINGS[name].description} | {res['source']} | {method} "
                f"| {mean:.3f} ± {sd:.3f} | {ratio} | {res['peak_rss_mib']:.0f} "
                f"| {res['rss_setup_mib']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
