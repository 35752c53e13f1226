"""The whole NA-FGD regression study in worker processes: tables, PNGs and results files.

Usage: python experiments/regression_study.py [OUT] [NAMES ...] [--workers 2] [--replications R]

``fedprivacy reproduce regression-main`` (and ``regression-b1`` ... ``regression-theory``) runs one
experiment; this runs the ones named (default: all) in ``--workers`` processes and writes their
tables and figures into ``OUT`` (default ``results/regression``).
"""

from __future__ import annotations

import argparse

from fedprivacy.experiments.regression_study import run_regression_study


def main() -> None:
    """Run the study and print where the results went."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="results/regression")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--replications", type=int, default=None)
    args = parser.parse_args()
    res = run_regression_study(
        args.out,
        names=args.names or None,
        workers=args.workers,
        replications=args.replications,
        log=lambda s: print(s, flush=True),
    )
    print(f"done in {res['seconds']} s wall, {res['cpu_seconds']} s CPU: {', '.join(res['files'])}")


if __name__ == "__main__":
    main()
