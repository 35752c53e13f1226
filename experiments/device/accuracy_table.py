"""Markdown table of test accuracy at chosen rounds from run directories (device runs).

usage: python experiments/device/accuracy_table.py RUN_DIR... [--rounds 50,100,200,300,400,500]

Each RUN_DIR is a `fedprivacy reproduce` run directory (metrics.csv, summary.json); its label is
the two path parts above it (lrLR/EXPERIMENT/RUN-seedS -> "lrLR RUN-seedS").
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def read_accuracy(run: Path) -> dict[int, float]:
    """Test accuracy (%) of a run directory's metrics.csv by round (counted from 1)."""
    acc: dict[int, float] = {}
    with (run / "metrics.csv").open() as fh:
        for rec in csv.DictReader(fh):
            if rec["test_accuracy"]:
                acc[int(rec["round"]) + 1] = 100 * float(rec["test_accuracy"])
    return acc


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--rounds", default="50,100,200,300,400,500")
    args = ap.parse_args()
    picks = [int(r) for r in args.rounds.split(",")]
    print("| run | " + " | ".join(f"round {r}" for r in picks) + " | best | final |")
    print("|---|" + "---|" * (len(picks) + 2))
    for run in args.runs:
        acc = read_accuracy(run)
        final = 100 * float(json.loads((run / "summary.json").read_text())["test_accuracy"])
        cells = [f"{acc[r]:.1f}" if r in acc else "-" for r in picks]
        label = f"{run.parent.parent.name} {run.name}"
        print(f"| {label} | " + " | ".join(cells) + f" | {max(acc.values()):.1f} | {final:.2f} |")


if __name__ == "__main__":
    main()
