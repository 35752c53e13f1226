"""Table and plot of a global learning-rate sweep of 200-round ULDP runs on MNIST (issue 34).

usage: python experiments/device/uldp_lr_sweep.py SWEEP_DIR FIG5_DIR [--png FILE]

SWEEP_DIR holds ``fedprivacy uldp --out`` folders named ``METHOD-etaG`` (``ULDP-AVG-w-eta20``):
a finished run's ``rounds.csv``, or an unfinished run's ``checkpoint.pt`` (its rounds so far) or
``rounds-partial.csv`` (the same rounds exported: round, metric, ...).
FIG5_DIR holds the Fig. 5e curves (``e-METHOD.csv`` of ``fedprivacy reproduce uldp-fig5``), the
runs at the default eta_g = 10. Prints a markdown table of test accuracy at chosen rounds; with
``--png``, plots accuracy per round, one panel per method.
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

ROUNDS = (10, 50, 100, 130, 200)
METHODS = ("ULDP-AVG-w", "ULDP-AVG", "ULDP-SGD")


def sweep_run(run: Path) -> dict[int, float]:
    """Accuracy by round of one ``fedprivacy uldp --out`` folder, finished or not."""
    for name in ("rounds.csv", "rounds-partial.csv"):
        if (run / name).is_file():
            with (run / name).open() as fh:
                return {int(r["round"]): float(r["metric"]) for r in csv.DictReader(fh)}
    state = torch.load(run / "checkpoint.pt", weights_only=False)  # our own run's file
    return {int(r["round"]): float(r["metric"]) for r in state["records"]}


def figure_curve(path: Path) -> dict[int, float]:
    """Accuracy by round of a figure curve (round 0 is the initial model)."""
    with path.open() as fh:
        return {int(r["round"]): float(r["accuracy_mean"]) for r in csv.DictReader(fh)}


def curves(sweep: Path, fig5: Path) -> dict[tuple[str, float], dict[int, float]]:
    """(method, eta_g) -> accuracy by round."""
    out = {}
    for run in sorted(sweep.iterdir()):
        match = re.fullmatch(r"(.+)-eta([0-9.]+)", run.name)
        if match and run.is_dir():
            out[(match[1], float(match[2]))] = sweep_run(run)
    for method in METHODS:
        if (fig5 / f"e-{method}.csv").is_file():
            out[(method, 10.0)] = figure_curve(fig5 / f"e-{method}.csv")
    return out


def main() -> None:
    """Print the table, draw the plot."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("sweep", type=Path)
    ap.add_argument("fig5", type=Path)
    ap.add_argument("--png", type=Path)
    args = ap.parse_args()
    data = curves(args.sweep, args.fig5)
    print("| method | eta_g | rounds run | " + " | ".join(f"round {r}" for r in ROUNDS) + " |")
    print("|---|---|---|" + "---|" * len(ROUNDS))
    for (method, eta), acc in sorted(data.items()):
        cells = [f"{acc[r]:.4f}" if r in acc else "-" for r in ROUNDS]
        print(f"| {method} | {eta:g} | {max(acc)} | " + " | ".join(cells) + " |")
    if args.png:
        fig, axes = plt.subplots(1, len(METHODS), figsize=(13, 3.6), sharey=True)
        for ax, method in zip(axes, METHODS, strict=True):
            for (m, eta), acc in sorted(data.items()):
                if m == method:
                    rounds = sorted(r for r in acc if r > 0)
                    ax.plot(rounds, [acc[r] for r in rounds], label=f"eta_g {eta:g}")
            ax.set(title=f"{method}, Fig. 5e setting", xlabel="round", ylim=(0.5, 1.0))
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right")
        axes[0].set_ylabel("test accuracy")
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
