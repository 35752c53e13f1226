"""Seconds per ULDP-AVG round on MNIST: the whole round batched, against per-silo and per-user.

Setting (the paper's MNIST runs with many users, Section 5.1 / Figs. 5d-f and 9b): the 60,000
MNIST training records allocated to ``--users`` users (default 10,000) over ``--silos`` silos
(default 5) with ``--distribution`` (default ``zipf``: user alpha 0.5, silo alpha 2.0, as in
Fig. 9b; ``uniform`` is Fig. 5d), the paper's CNN (21,840 parameters), ULDP-AVG with the MNIST
defaults of :data:`fedprivacy.uldp.config.DEFAULT_HYPER` (``Q = 5`` local epochs, batch 16,
``eta_l = 0.05``, ``C = 0.5``; ``--epochs`` changes ``Q``). Every variant runs on ``--device``
(the baselines too).

Part 1, one silo's share of a round at a time (every user of the silo trains its own copy of the
global model on its records; the deltas are clipped, weighted and summed):

* ``ours``: :class:`fedprivacy.fl.local_training.VectorisedTrainer` on the silo's users, all
  of them (``--silo-rows`` rows per vectorised call, default 1024);
* ``loop`` (``--baseline loop``, how the authors' code trains): per user a
  :func:`copy.deepcopy` of the model, a fresh ``torch.optim.SGD``, one ``backward()`` per
  minibatch (:func:`fedprivacy.fl.training_loops.train_groups_loop`, the same minibatches as
  ours); ``--baseline authors``: their whole per-user pipeline
  (:func:`uldp_authors.loop_authors`: a ``DataLoader`` per user, ``state_dict`` differences).
  Timed on ``--subset`` random users per silo and **extrapolated linearly** (printed as such);
  ours is also run on that subset and the deltas compared (max absolute difference).

Part 2, the whole round (:meth:`fedprivacy.uldp.methods.MethodRunner.run_round`, noise and
update included), which trains every user of every silo in one vectorised pass (chunks of
``--max-rows`` rows; a list compares several) and differentiates the users' copies either way of
:data:`fedprivacy.fl.gradients.GRADIENTS` (``--gradients``: ``vmap``, whose convolutions become
grouped convolutions, and ``bmm``, the layers as batched matrix products), against the
``per-silo`` engine (the ``vmap`` trainer called silo after silo with 1024 rows per call, as
before the round was batched). ``--profile`` prints the device kernels of one round of the
last engine (``torch.profiler``), where its time goes.
Each is timed ``--repeats`` times after one warm-up round (median printed), with the FLOPs of
the real records (``torch.utils.flop_counter`` of one forward and backward per record, times
``Q`` epochs of every record) and of the padded rows the vectorised calls differentiate, the
achieved TFLOP/s and, with ``--peak-tflops``, the fraction of the device's peak.

Usage: python benchmarks/uldp.py [--users 10000] [--silos 5] [--distribution zipf]
       [--subset 300] [--threads 1] [--device cpu] [--epochs 5] [--baseline loop|authors]
       [--silo-rows 1024] [--max-rows 1024[,65536...]] [--gradients vmap,bmm] [--repeats 3]
       [--peak-tflops X] [--profile] [--skip-silos] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import functools
import math
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray
from torch.utils.flop_counter import FlopCounterMode

from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.errors import ParameterError
from fedprivacy.fl.local_spec import LocalTrainingSpec
from fedprivacy.fl.local_training import VectorisedTrainer
from fedprivacy.fl.minibatches import epoch_orders
from fedprivacy.fl.params import flatten_parameters
from fedprivacy.fl.training_loops import train_groups_loop
from fedprivacy.uldp.clipped_sums import clipped_sums
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.rounds import RoundHyper, RoundOutput
from fedprivacy.uldp.run_setup import allocate
from uldp_authors import loop_authors

#: Seed of the round's minibatch keys (the same in every variant and repeat).
ROUND_SEED = 1


def machine() -> str:
    """CPU model, cores, GPU, torch version."""
    cpu = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    py = platform.python_version()
    return f"{cpu}, {os.cpu_count()} cores{gpu}, torch {torch.__version__}, Python {py}"


@dataclass
class Bench:
    """The federation, model and round inputs every variant shares."""

    args: argparse.Namespace
    fed: Federation
    model: torch.nn.Module
    flat: torch.Tensor
    spec: LocalTrainingSpec
    hyper: RoundHyper
    keys: NDArray[np.float64]
    weights: NDArray[np.float64]
    setup_s: float

    def sync(self) -> None:
        """Wait for the device (timings of CUDA work)."""
        if self.fed.device.type == "cuda":
            torch.cuda.synchronize()

    def timed(self, fn: Callable[[], object]) -> tuple[float, object]:
        """Seconds of ``fn()`` on the device, and its value."""
        self.sync()
        t = time.perf_counter()
        value = fn()
        self.sync()
        return time.perf_counter() - t, value


def parse() -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--silos", type=int, default=5)
    ap.add_argument("--distribution", choices=("uniform", "zipf"), default="zipf")
    ap.add_argument("--subset", type=int, default=300, help="users per silo for the loop (0: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=int, default=None, help="local epochs Q (default 5)")
    ap.add_argument("--baseline", choices=("loop", "authors"), default="loop")
    ap.add_argument("--silo-rows", type=int, default=1024, help="rows per call in part 1")
    ap.add_argument("--max-rows", default="1024", help="rows per call of the batched round")
    ap.add_argument("--gradients", default="vmap,bmm", help="ways to differentiate, part 2")
    ap.add_argument("--profile", action="store_true", help="kernels of the last engine's round")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=None, help="the device's peak")
    ap.add_argument("--skip-silos", action="store_true", help="part 2 only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    return ap.parse_args()


def setup(args: argparse.Namespace) -> Bench:
    """Load MNIST, allocate it, build the model on the device and draw the round's keys."""
    cfg = UldpConfig(
        dataset="mnist",
        method="ULDP-AVG",
        users=args.users,
        silos=args.silos,
        distribution=args.distribution,
        local_epochs=args.epochs,
        seed=args.seed,
        device=args.device,
    )
    cfg = cfg.validate().resolved()
    assert cfg.local_epochs is not None and cfg.batch_size is not None
    assert cfg.local_lr is not None and cfg.clip is not None and cfg.global_lr is not None
    spec = LocalTrainingSpec(epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.local_lr)
    hyper = RoundHyper(
        local=spec, global_lr=cfg.global_lr, clip=cfg.clip, noise_multiplier=cfg.noise_multiplier
    )
    t0 = time.perf_counter()
    ds = load_silo_dataset("mnist", args.data_dir, seed=args.seed)
    alloc_ss, init_ss, _, _ = np.random.SeedSequence(args.seed).spawn(4)
    fed = build_federation(
        ds, allocate(cfg, ds, np.random.default_rng(alloc_ss)), device=cfg.device
    )
    model = fed.task.build_model(seed=int(init_ss.generate_state(1)[0])).to(fed.device)
    flat = flatten_parameters(model).detach().to(fed.device)
    keys = np.random.default_rng(ROUND_SEED).random((spec.epochs, fed.pool_size))
    setup_s = time.perf_counter() - t0
    return Bench(args, fed, model, flat, spec, hyper, keys, fed.weights(False), setup_s)


