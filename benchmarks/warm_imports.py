"""A node's first local training in a ClientApp process forked from the warm zygote.

Every message a SuperNode receives runs in a fresh ClientApp process; with
``fedprivacy.flower.deploy.warm_clientapp`` that process is forked from a zygote that imported
``WARM_IMPORTS`` once. What the zygote did not import, every process imports again. The baseline
in the same run is the zygote's former list (numpy, torch, sklearn, the mod and the apps); the
current one adds ``torch._dynamo`` (which the first ``torch.optim`` optimiser of a process
imports) and ``fedprivacy.fl.training_config``. For each list: a zygote process imports it, then
forks one child per repetition; each child does what a node does at its round's first stage
(builds the training of the configuration, computes one user's update) and reports its seconds.

Run::

    .venv/bin/python benchmarks/warm_imports.py --repeats 5
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

BASELINE = "numpy,torch,sklearn,fedprivacy.flower.dropin.mod,fedprivacy.flower.deploy.apps"
CURRENT = (
    "numpy,torch,torch._dynamo,sklearn,fedprivacy.flower.dropin.mod,"
    "fedprivacy.flower.deploy.apps,fedprivacy.fl.training_config"
)


def _node_first_training() -> float:
    """Seconds of a node's first training request: build the training, one user's update."""
    started = time.perf_counter()
    from fedprivacy.fl.training_config import TrainConfig, build_training

    config = TrainConfig(
        users=6,
        per_round=6,
        rounds=3,
        scheme="multiround",
        target_privacy=2,
        secagg=True,
        dropout=0.0,
        trainer="loop",
        seed=3,
        dp="distributed",
        noise_multiplier=1.0,
        clip=0.5,
    )
    build_training(config).client_update(0, list(range(6)), 0)
    return time.perf_counter() - started


def _zygote(modules: str, repeats: int) -> None:
    """Import ``modules``, then fork ``repeats`` children; print the timings as JSON."""
    started = time.perf_counter()
    for name in filter(None, modules.split(",")):
        importlib.import_module(name)
    imported = time.perf_counter() - started
    children = []
    for _ in range(repeats):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.write(write, repr(_node_first_training()).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            children.append(float(pipe.read()))
        os.waitpid(pid, 0)
    print(json.dumps({"import_seconds": imported, "child_seconds": children}))


def _measure(modules: str, repeats: int) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, __file__, "--zygote", modules, "--repeats", str(repeats)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    data = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "import": data["import_seconds"],
        "median": statistics.median(data["child_seconds"]),
        "max": max(data["child_seconds"]),
    }


def main() -> None:
    """Both zygotes, one after the other; the ratio of a node's first training."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--zygote", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.zygote is not None:
        _zygote(args.zygote, args.repeats)
        return
    print(f"{platform.machine()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    rows = {"baseline (former WARM_IMPORTS)": BASELINE, "current WARM_IMPORTS": CURRENT}
    results = {name: _measure(modules, args.repeats) for name, modules in rows.items()}
    print(f"{'zygote':<32}{'imports s':>10}{'first training s (median, max)':>34}")
    for name, r in results.items():
        print(f"{name:<32}{r['import']:>10.2f}{r['median']:>22.3f}{r['max']:>12.3f}")
    base, now = results.values()
    print(
        f"ratio baseline / current, a node's first training: {base['median'] / now['median']:.1f}x"
    )


if __name__ == "__main__":
    main()
