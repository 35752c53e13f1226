"""Selection speed and T_weak-curve time, against named baselines in the same run.

1. Seconds per round of Multi-RoundSecAgg selection (implicit, batches only) for N = 1e2 .. 1e6,
   K = N/100, T = min(10, K), both modes; baseline: Algorithm 2 on the materialised family B (the
   official code's approach), run wherever B fits in memory (<= 2e6 rows), plus the paper's own
   setting N=120, K=12, T=3/4/6.
2. Time of the whole Fig. 3a curve (six schemes of the demo, N=120, K=12, heterogeneous dropout),
   exact or certified; baseline: the official code's metric, the smallest row support of rref(P)
   recomputed after every round (an upper bound only).

Usage: python benchmarks/selection.py [--quick] [--rounds R]
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

from fedprivacy.experiments.demo import DemoConfig, scheme_configs
from fedprivacy.experiments.selection_run import run_selection_experiment
from fedprivacy.participation.availability import BernoulliDropout
from fedprivacy.participation.family import ExplicitFamilySelector
from fedprivacy.participation.selectors import BatchPartitionSelector, Selector

MAX_ROWS = 2_000_000
# the baseline recomputes rref(P) from scratch; it is timed on every BASELINE_STRIDE-th round and
# the time is multiplied by the stride to estimate the cost of doing it after every round
BASELINE_STRIDE = 10


def time_select(
    selector: Selector, availability: BernoulliDropout, rounds: int, seed: int = 0
) -> tuple[float, float]:
    """Median seconds of one select() call and of one availability draw."""
    rng = np.random.default_rng(seed)
    freq = np.zeros(selector.num_users, dtype=np.int64)
    sel, avail = [], []
    for t in range(rounds):
        t0 = time.perf_counter()
        available = availability.sample(t, rng)
        t1 = time.perf_counter()
        chosen = selector.select(available, freq, rng)
        t2 = time.perf_counter()
        freq[chosen] += 1
        avail.append(t1 - t0)
        sel.append(t2 - t1)
    return float(np.median(sel)), float(np.median(avail))


def fmt_count(x: int) -> str:
    """Scientific notation for integers of any size."""
    if x < 10**6:
        return f"{x:,}"
    digits = len(str(x))
    return f"{int(str(x)[:3]) / 100:.2f}e{digits - 1}"


def selection_table(sizes: list[tuple[int, int, int]], rounds: int) -> None:
    print("## Selection: seconds per round (median), implicit vs materialised family")
    print()
    print(
        "| N | K | T | rows of B | mode | implicit select | materialised select | ratio | "
        "availability draw |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n, k, t in sizes:
        rows = math.comb(n // t, k // t)
        availability = BernoulliDropout(n, 0.1)
        for fairness in (False, True):
            mode = "fair" if fairness else "uniform"
            implicit = BatchPartitionSelector(n, k, t, fairness=fairness)
            r = max(20, min(rounds, 2_000_000 // n))
            imp, av = time_select(implicit, availability, r)
            if rows <= MAX_ROWS and rows * n <= 2e8:
                t0 = time.perf_counter()
                explicit = ExplicitFamilySelector.batch_partition(n, k, t, fairness=fairness)
                build = time.perf_counter() - t0
                exp, _ = time_select(explicit, availability, max(20, r // 10))
                exp_s = f"{exp:.2e} s (+{build:.2f} s to build B)"
                ratio = f"{exp / imp:.0f}x"
            else:
                exp_s, ratio = f"does not fit ({fmt_count(rows)} rows)", "-"
            print(
                f"| {n:,} | {k:,} | {t} | {fmt_count(rows)} | {mode} | {imp:.2e} s | {exp_s} | "
                f"{ratio} | {av:.2e} s |",
                flush=True,
            )
    print()


def rref_min_support(p: np.ndarray, tol: float = 1e-9) -> int:
    """The official code's metric: smallest nonzero count over the rows of rref(P) (float)."""
    a = p.astype(np.float64).copy()
    rows, cols = a.shape
    r = 0
    for c in range(cols):
        if r == rows:
            break
        piv = r + int(np.argmax(np.abs(a[r:, c])))
        if abs(a[piv, c]) <= tol:
            continue
        a[[r, piv]] = a[[piv, r]]
        a[r] /= a[r, c]
        others = np.abs(a[:, c]) > tol
        others[r] = False
        a[others] -= np.outer(a[others, c], a[r])
        r += 1
    if r == 0:
        return 0
    return int((np.abs(a[:r]) > tol).sum(axis=1).min())


def curve_table(rounds: int, time_limit: float) -> None:
    print(f"## Fig. 3a curve: N=120, K=12, {rounds} rounds, heterogeneous dropout")
    print()
    print(
        "| scheme | ours: seconds | ours: rounds exact | final T_weak | "
        "baseline per-round rref: seconds | baseline final | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    cfg = DemoConfig(rounds=rounds, metrics_time_limit=time_limit)
    availability = BernoulliDropout.heterogeneous(cfg.users, np.random.default_rng([0, 2024]))
    total_ours = total_base = 0.0
    for conf in scheme_configs(cfg):
        res = run_selection_experiment(conf, availability=availability)
        assert res.t_weak is not None
        lo, hi = res.t_weak.lower, res.t_weak.upper
        mask = ~np.isnan(lo)
        exact_share = float(np.mean(lo[mask] == hi[mask]))
        p = res.ledger.matrix()
        t0 = time.perf_counter()
        stride = BASELINE_STRIDE
        last = 0
        for t in range(0, rounds, stride):
            last = rref_min_support(p[: t + 1])
        base = (time.perf_counter() - t0) * stride
        total_ours += res.seconds_metrics
        total_base += base
        final = f"{int(lo[-1])}" if lo[-1] == hi[-1] else f"[{int(lo[-1])}, {int(hi[-1])}]"
        print(
            f"| {conf.label} | {res.seconds_metrics:.1f} | {100 * exact_share:.0f}% | {final} | "
            f"{base:.1f} | {last} | {base / res.seconds_metrics:.2f}x |",
            flush=True,
        )
    print(
        f"| **all six** | **{total_ours:.1f}** | | | **{total_base:.1f}** | | "
        f"**{total_base / total_ours:.2f}x** |"
    )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer rounds")
    parser.add_argument("--rounds", type=int, default=2000, help="rounds of the Fig. 3a curve")
    parser.add_argument(
        "--time-limit", type=float, default=25.0, help="seconds per scheme for the T_weak curve"
    )
    args = parser.parse_args()
    print(
        f"# benchmarks/selection.py on {platform.node()} ({platform.processor() or 'cpu'}), "
        f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    print()
    sizes = [(120, 12, 3), (120, 12, 4), (120, 12, 6)]
    powers = [2, 3, 4] if args.quick else [2, 3, 4, 5, 6]
    for e in powers:
        n = 10**e
        k = n // 100
        sizes.append((n, k, min(10, k)))
    sizes.insert(5, (2000, 20, 10))
    selection_table(sizes, 50 if args.quick else 200)
    curve_table(300 if args.quick else args.rounds, args.time_limit)


if __name__ == "__main__":
    main()