def flops_per_record(b: Bench) -> float:
    """FLOPs of one forward and backward pass per record (``torch.utils.flop_counter``)."""
    model = copy.deepcopy(b.model).cpu()
    x, y = b.fed.x[:64].cpu(), b.fed.y[:64].cpu()
    with FlopCounterMode(display=False) as counter:
        loss = b.fed.task.loss(model(x), y, torch.ones(len(x)))
        loss.backward()
    return counter.get_total_flops() / len(x)


def silo_row(
    b: Bench, silo: int, trainer: VectorisedTrainer, rng: np.random.Generator
) -> tuple[str, float, float]:
    """Part 1 for one silo: ours on every user, the baseline on a subset; the table row."""
    fed, spec, clip = b.fed, b.spec, b.hyper.clip
    sl = fed.silo_slice(silo)
    x, y, off, users = fed.x[sl], fed.y[sl], fed.user_offsets[silo], fed.silo_users[silo]
    w = b.weights[silo, users]
    orders = epoch_orders(b.keys[:, fed.record_index[sl]], off, spec.epochs)
    chunks = lambda: trainer.iter_deltas(b.flat, x, y, off, orders, spec)  # noqa: E731
    ours, _ = b.timed(lambda: clipped_sums(chunks(), clip, w, num_params=trainer.num_params))
    k = len(users)
    sub = b.args.subset
    pick = np.arange(k) if sub <= 0 or sub >= k else np.sort(rng.choice(k, sub, replace=False))
    rows = np.concatenate([np.arange(off[g], off[g + 1]) for g in pick])
    sub_off = np.concatenate([[0], np.cumsum(np.diff(off)[pick])]).astype(np.int64)
    xs, ys = x[rows], y[rows]
    sub_orders = epoch_orders(b.keys[:, fed.record_index[sl][rows]], sub_off, spec.epochs)
    loss = fed.task.loss
    if b.args.baseline == "loop":
        loop_s, deltas = b.timed(
            lambda: train_groups_loop(b.model, loss, b.flat, xs, ys, sub_off, sub_orders, spec)
        )
        assert isinstance(deltas, torch.Tensor)
        mine = trainer.train(b.flat, xs, ys, sub_off, sub_orders, spec)
        diff = f"{float((mine - deltas).abs().max()):.2e}"
    else:
        args = (b.model, fed, b.flat, xs, ys, sub_off, spec, clip, w[pick], silo)
        loop_s, _ = b.timed(lambda: loop_authors(*args))
        diff = "n/a (own shuffles)"
    full = loop_s * k / len(pick)
    star = "*" if len(pick) < k else " "
    line = (
        f"{silo:>4} {k:>6} {x.shape[0]:>7} | {ours:8.2f} | {len(pick):>10} {loop_s:8.2f} "
        f"{full:18.1f}{star} | {full / ours:5.1f}x | {diff:>10}"
    )
    return line, ours, full


