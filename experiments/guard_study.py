"""The guard study on the demo's setting: a table (Markdown) and a plot for the docs.

Usage: python experiments/guard_study.py [--rounds 500] [--search-seconds 0.25]
                                        [--out docs/results/guard]

Writes ``table.md``, ``rows.json`` and ``guard_study.png`` into ``--out`` and prints the table;
one line per finished run on stderr while it works.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from fedprivacy.experiments.guard_study import (
    GuardStudyConfig,
    markdown_table,
    plot_guard_study,
    run_guard_study,
)


def main() -> None:
    """Run the study, write the table and the plot, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--search-seconds", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("docs/results/guard"))
    args = parser.parse_args()
    started = time.perf_counter()
    cfg = GuardStudyConfig(rounds=args.rounds, seed=args.seed, search_seconds=args.search_seconds)
    rows = run_guard_study(cfg, progress=lambda row: print(row, file=sys.stderr, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    rows_json = json.dumps([dataclasses.asdict(r) for r in rows], indent=1)
    (args.out / "rows.json").write_text(rows_json + "\n")
    header = (
        f"N = {cfg.users}, K = {cfg.per_round}, heterogeneous dropout, {cfg.rounds} rounds, "
        f"seed {cfg.seed}, exact search up to {cfg.search_seconds:g} s a round; "
        f"{time.perf_counter() - started:.0f} s on {time.strftime('%Y-%m-%d')}\n\n"
    )
    (args.out / "table.md").write_text(header + markdown_table(rows))
    plot_guard_study(rows, args.out / "guard_study.png")
    print(header + markdown_table(rows))


if __name__ == "__main__":
    main()
