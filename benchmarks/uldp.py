"""Seconds per ULDP-AVG round on MNIST: vectorised per-user training against a per-user loop.

Setting (the paper's MNIST runs with many users, Section 5.1 / Figs. 5d-f and 9b): the 60,000
MNIST training records allocated to ``--users`` users (default 10,000) over ``--silos`` silos
(default 5) with ``--distribution`` (default ``zipf``: user alpha 0.5, silo alpha 2.0, as in
Fig. 9b; ``uniform`` is Fig. 5d), the paper's CNN (about 20K parameters), ULDP-AVG with the
MNIST defaults of :data:`fedprivacy.uldp.config.DEFAULT_HYPER` (``Q = 5`` local epochs, batch
16, ``eta_l = 0.05``, ``C = 0.5``; ``--epochs`` changes ``Q``).

Variants, each doing the work of one silo's share of a ULDP-AVG round (every user of the silo
trains its own copy of the global model on its records, then the deltas are clipped, weighted
and summed):

* ``vectorised`` (ours): :class:`fedprivacy.uldp.per_user_training.PerUserTrainer` -- all the
  silo's users at once with ``torch.func.vmap``, clipping and weighting on the stacked deltas.
  Timed on **every** user of every silo. The whole round through
  :meth:`fedprivacy.uldp.methods.MethodRunner.run_round` (noise and update included) is timed
  too.
* ``loop`` (the baseline, how the authors' code trains: ``local_trainer.py``, ULDP-AVG): for
  each user a :func:`copy.deepcopy` of the model, a fresh ``torch.optim.SGD``, one
  ``backward()`` per minibatch (:func:`fedprivacy.uldp.per_user_loops.train_groups_loop`,
  the same minibatches as ours), then clip, weight and sum.
* ``authors`` (``--baseline authors``): the authors' whole per-user pipeline
  (:func:`loop_authors`): each user's records as a list of ``(image, label)`` pairs behind its
  own ``DataLoader(shuffle=True)`` (their ``user_level_data_loader``), ``loss.item()`` and NaN
  checks per step, and the ``state_dict`` difference, clipping, weighting and summing done
  tensor by tensor on ``OrderedDict`` s. It checks that ``loop`` is not a slower straw man.

The loop over 10,000 users takes long on a small CPU, so it is timed on ``--subset`` users drawn
at random in each silo and **extrapolated linearly** to the silo's users (printed as such;
``--subset 0`` times the loop on every user). Ours and the loop are also run on the same subset
and their deltas compared (max absolute difference), so the speed-up is for the same result.

Usage: python benchmarks/uldp.py [--users 10000] [--silos 5] [--distribution zipf]
       [--subset 300] [--threads 1] [--device cpu] [--epochs 5] [--baseline loop|authors]
       [--max-rows 1024] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import copy
import datetime
import math
import os
import platform
import subprocess
import time
from typing import cast

import numpy as np
import torch
from numpy.typing import NDArray

from fedprivacy.data.tabular import load_silo_dataset
from fedprivacy.fl.local_training import LocalTrainingSpec
from fedprivacy.fl.params import flatten_parameters, load_flat_
from fedprivacy.uldp.config import UldpConfig
from fedprivacy.uldp.federation import Federation, build_federation
from fedprivacy.uldp.methods import MethodRunner
from fedprivacy.uldp.per_user_loops import train_groups_loop
from fedprivacy.uldp.per_user_training import (
    PerUserTrainer,
    clip_rows,
    epoch_orders,
)
from fedprivacy.uldp.rounds import RoundHyper
from fedprivacy.uldp.run import allocate


def machine() -> str:
    """CPU model, cores, torch version."""
    cpu = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    py = platform.python_version()
    return f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__}, Python {py}"


def loop_authors(
    model: torch.nn.Module,
    fed: Federation,
    global_flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: NDArray[np.int64],
    spec: LocalTrainingSpec,
    clip: float,
    weights: NDArray[np.float64],
    seed: int,
) -> torch.Tensor:
    """The authors' whole per-user pipeline of a ULDP-AVG silo round; return the weighted sum.

    Per user, as the authors' ``local_trainer.py`` does it: its records as a Python list of
    ``(image, label)`` pairs behind a ``DataLoader(shuffle=True)``; a deep copy of the model and
    a fresh SGD optimiser; per minibatch ``zero_grad``, forward, loss, a NaN check, ``backward``,
    ``step`` and ``loss.item()``; then the ``state_dict`` difference tensor by tensor, a NaN/Inf
    check, the global L2 norm from per-tensor norms, clipping and weighting tensor by tensor,
    appended to a list that is summed key by key at the end.
    """
    from collections import OrderedDict

    from torch.utils.data import DataLoader, Dataset

    gen = torch.Generator().manual_seed(seed)
    start = copy.deepcopy(model)
    load_flat_(start, global_flat)
    global_state = copy.deepcopy(start.state_dict())
    names = [name for name, _ in start.named_parameters()]
    updates: list[OrderedDict[str, torch.Tensor]] = []
    for g in range(len(offsets) - 1):
        lo, hi = int(offsets[g]), int(offsets[g + 1])
        if hi == lo:
            continue
        records = [(x[i], int(y[i])) for i in range(lo, hi)]
        dataset = cast("Dataset[tuple[torch.Tensor, int]]", records)  # a list, as theirs
        loader = DataLoader(dataset, batch_size=spec.batch_size, shuffle=True, generator=gen)
        local = copy.deepcopy(start)
        opt = torch.optim.SGD(local.parameters(), lr=spec.lr)
        for _ in range(spec.epochs):
            losses = []
            for xb, yb in loader:
                opt.zero_grad()
                value = fed.task.loss(local(xb), yb, torch.ones(len(xb), dtype=xb.dtype))
                if torch.isnan(value):
                    continue
                torch.autograd.backward(value)
                opt.step()
                losses.append(value.item())
        state = local.state_dict()
        flat = torch.cat([p.detach().reshape(-1) for p in local.parameters()])
        if bool(torch.isnan(flat).any() or torch.isinf(flat).any()):
            continue
        diff = OrderedDict((k, state[k] - global_state[k]) for k in state)
        norm = torch.norm(torch.stack([torch.norm(diff[k], 2.0) for k in names]), 2.0)
        coef = torch.clamp(clip / (norm + 1e-6), max=1.0)
        updates.append(OrderedDict((k, float(weights[g]) * (diff[k] * coef)) for k in names))
    total = OrderedDict((k, torch.zeros_like(global_state[k])) for k in names)
    for update in updates:
        for k in names:
            total[k] += update[k]
    return torch.cat([total[k].reshape(-1) for k in names])


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--silos", type=int, default=5)
    ap.add_argument("--distribution", choices=("uniform", "zipf"), default="zipf")
    ap.add_argument("--subset", type=int, default=300, help="users per silo for the loop (0: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--epochs", type=int, default=None, help="local epochs Q (default 5)")
    ap.add_argument("--baseline", choices=("loop", "authors"), default="loop")
    ap.add_argument("--max-rows", type=int, default=None, help="rows per vmap call (1024)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    cfg = (
        UldpConfig(
            dataset="mnist",
            method="ULDP-AVG",
            users=args.users,
            silos=args.silos,
            distribution=args.distribution,
            local_epochs=args.epochs,
            seed=args.seed,
            device=args.device,
            max_rows=1024 if args.max_rows is None else args.max_rows,
        )
        .validate()
        .resolved()
    )
    assert cfg.local_epochs is not None and cfg.batch_size is not None
    assert cfg.local_lr is not None and cfg.clip is not None and cfg.global_lr is not None
    spec = LocalTrainingSpec(epochs=cfg.local_epochs, batch_size=cfg.batch_size, lr=cfg.local_lr)
    hyper = RoundHyper(local=spec, global_lr=cfg.global_lr, clip=cfg.clip, sigma=cfg.sigma)

    t0 = time.perf_counter()
    ds = load_silo_dataset("mnist", args.data_dir, seed=args.seed)
    alloc_ss, init_ss, train_ss, _ = np.random.SeedSequence(args.seed).spawn(4)
    alloc = allocate(cfg, ds, np.random.default_rng(alloc_ss))
    fed = build_federation(ds, alloc, device=args.device)
    model = fed.task.build_model(seed=int(init_ss.generate_state(1)[0]))
    cpu_model = copy.deepcopy(model)
    model.to(fed.device)
    flat = flatten_parameters(model).detach().to(fed.device)
    cpu_flat = flat.cpu()
    setup = time.perf_counter() - t0
    rng = np.random.default_rng(train_ss)
    keys = rng.random((spec.epochs, fed.pool_size))
    weights = fed.weights(False)
    trainer = PerUserTrainer(model, fed.task.loss, max_rows=cfg.max_rows)

    print(
        f"ULDP-AVG round, MNIST CNN ({trainer.num_params} parameters), {fed.num_users} users, "
        f"{fed.num_silos} silos, {args.distribution}; Q={spec.epochs}, B={spec.batch_size}, "
        f"lr={spec.lr}, C={cfg.clip}; threads {args.threads}, device {args.device} "
        f"(loop on cpu); setup {setup:.1f} s"
    )
    print(f"machine: {machine()}; date {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    pipeline = ", DataLoader and state_dict diffs per user" if args.baseline == "authors" else ""
    print(f"baseline: {args.baseline} (model copy + optimizer per user{pipeline})")
    print()
    header = (
        f"{'silo':>4} {'users':>6} {'records':>7} | {'ours s':>8} | {'loop users':>10} "
        f"{'loop s':>8} {'loop s (full silo)':>19} | {'ratio':>6} | {'max |diff|':>10}"
    )
    print(header)
    print("-" * len(header))
    ours_total = loop_total = 0.0
    extrapolated = False
    sub_rng = np.random.default_rng(12345)
    on_cuda = fed.device.type == "cuda"

    def sync() -> None:
        if on_cuda:
            torch.cuda.synchronize()

    for silo in range(fed.num_silos):
        sl = fed.silo_slice(silo)
        x, y = fed.x[sl], fed.y[sl]
        off, users = fed.user_offsets[silo], fed.silo_users[silo]
        w = weights[silo, users]
        orders = epoch_orders(keys[:, fed.record_index[sl]], off, spec.epochs)
        # ours, every user of the silo
        sync()
        t = time.perf_counter()
        part = PerUserTrainer.clipped_sum(
            trainer.iter_deltas(flat, x, y, off, orders, spec),
            cfg.clip,
            w,
            num_params=trainer.num_params,
            device=fed.device,
        )
        sync()
        ours = time.perf_counter() - t
        del part
        # the loop, on a random subset of the silo's users
        k = len(users)
        pick = (
            np.arange(k)
            if args.subset <= 0 or args.subset >= k
            else np.sort(sub_rng.choice(k, size=args.subset, replace=False))
        )
        rows = np.concatenate([np.arange(off[g], off[g + 1]) for g in pick])
        sub_off = np.concatenate([[0], np.cumsum(np.diff(off)[pick])]).astype(np.int64)
        xs, ys = x[rows].cpu(), y[rows].cpu()
        sub_orders = epoch_orders(keys[:, fed.record_index[sl][rows]], sub_off, spec.epochs)
        t = time.perf_counter()
        if args.baseline == "loop":
            deltas = train_groups_loop(
                cpu_model, fed.task.loss, cpu_flat, xs, ys, sub_off, sub_orders, spec
            )
            factors, _ = clip_rows(deltas, cfg.clip)
            _ = (torch.from_numpy(w[pick]).to(torch.float32) * factors) @ deltas
        else:
            _ = loop_authors(
                cpu_model, fed, cpu_flat, xs, ys, sub_off, spec, cfg.clip, w[pick], silo
            )
        loop_sub = time.perf_counter() - t
        loop_full = loop_sub * k / len(pick)
        extrapolated |= len(pick) < k
        # same result: ours on the subset
        if args.baseline == "loop":
            mine = trainer.train(
                flat, xs.to(fed.device), ys.to(fed.device), sub_off, sub_orders, spec
            ).cpu()
            diff = f"{float((mine - deltas).abs().max()):.2e}"
        else:
            diff = "n/a (own shuffles)"
        ours_total += ours
        loop_total += loop_full
        star = "*" if len(pick) < k else " "
        print(
            f"{silo:>4} {k:>6} {x.shape[0]:>7} | {ours:8.2f} | {len(pick):>10} {loop_sub:8.2f} "
            f"{loop_full:18.1f}{star} | {loop_full / ours:5.1f}x | {diff:>10}"
        )
    print("-" * len(header))
    print(
        f"{'all':>4} {sum(len(u) for u in fed.silo_users):>6} {fed.num_records:>7} | "
        f"{ours_total:8.2f} | {'':>10} {'':>8} {loop_total:18.1f}{'*' if extrapolated else ' '} "
        f"| {loop_total / ours_total:5.1f}x |"
    )
    if extrapolated:
        print(
            f"* loop EXTRAPOLATED linearly from {args.subset} random users per silo "
            "(seconds x users in silo / users timed); ours timed on every user."
        )
    # the whole round through the method runner
    runner = MethodRunner("ULDP-AVG", fed, hyper, model=model, max_rows=cfg.max_rows)
    sync()
    t = time.perf_counter()
    out = runner.run_round(flat, np.random.default_rng(1), np.random.default_rng(2))
    sync()
    whole = time.perf_counter() - t
    print()
    print(
        f"whole ULDP-AVG round (MethodRunner.run_round, noise and update included): "
        f"{whole:.2f} s ({whole / fed.num_silos:.2f} s per silo); "
        f"{out.groups} user-silo updates, {out.clipped} clipped"
    )
    ratio = loop_total / ours_total
    print(
        f"per silo: ours {ours_total / fed.num_silos:.2f} s, loop "
        f"{loop_total / fed.num_silos:.1f} s{' (extrapolated)' if extrapolated else ''}; "
        f"speed-up {ratio:.1f}x (target 20x: {'met' if ratio >= 20 else 'NOT met'})"
    )
    assert math.isfinite(ratio)


if __name__ == "__main__":
    main()