def silo_table(b: Bench) -> None:
    """Part 1: per silo, ours against the baseline, on the same device."""
    trainer = VectorisedTrainer(b.model, b.fed.task.loss, max_rows=b.args.silo_rows)
    header = (
        f"{'silo':>4} {'users':>6} {'records':>7} | {'ours s':>8} | {'loop users':>10} "
        f"{'loop s':>8} {'loop s (full silo)':>19} | {'ratio':>6} | {'max |diff|':>10}"
    )
    print(f"part 1: one silo at a time; baseline {b.args.baseline} on {b.fed.device}")
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(12345)
    ours = loop = 0.0
    for silo in range(b.fed.num_silos):
        line, o, f = silo_row(b, silo, trainer, rng)
        print(line)
        ours, loop = ours + o, loop + f
    print("-" * len(header))
    fed = b.fed
    users = sum(len(u) for u in fed.silo_users)
    print(
        f"{'all':>4} {users:>6} {fed.num_records:>7} | {ours:8.2f} | {'':>10} {'':>8} "
        f"{loop:18.1f}* | {loop / ours:5.1f}x |"
    )
    print(
        f"* {b.args.baseline} EXTRAPOLATED linearly from {b.args.subset} random users per silo "
        "(seconds x users in silo / users timed); ours timed on every user."
    )
    print()


def per_silo_round(b: Bench, trainer: VectorisedTrainer) -> torch.Tensor:
    """The pre-noise sum of a round computed silo after silo (the engine before batching)."""
    fed, spec, clip = b.fed, b.spec, b.hyper.clip
    total = torch.zeros_like(b.flat)
    for silo in range(fed.num_silos):
        sl = fed.silo_slice(silo)
        off, users = fed.user_offsets[silo], fed.silo_users[silo]
        orders = epoch_orders(b.keys[:, fed.record_index[sl]], off, spec.epochs)
        chunks = trainer.iter_deltas(b.flat, fed.x[sl], fed.y[sl], off, orders, spec)
        w = b.weights[silo, users]
        (part,) = clipped_sums(chunks, clip, w, num_params=trainer.num_params, device=b.flat.device)
        total += part.total
    return total


def one_round(runner: MethodRunner, flat: torch.Tensor) -> RoundOutput:
    """A round from ``flat`` with the benchmark's keys (ULDP-AVG draws only its keys from rng)."""
    return runner.run_round(flat, np.random.default_rng(ROUND_SEED), np.random.default_rng(2))


def median_seconds(b: Bench, fn: Callable[[], object]) -> tuple[float, object, float]:
    """One warm-up call, then the median of ``--repeats`` timed calls; the last value, peak GB."""
    cuda = b.fed.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    fn()
    runs = [b.timed(fn) for _ in range(max(1, b.args.repeats))]
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else math.nan
    return statistics.median(t for t, _ in runs), runs[-1][1], peak


