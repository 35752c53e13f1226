"""How much of the demo's Fig. 3a the GF(p) minimum-distance bound settles.

Runs the demo's two random schemes (120 users, 12 per round, heterogeneous dropout, 2,000
rounds, seed 0) and computes the T_weak curve with the demo's budget (``--time-limit`` per
curve, ``--point-time-limit`` per round) twice in the same run:

* ``gfp``: the shipped search (small supports, GF(p) Brouwer-Zimmermann, MILP);
* ``milp`` (the baseline, what the search was before the GF(p) bound): the same with the GF(p)
  bound switched off.

Prints, per scheme and method, the change rounds (ranks) that end exact, the highest rank up to
which every round is exact, the widest interval left, and the time. Then, without a time limit,
the seconds the GF(p) bound alone needs to settle a few ranks of the random scheme.

Usage: python benchmarks/t_weak_curve.py [--time-limit S] [--point-time-limit S]
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from fedprivacy.experiments.demo import DemoConfig, scheme_configs
from fedprivacy.experiments.selection_run import run_selection_experiment
from fedprivacy.linalg import pivot_rows
from fedprivacy.participation import privacy
from fedprivacy.participation.availability import BernoulliDropout
from fedprivacy.participation.curve import t_weak_curve
from fedprivacy.participation.min_distance import ModularBound, modular_lower_bound


@contextmanager
def without_gfp() -> Iterator[None]:
    """The baseline: the search with the GF(p) bound replaced by 'no bound'."""
    original = privacy.modular_lower_bound

    def nothing(*args: object, **kwargs: object) -> ModularBound:
        return ModularBound(0, None, 0, (), None)

    privacy.modular_lower_bound = nothing  # type: ignore[assignment]
    try:
        yield
    finally:
        privacy.modular_lower_bound = original


def summarise(p: np.ndarray, time_limit: float, point_limit: float) -> dict[str, object]:
    started = time.perf_counter()
    curve = t_weak_curve(p, time_limit=time_limit, point_time_limit=point_limit)
    seconds = time.perf_counter() - started
    ranks = curve.change_rounds
    exact = [int(curve.lower[r] == curve.upper[r]) for r in ranks]
    frontier = next((k for k, e in enumerate(exact) if not e), len(exact))
    widest = max(int(curve.upper[r] - curve.lower[r]) for r in ranks)
    return {
        "exact": f"{sum(exact)}/{len(ranks)}",
        "exact_through_rank": frontier,
        "widest": widest,
        "seconds": round(seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=DemoConfig.metrics_time_limit)
    parser.add_argument("--point-time-limit", type=float, default=DemoConfig.point_time_limit)
    args = parser.parse_args()
    print(
        f"# {platform.node()} {platform.processor() or platform.machine()}, "
        f"{time.strftime('%Y-%m-%d')}; curve budget {args.time_limit} s, "
        f"{args.point_time_limit} s per round"
    )
    cfg = DemoConfig()
    availability = BernoulliDropout.heterogeneous(
        cfg.users, np.random.default_rng([cfg.seed, 2024])
    )
    matrices = {}
    for conf in scheme_configs(cfg)[:2]:
        run = run_selection_experiment(replace(conf, metrics="none"), availability=availability)
        matrices[conf.label] = run.ledger.matrix()
    print("| scheme | method | exact change rounds | exact through rank | widest interval | s |")
    print("|---|---|---|---|---|---|")
    for label, p in matrices.items():
        rows = {"gfp": summarise(p, args.time_limit, args.point_time_limit)}
        with without_gfp():
            rows["milp (baseline)"] = summarise(p, args.time_limit, args.point_time_limit)
        for method, r in rows.items():
            print(
                f"| {label} | {method} | {r['exact']} | {r['exact_through_rank']} | "
                f"{r['widest']} | {r['seconds']} |"
            )
    p = matrices["Random"]
    pivots = pivot_rows(p)
    print("\nGF(p) bound alone, no time limit (random scheme; upper bound 12 = a round):")
    print("| rank | distinct columns | disjoint sets (ranks) | level | lower bound | s |")
    print("|---|---|---|---|---|---|")
    for k in (25, 30, 35, 38, 40, 45, 60):
        red = privacy._reduce(p[: pivots[k - 1] + 1], pivots[:k])
        started = time.perf_counter()
        bound = modular_lower_bound(
            red.matrix,
            red.weights,
            upper=lambda: 12,
            offer=lambda s: None,
            deadline=float("inf"),
        )
        print(
            f"| {k} | {red.num_columns} | {list(bound.sets)} | {bound.level} | {bound.lower} | "
            f"{time.perf_counter() - started:.2f} |"
        )


if __name__ == "__main__":
    main()
