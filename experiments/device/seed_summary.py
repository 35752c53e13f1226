"""Means over seeds with 95 % confidence intervals, and paired differences, from device runs.

usage: python experiments/device/seed_summary.py RUN_DIR... --out DIR [--reference random]
       [--last 10] [--paper NAME=VALUE ...]

Each RUN_DIR is a `fedprivacy reproduce` run directory named ``RUN-seedS`` (metrics.csv,
summary.json). Runs are grouped by RUN; for each group the table gives the final test accuracy
(mean over seeds, 95 % Student-t interval), the mean of the last ``--last`` evaluations (less
sensitive to the round-to-round swings of non-IID training), and the difference to the reference
group paired by seed (the same seed gives every scheme the same shards, initial model and dropout
probabilities, so the pairs share their randomness). Writes DIR/summary.md, DIR/curves.csv (every
evaluation of every run) and DIR/curves.png (mean test accuracy over seeds with its 95 % band).
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from accuracy_table import read_accuracy  # noqa: E402  (this folder, the script's path)
from scipy import stats  # noqa: E402

Curves = dict[str, dict[int, dict[int, float]]]  # run -> seed -> round -> accuracy (%)


def read_runs(dirs: list[Path]) -> Curves:
    """Test accuracy per evaluation round of each run directory, grouped by run name."""
    curves: Curves = {}
    for run in dirs:
        match = re.fullmatch(r"(.+)-seed(\d+)", run.name)
        if match is None:
            raise SystemExit(f"{run}: not a RUN-seedS directory")
        curves.setdefault(match[1], {})[int(match[2])] = read_accuracy(run)
    return curves


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % Student-t interval."""
    arr = np.asarray(values)
    if arr.size < 2:
        return float(arr.mean()), float("nan")
    half = stats.t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / np.sqrt(arr.size)
    return float(arr.mean()), float(half)


def _final(acc: dict[int, float]) -> float:
    return acc[max(acc)]


def _last(acc: dict[int, float], k: int) -> float:
    return float(np.mean([acc[r] for r in sorted(acc)[-k:]]))


def table(curves: Curves, reference: str, k: int, paper: dict[str, str]) -> list[str]:
    """Markdown rows: one per run name."""
    ref = curves[reference]
    rows = [
        f"| run | seeds | final accuracy (95 % CI) | mean of last {k} evaluations | "
        f"final minus {reference}, paired (95 % CI) | paper |",
        "|---|---|---|---|---|---|",
    ]
    for name, by_seed in curves.items():
        seeds = sorted(by_seed)
        final = interval([_final(by_seed[s]) for s in seeds])
        last = interval([_last(by_seed[s], k) for s in seeds])
        common = [s for s in seeds if s in ref]
        diff = interval([_final(by_seed[s]) - _final(ref[s]) for s in common])
        rows.append(
            f"| {name} | {','.join(map(str, seeds))} | {final[0]:.2f} ± {final[1]:.2f} | "
            f"{last[0]:.2f} ± {last[1]:.2f} | {diff[0]:+.2f} ± {diff[1]:.2f} | "
            f"{paper.get(name, '-')} |"
        )
    return rows


def write_curves(curves: Curves, path: Path) -> None:
    """Every evaluation of every run as one long CSV."""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["run", "seed", "round", "test_accuracy_percent"])
        for name, by_seed in curves.items():
            for seed, acc in sorted(by_seed.items()):
                out.writerows([name, seed, r, f"{a:.2f}"] for r, a in sorted(acc.items()))


def plot(curves: Curves, path: Path) -> None:
    """Mean test accuracy over seeds against the round, with the 95 % band."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, by_seed in curves.items():
        rounds = sorted(set.intersection(*(set(a) for a in by_seed.values())))
        stats_ = [interval([by_seed[s][r] for s in by_seed]) for r in rounds]
        mean = np.array([m for m, _ in stats_])
        half = np.nan_to_num(np.array([h for _, h in stats_]))
        ax.plot(rounds, mean, label=f"{name} ({len(by_seed)} seeds)")
        ax.fill_between(rounds, mean - half, mean + half, alpha=0.2)
    ax.set(xlabel="round", ylabel="test accuracy (%)", ylim=(0, 100))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    """Write the summary, the curves and the plot."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reference", default="random")
    ap.add_argument("--last", type=int, default=10)
    ap.add_argument("--paper", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args()
    curves = read_runs(args.runs)
    if args.reference not in curves:
        raise SystemExit(f"no runs named {args.reference!r} (have {sorted(curves)})")
    paper = dict(item.split("=", 1) for item in args.paper)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = table(curves, args.reference, args.last, paper)
    (args.out / "summary.md").write_text("\n".join(rows) + "\n")
    write_curves(curves, args.out / "curves.csv")
    plot(curves, args.out / "curves.png")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