def round_table(b: Bench) -> None:
    """Part 2: the whole round, batched (each ``--max-rows``) against the per-silo engine."""
    fed = b.fed
    per_record = flops_per_record(b)
    real = per_record * b.spec.epochs * fed.num_records
    peak = b.args.peak_tflops
    print(
        f"part 2: whole ULDP-AVG round on {fed.device}; {per_record / 1e6:.3f} MFLOP per record "
        f"(forward + backward), {real / 1e12:.3f} TFLOP of real records per round"
    )
    header = (
        f"{'engine':>22} | {'s/round':>8} | {'calls':>6} | {'rows/real':>9} | "
        f"{'TFLOP/s':>8} | {'of peak':>8} | {'vs per-silo':>11} | {'max |diff|':>10} | "
        f"{'peak GB':>7}"
    )
    print(header)
    print("-" * len(header))
    trainer = VectorisedTrainer(b.model, fed.task.loss, max_rows=1024)
    base_s, base, gb = median_seconds(b, lambda: per_silo_round(b, trainer))
    assert isinstance(base, torch.Tensor)
    rows = [("per-silo (1024 rows)", base_s, trainer, base, gb)]
    engines = [
        (gradient, int(max_rows))
        for gradient in str(b.args.gradients).split(",")
        for max_rows in str(b.args.max_rows).split(",")
    ]
    for gradient, max_rows in engines:
        runner = MethodRunner(
            "ULDP-AVG", fed, b.hyper, model=b.model, max_rows=max_rows, gradient=gradient
        )
        try:
            sec, out, gb = median_seconds(b, functools.partial(one_round, runner, b.flat))
        except (RuntimeError, ParameterError) as exc:  # e.g. out of device memory: report, go on
            print(f"{gradient} ({max_rows} rows): failed: {exc}".splitlines()[0])
            continue
        assert isinstance(out, RoundOutput)
        rows.append((f"{gradient} ({max_rows} rows)", sec, runner.trainer, out.presum, gb))
    for name, sec, tr, presum, gb in rows:
        calls = tr.calls // (max(1, b.args.repeats) + 1)
        padded = tr.rows / (max(1, b.args.repeats) + 1) / (b.spec.epochs * fed.num_records)
        tflops = real / sec / 1e12
        of_peak = f"{tflops / peak:8.1%}" if peak else f"{'-':>8}"
        diff = float((presum - base).abs().max())
        print(
            f"{name:>22} | {sec:8.3f} | {calls:>6} | {padded:8.2f}x | {tflops:8.3f} | "
            f"{of_peak} | {base_s / sec:10.2f}x | {diff:10.2e} | {gb:7.2f}"
        )
    print(
        "rows/real: rows differentiated (records and padding) over real record passes; "
        "TFLOP/s from the real records only; max |diff|: pre-noise sum against per-silo."
    )
    if b.args.profile:
        profile_round(b, runner)


def profile_round(b: Bench, runner: MethodRunner) -> None:
    """The 20 most expensive device (or CPU) operators of one round of ``runner``."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    cuda = b.fed.device.type == "cuda"
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        one_round(runner, b.flat)
        b.sync()
    key = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    print(f"\nprofile of one round, {runner.trainer.gradient} ({runner.trainer.max_rows} rows):")
    print(prof.key_averages().table(sort_by=key, row_limit=20, max_name_column_width=50))


def main() -> None:
    """Run the benchmark and print the tables."""
    args = parse()
    torch.set_num_threads(args.threads)
    b = setup(args)
    fed = b.fed
    print(
        f"ULDP-AVG round, MNIST CNN ({b.flat.numel()} parameters), {fed.num_users} users, "
        f"{fed.num_silos} silos, {args.distribution}; Q={b.spec.epochs}, B={b.spec.batch_size}, "
        f"lr={b.spec.lr}, C={b.hyper.clip}; threads {args.threads}, device {fed.device} "
        f"(every variant); setup {b.setup_s:.1f} s"
    )
    print(f"machine: {machine()}; date {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print()
    if not args.skip_silos:
        silo_table(b)
    round_table(b)


if __name__ == "__main__":
    main()
