"""The run directory of a selection run: per-round metrics, the summary, the ledger, the plots."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from fedprivacy.experiments import plots
from fedprivacy.experiments.selection_run import MAX_DENSE_CELLS, SelectionResult
from fedprivacy.run_directory import write_run_directory

__all__ = ["per_round_csv", "write_outputs"]


def per_round_csv(result: SelectionResult) -> str:
    """Per-round metrics as CSV text."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(
        [
            "round",
            "aggregated",
            "average_cardinality",
            "fairness_gap",
            "t_weak_lower",
            "t_weak_upper",
            "official_rref_upper",
        ]
    )
    card = result.ledger.cardinalities
    for t in range(result.ledger.rounds):
        row: list[object] = [
            t,
            int(card[t]),
            f"{result.cardinality[t]:.6g}",
            f"{result.fairness_gap[t]:.6g}",
        ]
        if result.t_weak is None:
            row += ["", "", ""]
        else:
            row += [
                _fmt(result.t_weak.lower[t]),
                _fmt(result.t_weak.upper[t]),
                _fmt(result.t_weak.official_upper[t]),
            ]
        writer.writerow(row)
    return buf.getvalue()


def _fmt(x: float) -> str:
    return "" if np.isnan(x) else str(int(x))


def write_outputs(result: SelectionResult, out_dir: str | Path) -> list[Path]:
    """Write ``metrics.csv``, ``summary.json``, ``participation.csv`` and plots into ``out_dir``."""
    files: dict[str, object] = {
        "metrics.csv": per_round_csv(result),
        "summary.json": result.summary(),
    }
    if result.secure is not None:
        files["secagg.csv"] = result.secure.to_csv()

    def ledger_and_plots(folder: Path) -> list[Path]:
        written = []
        if result.config.users * result.config.rounds <= MAX_DENSE_CELLS:
            result.ledger.to_csv(folder / "participation.csv")
            written.append(folder / "participation.csv")
        return written + plots.plot_run(result, folder)

    return write_run_directory(out_dir, files, ledger_and_plots)
